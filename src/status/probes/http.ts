// One HTTP(S) GET probe, the way kubelet and Istio's app prober send it: from a chosen source
// address, certificates not verified, keep-alive off unless asked, the whole exchange (redirects
// included) bounded by one timeout, at most 10 KiB of body kept. Redirects follow kubelet's rules:
// to the same host they are followed (at most 10); to another host, or without a Location, the 3xx
// answer itself is returned (the caller treats a final 3xx as success).

import type http from "node:http";
import type https from "node:https";
import { isIPv6 } from "node:net";
import { errorMessage } from "../../lib/errors.ts";
import { joinHostPort } from "../loopback.ts";

export const MAX_PROBE_BODY = 10 * 1024;
export const MAX_REDIRECTS = 10;
const FOLLOWED = new Set([301, 302, 303, 307, 308]);

export interface HttpProbeRequest {
  scheme: "http" | "https";
  host: string;
  port: number;
  path: string;
  /** Request headers (already filtered); `host` in here overrides the Host header. */
  headers: Record<string, string>;
  timeoutMs: number;
  /** Bind the client socket to this address (127.0.0.6 / ::6). */
  localAddress?: string;
  /** Reuse connections through this agent; default: a fresh connection closed after the answer. */
  agent?: http.Agent;
}

export interface HttpProbeResponse {
  status: number;
  body: Uint8Array;
  contentType?: string;
  /** The URL that gave this answer (after redirects). */
  url: string;
}

export class ProbeTimeoutError extends Error {
  override name = "ProbeTimeoutError";
}

/** Send the probe; throws on transport errors, timeouts and redirect loops (the caller answers 500). */
export async function httpProbe(req: HttpProbeRequest): Promise<HttpProbeResponse> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new ProbeTimeoutError(`timed out after ${req.timeoutMs}ms`)), req.timeoutMs);
  try {
    const first = new URL(`${req.scheme}://${joinHostPort(req.host, req.port)}${req.path}`);
    let url = first;
    const headers = { ...req.headers };
    for (let followed = 0; ; followed++) {
      const client = url.protocol === "https:" ? await import("node:https") : await import("node:http");
      const res = await once(client, url, headers, req, deadline.signal);
      const loc = res.location;
      if (!FOLLOWED.has(res.status) || !loc) return res;
      const next = new URL(loc, url);
      if (next.hostname !== first.hostname) return res;
      if (followed >= MAX_REDIRECTS) throw new Error(`stopped after ${MAX_REDIRECTS} redirects`);
      // A custom Host survives a relative redirect; an absolute one names its own host.
      if (/^[a-z][a-z0-9+.-]*:/i.test(loc)) headers.host = next.host;
      url = next;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** One request with node:http(s) (loaded with the first probe, not at the agent's start). */
function once(
  client: { request: typeof https.request },
  url: URL,
  headers: Record<string, string>,
  req: HttpProbeRequest,
  signal: AbortSignal,
): Promise<HttpProbeResponse & { location?: string }> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const isHttps = url.protocol === "https:";
    const hostname = url.hostname.replace(/^\[|\]$/g, "");
    const h: Record<string, string> = { ...headers };
    if (!req.agent) h.connection = "close";
    const opts: https.RequestOptions = {
      method: "GET",
      hostname,
      port: url.port || (isHttps ? 443 : 80),
      path: url.pathname + url.search,
      headers: h,
      agent: req.agent ?? false,
      rejectUnauthorized: false,
    };
    if (req.localAddress) {
      opts.localAddress = req.localAddress;
      opts.family = isIPv6(req.localAddress) ? 6 : 4;
    }
    const onAbort = () => {
      r.destroy();
      reject(signal.reason);
    };
    const r = client.request(opts, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = () => {
        signal.removeEventListener("abort", onAbort);
        const loc = res.headers.location;
        resolve({
          status: res.statusCode ?? 0,
          body: new Uint8Array(Buffer.concat(chunks)),
          contentType: res.headers["content-type"],
          url: url.toString(),
          location: typeof loc === "string" ? loc : undefined,
        });
      };
      res.on("data", (d: Buffer) => {
        if (size >= MAX_PROBE_BODY) return;
        const part = d.subarray(0, MAX_PROBE_BODY - size);
        chunks.push(part);
        size += part.length;
        if (size >= MAX_PROBE_BODY && !req.agent) {
          finish();
          res.destroy();
        }
      });
      res.on("end", finish);
      res.on("error", (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(new Error(`reading ${url}: ${errorMessage(e)}`));
      });
    });
    r.on("error", (e) => {
      signal.removeEventListener("abort", onAbort);
      reject(new Error(`GET ${url}${req.localAddress ? ` from ${req.localAddress}` : ""}: ${errorMessage(e)}`));
    });
    signal.addEventListener("abort", onAbort, { once: true });
    r.end();
  });
}
