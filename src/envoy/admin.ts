// The few Envoy admin API calls the agent makes (Istio: pkg/envoy/admin.go and agent.go):
// POST /drain_listeners, GET /stats?usedonly&filter=..., GET /ready. Behind an interface so the
// supervisor can be tested with a real fake Envoy or an in-memory stand-in.

import { drainListenersPath } from "./drainplan.ts";
import { EnvoyError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

export interface EnvoyAdmin {
  /** POST drain_listeners (`inboundonly&` for sidecars, `&skip_exit` for /drain). */
  drainListeners(inboundOnly: boolean, skipExit: boolean): Promise<string>;
  /** GET /stats?usedonly&filter=<filter>; the raw text. */
  stats(filter: string, timeoutMs: number): Promise<string>;
  /** GET /ready; Envoy answers 200 `LIVE` once initialized. */
  ready(timeoutMs: number): Promise<{ status: number; body: string }>;
}

/** `http://127.0.0.1:15000` or `http://[::1]:15000`. */
export function adminBaseUrl(host: string, port: number): string {
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

export class HttpEnvoyAdmin implements EnvoyAdmin {
  readonly base: string;

  constructor(
    host: string,
    port: number,
    private readonly requestTimeoutMs = 5000,
  ) {
    this.base = adminBaseUrl(host, port);
  }

  async drainListeners(inboundOnly: boolean, skipExit: boolean): Promise<string> {
    return this.call("POST", drainListenersPath(inboundOnly, skipExit), this.requestTimeoutMs, "drain_listeners");
  }

  async stats(filter: string, timeoutMs: number): Promise<string> {
    return this.call("GET", `/stats?usedonly&filter=${encodeURIComponent(filter)}`, timeoutMs, "stats");
  }

  async ready(timeoutMs: number): Promise<{ status: number; body: string }> {
    const url = `${this.base}/ready`;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      return { status: res.status, body: await res.text() };
    } catch (err) {
      throw new EnvoyError(`GET ${url}: ${errorMessage(err)}`, "ready", { cause: err });
    }
  }

  private async call(method: string, path: string, timeoutMs: number, op: string): Promise<string> {
    const url = `${this.base}${path}`;
    let res: Response;
    try {
      res = await fetch(url, { method, signal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      throw new EnvoyError(`${method} ${url}: ${errorMessage(err)}`, op, { cause: err });
    }
    const body = await res.text().catch(() => "");
    if (res.status >= 400) throw new EnvoyError(`${method} ${url}: HTTP ${res.status} ${body.trim().slice(0, 200)}`, op);
    return body;
  }
}
