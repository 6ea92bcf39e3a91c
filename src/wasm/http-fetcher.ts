// Downloads a Wasm module over HTTP(S) (Istio's pkg/wasm/httpfetcher.go): each attempt bounded by
// WASM_HTTP_REQUEST_TIMEOUT, up to WASM_HTTP_REQUEST_MAX_RETRIES attempts with exponential backoff
// from 500 ms on connection errors and retryable 5xx answers, the whole download bounded by the
// caller's deadline. Redirects are followed here, hop by hop, so that every hop's host goes
// through the AddressGuard after resolution; a plain-HTTP hop is dialled at the address that was
// checked. The body goes to a scratch file as it arrives, capped at ISTIO_WASM_MAX_BINARY_SIZE_BYTES;
// gzip/tar wrappers are removed file to file (unbox.ts). URLs in errors have credentials redacted.

import type { Logger } from "../lib/log.ts";
import { systemClock } from "../lib/clock.ts";
import { redactUrl } from "./redact.ts";
import { WasmDiskError, WasmLimitError, bodyChunks, spool, type ByteLimit, type Scratch } from "./spool.ts";
import type { AddressGuard } from "./ssrf.ts";
import { unboxFile } from "./unbox.ts";

export class WasmFetchError extends Error {
  override name = "WasmFetchError";
}

export interface HttpFetcherOptions {
  /** Per-request timeout (WASM_HTTP_REQUEST_TIMEOUT). */
  requestTimeoutMs: number;
  /** Attempts in all (WASM_HTTP_REQUEST_MAX_RETRIES). */
  maxAttempts: number;
  maxBytes: number;
  guard: AddressGuard;
  log: Logger;
  /** First backoff delay; Istio's is 500 ms. */
  initialBackoffMs?: number;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

const MAX_REDIRECTS = 10;

/** 5xx except 501, 505 and 511 (httpfetcher.go retryable). */
export function retryable(code: number): boolean {
  return code >= 500 && code !== 501 && code !== 505 && code !== 511;
}

/** Read a small response body (manifest, token) into memory, refusing more than `limit.max` bytes. */
export async function readCapped(res: Response, limit: ByteLimit, what: string): Promise<Uint8Array> {
  const declared = Number(res.headers.get("content-length") ?? "NaN");
  if (declared > limit.max) {
    await res.body?.cancel().catch(() => {});
    throw new WasmLimitError(`${what} is ${declared} bytes, over the limit of ${limit.max} bytes (${limit.why})`);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const value of bodyChunks(res)) {
    total += value.length;
    if (total > limit.max) throw new WasmLimitError(`${what} exceeds the limit of ${limit.max} bytes (${limit.why})`);
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

/**
 * One GET through the guard, following redirects: returns the final response (not 3xx). `init`
 * headers go to every hop of the same origin only.
 */
export async function guardedGet(
  url: string,
  o: { guard: AddressGuard; insecure: boolean; signal: AbortSignal; headers?: Record<string, string> },
): Promise<Response> {
  let current = new URL(url);
  const origin = current.origin;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (current.protocol !== "http:" && current.protocol !== "https:")
      throw new WasmFetchError(`refusing to fetch ${redactUrl(current.href)}: scheme ${current.protocol} is not http or https`);
    const ip = await o.guard.resolve(current.hostname);
    let target = current.href;
    const headers: Record<string, string> = current.origin === origin ? { ...o.headers } : {};
    if (current.protocol === "http:") {
      // Dial the checked address itself, so a second resolution cannot point elsewhere.
      const dial = new URL(current.href);
      dial.hostname = ip.includes(":") ? `[${ip}]` : ip;
      target = dial.href;
      headers.host = current.host;
    }
    const res = await fetch(target, {
      redirect: "manual",
      signal: o.signal,
      headers,
      tls: o.insecure ? { rejectUnauthorized: false } : undefined,
    } as RequestInit);
    if (res.status >= 300 && res.status < 400 && res.headers.get("location")) {
      await res.body?.cancel().catch(() => {});
      current = new URL(res.headers.get("location")!, current);
      continue;
    }
    return res;
  }
  throw new WasmFetchError(`more than ${MAX_REDIRECTS} redirects fetching ${redactUrl(url)}`);
}

export class HttpFetcher {
  constructor(private readonly o: HttpFetcherOptions) {}

  /** Download `url` into a scratch file, unwrapped; its path. `signal` is the whole download's deadline. */
  async fetch(url: string, insecure: boolean, signal: AbortSignal, scratch: Scratch): Promise<string> {
    const shown = redactUrl(url);
    const limit: ByteLimit = { max: this.o.maxBytes, why: "ISTIO_WASM_MAX_BINARY_SIZE_BYTES" };
    const sleep = this.o.sleep ?? ((ms: number, sig: AbortSignal) => systemClock.sleep(ms, sig).then(() => undefined));
    let backoff = this.o.initialBackoffMs ?? 500;
    let attempts = 0;
    let lastError = "";
    while (attempts < Math.max(1, this.o.maxAttempts)) {
      attempts++;
      if (signal.aborted) {
        lastError = `GET ${JSON.stringify(shown)}: deadline exceeded`;
        break;
      }
      const attemptSignal = AbortSignal.any([signal, AbortSignal.timeout(this.o.requestTimeoutMs)]);
      let res: Response;
      try {
        res = await guardedGet(url, { guard: this.o.guard, insecure, signal: attemptSignal });
      } catch (e) {
        const err = e as Error;
        if (err.name === "BlockedAddressError" || err instanceof WasmFetchError) throw new WasmFetchError(`wasm module download failed: ${err.message}`);
        lastError = attemptSignal.aborted && !signal.aborted ? `request timed out after ${this.o.requestTimeoutMs} ms` : err.message.replaceAll(url, shown);
        this.o.log.debug(`wasm module download request failed: ${lastError}`);
        if (signal.aborted) break;
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 1.5, 60_000);
        continue;
      }
      if (res.status === 200) {
        const declared = Number(res.headers.get("content-length") ?? "NaN");
        if (declared > limit.max) {
          await res.body?.cancel().catch(() => {});
          throw new WasmLimitError(`Wasm module ${shown} is ${declared} bytes, over the limit of ${limit.max} bytes (${limit.why})`);
        }
        const raw = scratch.file();
        try {
          await spool(bodyChunks(res), raw, limit, `Wasm module ${shown}`, scratch);
        } catch (e) {
          if (e instanceof WasmLimitError || e instanceof WasmDiskError) throw e;
          if (signal.aborted) throw new WasmFetchError(`GET ${JSON.stringify(shown)}: deadline exceeded while reading the body`, { cause: e });
          if (attemptSignal.aborted)
            throw new WasmFetchError(
              `GET ${JSON.stringify(shown)}: reading the body took longer than WASM_HTTP_REQUEST_TIMEOUT (${this.o.requestTimeoutMs} ms)`,
              { cause: e },
            );
          throw new WasmFetchError(`GET ${JSON.stringify(shown)}: reading the body failed: ${(e as Error).message}`, { cause: e });
        }
        return unboxFile(raw, scratch, limit, `Wasm module ${shown}`);
      }
      await res.body?.cancel().catch(() => {});
      lastError = `wasm module download request failed: status code ${res.status}`;
      if (!retryable(res.status)) break;
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 1.5, 60_000);
    }
    throw new WasmFetchError(`wasm module download failed after ${attempts} attempts, last error: ${lastError}`);
  }
}
