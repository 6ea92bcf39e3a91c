// Local mode's side of the relay (LOCAL_XDS_PATH): the in-process file-backed xDS server, and the
// upstream the relay dials it through, over loopback in plaintext, exactly as it would dial
// istiod. Imported by the composition root only when LOCAL_XDS_PATH is set.

import type { NameTableSink } from "../lib/interfaces.ts";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Component } from "../lib/component.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import type { Readiness } from "../lib/readiness.ts";
import { IstiodUpstream, nodeFiles, type StreamMeta, type Upstream, type UpstreamHandlers, type UpstreamStream } from "../xds/upstream.ts";
import { dialConfigFrom } from "../xds/upstream-config.ts";
import { Code } from "../xds/types.ts";
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
  deps: {
    log: Logger;
    registry: Registry;
    readiness: Readiness;
    afterStart?: Promise<unknown>;
    nameTables?: NameTableSink;
    /** How to run the agent again: the file is then converted by a short-lived copy of it (converter.ts). */
    selfCommand?: readonly string[];
  },
): LocalSide | undefined {
  const server = createLocalXds(cfg, {
    log: deps.log,
    registry: deps.registry,
    readiness: deps.readiness,
    listen: "127.0.0.1:0",
    ...(deps.afterStart ? { initAfter: deps.afterStart } : {}),
    ...(deps.selfCommand ? { selfCommand: deps.selfCommand } : {}),
  });
  if (!server) return undefined;
  if (deps.nameTables) {
    // No istiod, so no NDS: the DNS proxy's readiness would wait for a table forever.
    deps.log.warn(
      `local mode: ${cfg.env.LOCAL_XDS_PATH} carries no DNS name table (istiod sends it over NDS); the DNS proxy (ISTIO_META_DNS_CAPTURE=true) starts with an empty table and forwards every query to the host's resolvers. Set ISTIO_META_DNS_CAPTURE=false to leave DNS uncaptured`,
    );
    deps.nameTables.updateNameTable(new Uint8Array(0));
  }
  const upstream = new LocalUpstream(cfg, server);
  return { upstream, describe: upstream.describe, component: server };
}

/**
 * The dial's "no answer" limit toward the local server (istiod's is 5 s). The server is in this
 * process, bound before the relay can dial: no answer can only mean this process's event loop is
 * held (certificate generation under emulation has held it for seconds), and a timer that fires
 * after such a stall fires before the answer waiting on the socket is read.
 */
const LOCAL_CONNECT_TIMEOUT_MS = 60_000;

/** Request bytes a stream may hold before the local server has loaded, before write() asks the relay to wait. */
const HELD_BYTES_LIMIT = 256 * 1024;

/**
 * Dials the local server over loopback once its file has loaded (its port is known only after
 * start). Not before: the first load (once the schemas and the file, now the file's conversion) ran on the agent's one event loop, and under
 * emulation or load it has taken longer than the dial's 5 s "no answer" timer, which then fired
 * the moment the loop was free, before the server's answer already waiting on the socket was read,
 * failing the stream (and see LOCAL_CONNECT_TIMEOUT_MS). Requests the relay writes meanwhile are
 * held (copied) and sent in order.
 */
class LocalUpstream implements Upstream {
  private inner: IstiodUpstream | undefined;
  constructor(
    private readonly cfg: AgentConfig,
    private readonly server: LocalXdsServer,
  ) {}

  get describe(): string {
    return `local xDS server (LOCAL_XDS_PATH=${this.cfg.env.LOCAL_XDS_PATH})`;
  }

  private istiod(): IstiodUpstream {
    if (!this.inner) {
      const proxyConfig = { ...this.cfg.proxyConfig, discoveryAddress: this.server.address(), controlPlaneAuthPolicy: "NONE" };
      const dial = dialConfigFrom({ ...this.cfg, proxyConfig }, nodeFiles);
      this.inner = new IstiodUpstream({ ...dial, connectTimeoutMs: LOCAL_CONNECT_TIMEOUT_MS });
    }
    return this.inner;
  }

  open(meta: StreamMeta, handlers: UpstreamHandlers): UpstreamStream {
    let stream: UpstreamStream | undefined;
    let cancelled = false;
    let paused = false;
    let held: Uint8Array[] = [];
    let heldBytes = 0;
    let refused = false;
    const dial = () => {
      if (cancelled) return;
      const s = this.istiod().open(meta, handlers);
      stream = s;
      if (paused) s.pause();
      for (const b of held) s.write(b);
      held = [];
      if (refused) handlers.onDrain();
    };
    void this.server.loaded().then(dial);
    return {
      write: (bytes) => {
        if (stream) return stream.write(bytes);
        if (cancelled) return true;
        held.push(Uint8Array.prototype.slice.call(bytes)); // the caller may reuse its buffer
        heldBytes += bytes.length;
        if (heldBytes < HELD_BYTES_LIMIT) return true;
        refused = true;
        return false;
      },
      pause: () => (stream ? stream.pause() : void (paused = true)),
      resume: () => (stream ? stream.resume() : void (paused = false)),
      close: () => {
        if (stream) return stream.close();
        if (cancelled) return;
        cancelled = true;
        held = [];
        handlers.onClose({ code: Code.CANCELLED, message: "stream closed by the agent" }, false);
      },
    };
  }
}
