// The few Envoy admin API calls the agent makes (Istio: pkg/envoy/admin.go and agent.go):
// POST /drain_listeners, GET /stats?usedonly&filter=..., GET /ready. Behind an interface so the
// supervisor can be tested with a real fake Envoy or an in-memory stand-in.
//
// These calls go over their own loopback socket (one HTTP/1.1 request per connection), never
// through fetch(): Bun's fetch() shares one connection pool per process, so downloads that hang
// (Wasm modules from a slow registry) could otherwise hold every slot and starve the drain on
// SIGTERM and the readiness probe. A raw client costs less memory than node:http (docs/wasm.md).

import { drainListenersPath } from "./drainplan.ts";
import { EnvoyError } from "./errors.ts";
import { localRequest } from "../lib/localhttp.ts";
import { errorMessage } from "../lib/errors.ts";

export interface EnvoyAdmin {
  /** POST drain_listeners (`inboundonly&` for sidecars, `&skip_exit` for /drain). */
  drainListeners(inboundOnly: boolean, skipExit: boolean): Promise<string>;
  /** GET /stats?usedonly&filter=<filter>; the raw text. */
  stats(filter: string, timeoutMs: number): Promise<string>;
  /** GET /ready; Envoy answers 200 `LIVE` once initialized. */
  ready(timeoutMs: number): Promise<{ status: number; body: string }>;
}

/** The largest admin answer read (stats text of a big mesh is a few MiB). */
export const MAX_ADMIN_RESPONSE_BYTES = 16 * 1024 * 1024;

/** `http://127.0.0.1:15000` or `http://[::1]:15000`. */
export function adminBaseUrl(host: string, port: number): string {
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * One request to a loopback admin URL on a connection of its own (not fetch()'s shared pool).
 * Errors name the method and URL; a timeout says `timed out after N ms`.
 */
export async function adminRequest(method: string, url: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  try {
    const res = await localRequest({
      host: u.hostname.replace(/^\[|\]$/g, ""),
      port: Number(u.port || 80),
      method,
      path: `${u.pathname}${u.search}`.replace(/^\//, ""),
      body: "",
      timeoutMs,
      maxBytes: MAX_ADMIN_RESPONSE_BYTES,
    });
    return { status: res.status, body: res.body.toString("utf8") };
  } catch (e) {
    const why = /timed out/.test(errorMessage(e)) ? `timed out after ${timeoutMs}ms` : errorMessage(e);
    throw new Error(`${method} ${url}: ${why}`, { cause: e });
  }
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
    try {
      return await adminRequest("GET", `${this.base}/ready`, timeoutMs);
    } catch (err) {
      throw new EnvoyError(errorMessage(err), "ready", { cause: err });
    }
  }

  private async call(method: string, path: string, timeoutMs: number, op: string): Promise<string> {
    const url = `${this.base}${path}`;
    let res: { status: number; body: string };
    try {
      res = await adminRequest(method, url, timeoutMs);
    } catch (err) {
      throw new EnvoyError(errorMessage(err), op, { cause: err });
    }
    if (res.status >= 400) throw new EnvoyError(`${method} ${url}: HTTP ${res.status} ${res.body.trim().slice(0, 200)}`, op);
    return res.body;
  }
}
