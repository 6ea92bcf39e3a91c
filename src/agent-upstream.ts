// The agent's control-plane side: the xDS relay towards istiod or, in local mode
// (LOCAL_XDS_PATH), towards the in-process file-backed xDS server, which the relay dials over
// loopback exactly as it would dial istiod (plaintext). Kept apart from agent.ts so the relay's
// wiring lives in one place. Local mode's code is imported only when LOCAL_XDS_PATH is set.

import type { AgentConfig } from "./config/agentconfig.ts";
import type { Component } from "./lib/component.ts";
import type { HealthReporter, NameTableSink, TrustBundleSink } from "./lib/interfaces.ts";
import type { LogSink } from "./lib/log.ts";
import type { Registry } from "./lib/metrics.ts";
import type { Readiness } from "./lib/readiness.ts";
import { createXdsProxy } from "./xds/proxy.ts";
import { IstiodUpstream, nodeFiles, type StreamMeta, type Upstream, type UpstreamHandlers, type UpstreamStream } from "./xds/upstream.ts";
import { dialConfigFrom } from "./xds/upstream-config.ts";
import type { LocalXdsServer } from "./local/index.ts";

export interface UpstreamDeps {
  sink: LogSink;
  registry: Registry;
  readiness: Readiness;
  nameTables?: NameTableSink;
  trustBundles?: TrustBundleSink;
  dnsEnabled: boolean;
  /** Background work (loading the local xDS file) waits for this: the agent's start path is over. */
  afterStart?: Promise<unknown>;
}

export interface UpstreamSide {
  /** Started in order by the composition root (the local server, if any, before the relay). */
  components: Component[];
  /** Where VM health transitions go. */
  health: HealthReporter;
}

export async function createUpstreamSide(cfg: AgentConfig, deps: UpstreamDeps): Promise<UpstreamSide> {
  const local = cfg.env.LOCAL_XDS_PATH
    ? (await import("./local/index.ts")).createLocalXds(cfg, { log: deps.sink.logger("localxds"), registry: deps.registry, readiness: deps.readiness, listen: "127.0.0.1:0", ...(deps.afterStart ? { initAfter: deps.afterStart } : {}) })
    : undefined;
  const xds = createXdsProxy(cfg, {
    log: deps.sink.logger("xdsproxy"),
    registry: deps.registry,
    readiness: deps.readiness,
    nameTables: deps.nameTables,
    trustBundles: deps.trustBundles,
    dnsEnabled: deps.dnsEnabled,
    ...(local ? { upstream: new LocalUpstream(cfg, local) } : {}),
  });
  // Istio's line (pkg/istio-agent xds_proxy.go) naming where the relay dials and for which cluster.
  const upstreamAddress = local ? `local xDS server (LOCAL_XDS_PATH=${cfg.env.LOCAL_XDS_PATH})` : (cfg.proxyConfig.discoveryAddress ?? "");
  deps.sink.logger("xdsproxy").info(`Initializing with upstream address ${JSON.stringify(upstreamAddress)} and cluster ${JSON.stringify(cfg.env.ISTIO_META_CLUSTER_ID || "Kubernetes")}`);
  return { components: local ? [stopsAfter(local, xds), xds] : [xds], health: xds };
}

/**
 * At shutdown the local server keeps serving until the relay has stopped, so the relay can let
 * the message in flight finish (nothing half-written) before it ends Envoy's stream.
 */
function stopsAfter(inner: Component, first: Component): Component {
  const own = new AbortController();
  return {
    name: inner.name,
    async start(signal) {
      signal.addEventListener("abort", () => void (first.stopped?.() ?? Promise.resolve()).finally(() => own.abort()), { once: true });
      await inner.start(own.signal);
    },
    stopped: () => inner.stopped?.() ?? Promise.resolve(),
  };
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
