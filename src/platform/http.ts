import { errorMessage } from "../lib/errors.ts";
// The one HTTP call the platform probes make: a request to a link-local metadata server with a
// hard timeout and a capped body. Anything that is not an answer (refused, timed out, too big)
// is a MetadataHttpError naming the URL; the caller decides whether that means "not this cloud".

/** Metadata answers are a few hundred bytes; an instance identity token a few KiB. */
export const METADATA_BODY_CAP = 64 * 1024;

export interface MetadataRequest {
  method?: "GET" | "PUT";
  url: string;
  headers?: Record<string, string>;
  timeoutMs: number;
  /** Largest answer accepted (default METADATA_BODY_CAP). */
  capBytes?: number;
}

export interface MetadataResponse {
  status: number;
  headers: Headers;
  body: string;
}

export type MetadataHttp = (req: MetadataRequest) => Promise<MetadataResponse>;

export class MetadataHttpError extends Error {
  constructor(
    readonly url: string,
    message: string,
  ) {
    super(`${url}: ${message}`);
    this.name = "MetadataHttpError";
  }
}

/** The real client (fetch), bounded in time and size. */
export const fetchMetadata: MetadataHttp = async (req) => {
  const signal = AbortSignal.timeout(req.timeoutMs);
  let res: Response;
  try {
    res = await fetch(req.url, { method: req.method ?? "GET", headers: req.headers ?? {}, signal, redirect: "manual", keepalive: false });
  } catch (e) {
    const msg = signal.aborted ? `no answer within ${req.timeoutMs}ms` : errorMessage(e);
    throw new MetadataHttpError(req.url, msg);
  }
  try {
    const body = await readCapped(res, req.capBytes ?? METADATA_BODY_CAP);
    return { status: res.status, headers: res.headers, body };
  } catch (e) {
    const msg = signal.aborted ? `body not read within ${req.timeoutMs}ms` : errorMessage(e);
    throw new MetadataHttpError(req.url, msg);
  }
};

/** A response body as text, failing once it passes `cap` bytes (the rest is not read). */
export async function readCapped(res: { body: ReadableStream<Uint8Array> | null }, cap: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > cap) {
      await reader.cancel().catch(() => {});
      throw new Error(`answer larger than ${cap} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}
