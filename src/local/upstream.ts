// Local mode's side of the relay (LOCAL_XDS_PATH): the in-process file-backed xDS server, and the
// upstream the relay dials it through, over loopback in plaintext, exactly as it would dial
// istiod. Imported by the composition root only when LOCAL_XDS_PATH is set.

import type { AgentConfig } from "../config/agentconfig.ts";
import type { Component } from "../lib/component.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import type { Readiness } from "../lib/readiness.ts";
import { IstiodUpstream, nodeFiles, type StreamMeta, type Upstream, type UpstreamHandlers, type UpstreamStream } from "../xds/upstream.ts";
import { dialConfigFrom } from "../xds/upstream-config.ts";
import { createLocalXds, type LocalXdsServer } from "./index.ts";

export interface LocalSide {
  /** What the relay dials instead of istiod. */
  upstream: Upstream;
  /** How the upstream is named in logs. */
  describe: string;
  /**
   * The local server as a component. Started before the relay, so the root stops it after the
   * relay has stopped: the message in flight finishes (nothing half-written) before Envoy's stream ends.
   */
  component: Component;
}

export function createLocalSide(
  cfg: AgentConfig,
  deps: { log: Logger; registry: Registry; readiness: Readiness; afterStart?: Promise<unknown> },
): LocalSide | undefined {
  const server = createLocalXds(cfg, {
    log: deps.log,
    registry: deps.registry,
    readiness: deps.readiness,
    listen: "127.0.0.1:0",
    ...(deps.afterStart ? { initAfter: deps.afterStart } : {}),
  });
  if (!server) return undefined;
  const upstream = new LocalUpstream(cfg, server);
  return { upstream, describe: upstream.describe, component: server };
}

/** Dials the local server once it is listening (its port is known only after start). */
class LocalUpstream implements Upstream {
  private inner: IstiodUpstream | undefined;
  constructor(
    private readonly cfg: AgentConfig,
    private readonly server: LocalXdsServer,
  ) {}

  get describe(): string {
    return `local xDS server (LOCAL_XDS_PATH=${this.cfg.env.LOCAL_XDS_PATH})`;
  }

  open(meta: StreamMeta, handlers: UpstreamHandlers): UpstreamStream {
    if (!this.inner) {
      const proxyConfig = { ...this.cfg.proxyConfig, discoveryAddress: this.server.address(), controlPlaneAuthPolicy: "NONE" };
      this.inner = new IstiodUpstream(dialConfigFrom({ ...this.cfg, proxyConfig }, nodeFiles));
    }
    return this.inner.open(meta, handlers);
  }
}
