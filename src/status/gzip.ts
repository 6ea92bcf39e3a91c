// gzip when the client asks (Istio wraps its whole mux in gzhttp). Applied to the large answers
// (merged metrics, debug dumps); probe and readiness answers are a few bytes and left alone.
// Level 1: metrics pages are very repetitive, so the fastest level already shrinks them ~20x,
// and the scrape is CPU on the pod's sidecar budget (see docs/status.md for the measurement).
// node:zlib is loaded with the first gzipped answer, not at the agent's start.

import { Readable, pipeline } from "node:stream";

/** True when Accept-Encoding allows gzip (an explicit q=0 refuses it). */
export function acceptsGzip(acceptEncoding: string | null | undefined): boolean {
  if (!acceptEncoding) return false;
  let star = false;
  for (const part of acceptEncoding.split(",")) {
    const [coding, ...params] = part
      .trim()
      .toLowerCase()
      .split(";")
      .map((s) => s.trim());
    const q = params.find((p) => p.startsWith("q="));
    const refused = q !== undefined && Number(q.slice(2)) === 0;
    if (coding === "gzip") return !refused;
    if (coding === "*") star = !refused;
  }
  return star;
}

/** The same response, gzip-compressed as it streams, when the request accepts gzip. */
export async function maybeGzip(req: Request, res: Response): Promise<Response> {
  if (!res.body || res.headers.has("content-encoding") || !acceptsGzip(req.headers.get("accept-encoding"))) return res;
  const { createGzip, constants } = await import("node:zlib");
  const headers = new Headers(res.headers);
  headers.set("content-encoding", "gzip");
  headers.append("vary", "Accept-Encoding");
  headers.delete("content-length");
  const gz = createGzip({ level: constants.Z_BEST_SPEED });
  // pipeline: a client going away destroys the gzip stream, which cancels the source (and its upstream fetches).
  pipeline(Readable.fromWeb(res.body as import("node:stream/web").ReadableStream<Uint8Array>), gz, () => {});
  return new Response(Readable.toWeb(gz) as unknown as ReadableStream<Uint8Array>, { status: res.status, headers });
}
