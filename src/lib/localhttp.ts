// A minimal HTTP/1.1 client for `agent request`: it sends the method and body exactly as given,
// as Go's net/http does for pilot-agent (`get` stays `get`, a GET may carry a body). fetch() and
// Bun's node:http both normalise the method and refuse or mangle a body on GET, so this writes
// the request itself. One request per connection (Connection: close); the response is read to
// EOF under a size cap and decoded (Content-Length, chunked, or close-delimited).

import { connect, type Socket } from "node:net";
import { lookup } from "node:dns/promises";

/** The largest response accepted (config_dump of a big mesh is tens of MiB). */
export const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

export class LocalHttpError extends Error {
  override name = "LocalHttpError";
}

export interface LocalResponse {
  status: number;
  body: Buffer;
}

export interface LocalRequest {
  host: string;
  port: number;
  method: string;
  /** Path without the leading slash. */
  path: string;
  body: string;
  timeoutMs: number;
  maxBytes?: number;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The request bytes Go's client would send (header order aside). */
export function renderRequest(req: Pick<LocalRequest, "host" | "port" | "method" | "path" | "body">): Buffer {
  if (!TOKEN.test(req.method)) throw new LocalHttpError(`invalid method ${JSON.stringify(req.method)}`);
  if (/[\s]/.test(req.path)) throw new LocalHttpError(`invalid path ${JSON.stringify(req.path)}: contains white space`);
  const body = Buffer.from(req.body, "utf8");
  const head = [`${req.method} /${req.path} HTTP/1.1`, `Host: ${req.host}:${req.port}`, "User-Agent: Go-http-client/1.1"];
  // Go (transfer.go shouldSendContentLength) sends Content-Length for a non-empty body, and
  // "0" for an empty one only on POST, PUT and PATCH (spelled exactly so).
  if (body.length > 0 || ["POST", "PUT", "PATCH"].includes(req.method)) head.push(`Content-Length: ${body.length}`);
  head.push("Connection: close", "", "");
  return Buffer.concat([Buffer.from(head.join("\r\n"), "latin1"), body]);
}

/** Parse a complete (read-to-EOF) HTTP/1.1 response. */
export function parseResponse(raw: Buffer, method: string): LocalResponse {
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) throw new LocalHttpError("malformed HTTP response: no end of headers");
  const lines = raw.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
  if (!m) throw new LocalHttpError(`malformed HTTP status line ${JSON.stringify((lines[0] ?? "").slice(0, 80))}`);
  const status = Number(m[1]);
  const headers = new Map<string, string>();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
  }
  const rest = raw.subarray(end + 4);
  if (method.toUpperCase() === "HEAD" || status === 204 || status === 304) return { status, body: Buffer.alloc(0) };
  if ((headers.get("transfer-encoding") ?? "").toLowerCase().includes("chunked")) return { status, body: dechunk(rest) };
  const len = headers.get("content-length");
  if (len !== undefined) {
    const n = Number(len);
    if (!Number.isInteger(n) || n < 0) throw new LocalHttpError(`malformed Content-Length ${JSON.stringify(len)}`);
    if (rest.length < n) throw new LocalHttpError(`response body truncated: ${rest.length} of ${n} bytes`);
    return { status, body: rest.subarray(0, n) };
  }
  return { status, body: rest };
}

function dechunk(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf("\r\n", at);
    if (eol < 0) throw new LocalHttpError("chunked response truncated");
    const size = parseInt(data.subarray(at, eol).toString("latin1").split(";")[0]!.trim(), 16);
    if (!Number.isFinite(size) || size < 0) throw new LocalHttpError("malformed chunk size");
    if (size === 0) return Buffer.concat(parts);
    const start = eol + 2;
    if (start + size > data.length) throw new LocalHttpError("chunked response truncated");
    parts.push(data.subarray(start, start + size));
    at = start + size + 2;
  }
}

/** Send one request to host:port (every address the name resolves to, in order) and read the reply. */
export async function localRequest(req: LocalRequest): Promise<LocalResponse> {
  const payload = renderRequest(req);
  const deadline = AbortSignal.timeout(req.timeoutMs);
  const addrs = await lookup(req.host, { all: true }).catch(() => [{ address: req.host, family: 0 }]);
  let lastErr: Error | undefined;
  for (const a of addrs) {
    let raw: Buffer;
    try {
      raw = await exchange(a.address, req.port, payload, req.maxBytes ?? MAX_RESPONSE_BYTES, deadline);
    } catch (e) {
      lastErr = e as Error;
      if ((e as NodeJS.ErrnoException).code === "ECONNREFUSED" || (e as NodeJS.ErrnoException).code === "EADDRNOTAVAIL") continue;
      throw e;
    }
    return parseResponse(raw, req.method);
  }
  throw lastErr ?? new LocalHttpError(`cannot resolve ${req.host}`);
}

function exchange(host: string, port: number, payload: Buffer, maxBytes: number, deadline: AbortSignal): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let sock: Socket | undefined;
    const fail = (e: Error) => {
      deadline.removeEventListener("abort", onAbort);
      sock?.destroy();
      reject(e);
    };
    const onAbort = () => fail(new LocalHttpError("timed out waiting for the response"));
    if (deadline.aborted) return onAbort();
    deadline.addEventListener("abort", onAbort, { once: true });
    sock = connect({ host, port }, () => sock!.write(payload));
    sock.on("data", (d: Buffer) => {
      size += d.length;
      if (size > maxBytes) return fail(new LocalHttpError(`response larger than ${maxBytes} bytes`));
      chunks.push(d);
    });
    sock.on("error", (e) => fail(e));
    sock.on("end", () => {
      deadline.removeEventListener("abort", onAbort);
      resolve(Buffer.concat(chunks));
    });
  });
}
