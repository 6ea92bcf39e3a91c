// /app-health/<container>/{livez,readyz,startupz} and /app-lifecycle/<container>/{prestopz,poststartz}:
// kubelet's probes, rewritten by the injector to the status port, sent on to the application from
// 127.0.0.6 (::6) so the inbound capture lets them through (Istio status/server.go handleAppProbe).

import type http from "node:http";
import type { Logger } from "../lib/log.ts";
import type { AppProbe, AppProbers, HttpGetProbe } from "./appprobers.ts";
import { errorMessage } from "../lib/errors.ts";
import { joinHostPort } from "./loopback.ts";
import { grpcProbe } from "./probes/grpc.ts";
import { httpProbe } from "./probes/http.ts";
import { tcpProbe } from "./probes/tcp.ts";

/** Headers never forwarded to the application: hop-by-hop ones, and encodings we would not undo. */
const NOT_FORWARDED = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "content-length",
  "accept-encoding",
]);

export interface AppProbeHandlerOptions {
  probers: AppProbers;
  /** Where probes go: INSTANCE_IP, or `localhost` with REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION. */
  destination: string;
  /** Source address to bind (127.0.0.6 / ::6); undefined binds none. */
  sourceAddress?: string;
  /** The status server's bound port (a Host naming it is rewritten to the app port). */
  statusPort: () => number;
  /** ENABLE_PROBE_KEEPALIVE_CONNECTIONS. */
  keepAlive?: boolean;
  /** The "probes" scope; on the status thread, lines sent to the main thread's logger. */
  log: Pick<Logger, "info" | "error">;
}

export class AppProbeHandler {
  private readonly agents = new Map<string, http.Agent>();

  constructor(private readonly opts: AppProbeHandlerOptions) {}

  /** Log what is wrong with the configuration once, at start. */
  reportConfigProblems(): void {
    const { configError, invalid, probes } = this.opts.probers;
    if (configError) this.opts.log.error(configError);
    for (const reason of invalid.values()) this.opts.log.error(reason);
    if (probes.size)
      this.opts.log.info(`app probes: ${[...probes.keys()].join(", ")} -> ${this.opts.destination} from ${this.opts.sourceAddress ?? "any address"}`);
  }

  close(): void {
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
  }

  async handle(path: string, req: Request): Promise<Response> {
    const { probes, invalid, configError } = this.opts.probers;
    const probe = probes.get(path);
    if (!probe) {
      const why = invalid.get(path) ?? configError;
      if (why) return text(500, why);
      this.opts.log.error(`Prober does not exists url ${path}`);
      return text(400, `app prober config does not exists for ${path}`);
    }
    switch (probe.kind) {
      case "httpGet":
        return this.httpGet(path, probe, req);
      case "tcpSocket": {
        const err = await tcpProbe({ host: this.opts.destination, port: probe.port, timeoutMs: probe.timeoutMs, localAddress: this.opts.sourceAddress });
        if (err) this.opts.log.error(`tcp probe ${path} failed: ${err}`);
        return text(err ? 500 : 200, "");
      }
      case "grpc": {
        const err = await grpcProbe({
          host: this.opts.destination,
          port: probe.port,
          service: probe.service,
          timeoutMs: probe.timeoutMs,
          localAddress: this.opts.sourceAddress,
          userAgent: req.headers.get("user-agent") ?? undefined,
        });
        if (err) this.opts.log.error(`grpc probe ${path} failed: ${err}`);
        return text(err ? 500 : 200, "");
      }
    }
  }

  /** The headers sent to the app: incoming ones (minus hop-by-hop), the spec's, and the rewritten Host. */
  forwardedHeaders(probe: HttpGetProbe, req: Request): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of req.headers) if (!NOT_FORWARDED.has(k)) out[k] = v;
    for (const [k, v] of probe.headers) {
      const key = k.toLowerCase();
      if (key === "host" ? !req.headers.has("host") : !(key in out)) out[key] = v;
    }
    const host = req.headers.get("host");
    if (host) out.host = rewriteHostPort(host, this.opts.statusPort(), probe.port);
    return out;
  }

  private async httpGet(path: string, probe: AppProbe & HttpGetProbe, req: Request): Promise<Response> {
    try {
      const res = await httpProbe({
        scheme: probe.scheme,
        host: this.opts.destination,
        port: probe.port,
        path: probe.path,
        headers: this.forwardedHeaders(probe, req),
        timeoutMs: probe.timeoutMs,
        localAddress: this.opts.sourceAddress,
        agent: await this.agentFor(path, probe),
      });
      // A final redirect (another host, or no Location) counts as success, as in kubelet.
      if (res.status >= 300 && res.status < 400) return text(200, "");
      const headers: Record<string, string> = {};
      if (res.contentType) headers["content-type"] = res.contentType;
      return new Response(res.body, { status: res.status, headers });
    } catch (e) {
      this.opts.log.error(`Request to probe app failed: ${errorMessage(e)}, original URL path = ${path}, app URL path = ${probe.path}`);
      return text(500, "");
    }
  }

  private async agentFor(path: string, probe: HttpGetProbe): Promise<http.Agent | undefined> {
    if (!this.opts.keepAlive) return undefined;
    let a = this.agents.get(path);
    if (!a) {
      // node:http(s) load with the first probe, not at the agent's start.
      a =
        probe.scheme === "https"
          ? new (await import("node:https")).Agent({ keepAlive: true, rejectUnauthorized: false })
          : new (await import("node:http")).Agent({ keepAlive: true });
      const raced = this.agents.get(path);
      if (raced) {
        a.destroy();
        return raced;
      }
      this.agents.set(path, a);
    }
    return a;
  }
}

/** Istio: when the incoming Host names the status port, point it at the app's port instead. */
export function rewriteHostPort(host: string, statusPort: number, appPort: number): string {
  const m = host.match(/^(\[[^\]]+\]|[^:]+):(\d+)$/);
  if (!m || Number(m[2]) !== statusPort) return host;
  return joinHostPort(m[1]!.replace(/^\[|\]$/g, ""), appPort);
}

function text(status: number, body: string): Response {
  return new Response(body, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
}
