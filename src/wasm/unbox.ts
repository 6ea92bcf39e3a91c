// Wasm binaries as they arrive: plain, gzipped, in a tarball, or a gzipped tarball (Istio's
// httpfetcher.go unboxIfPossible), and the tar reading the OCI compat image layout needs. Every
// unpacked size is capped; what cannot be unpacked is returned as it came (the caller's Wasm
// header check reports it).

import { gunzipSync } from "node:zlib";

const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d];

/** A Wasm binary starts with the magic number and a version: 8 bytes at least (cache.go). */
export function isValidWasmBinary(b: Uint8Array): boolean {
  return b.length >= 8 && WASM_MAGIC.every((m, i) => b[i] === m);
}

function isGzip(b: Uint8Array): boolean {
  return b.length > 2 && b[0] === 0x1f && b[1] === 0x8b;
}

function isPosixTar(b: Uint8Array): boolean {
  return b.length > 262 && new TextDecoder().decode(b.subarray(257, 262)) === "ustar";
}

export class UnboxError extends Error {
  override name = "UnboxError";
}

export function gunzipCapped(b: Uint8Array, maxBytes: number): Uint8Array {
  try {
    return gunzipSync(b, { maxOutputLength: maxBytes });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === "ERR_BUFFER_TOO_LARGE" || /maxOutputLength|too large/i.test(err.message))
      throw new UnboxError(`gzip content exceeds the limit of ${maxBytes} bytes (ISTIO_WASM_MAX_BINARY_SIZE_BYTES)`);
    throw new UnboxError(`not a valid gzip stream: ${err.message}`);
  }
}

export interface TarEntry {
  name: string;
  data: Uint8Array;
}

function octal(b: Uint8Array, from: number, len: number): number {
  const s = new TextDecoder()
    .decode(b.subarray(from, from + len))
    .replace(/\0.*$/s, "")
    .trim();
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) throw new UnboxError(`bad tar header number "${s}"`);
  return parseInt(s, 8);
}

function cstring(b: Uint8Array, from: number, len: number): string {
  const raw = b.subarray(from, from + len);
  const end = raw.indexOf(0);
  return new TextDecoder().decode(end < 0 ? raw : raw.subarray(0, end));
}

/** The regular files of a (ustar/GNU) tarball, in order; entries larger than `maxBytes` are refused. */
export function* tarEntries(b: Uint8Array, maxBytes: number): Generator<TarEntry> {
  let pos = 0;
  let longName: string | undefined;
  while (pos + 512 <= b.length) {
    const h = b.subarray(pos, pos + 512);
    if (h.every((x) => x === 0)) return;
    const size = octal(h, 124, 12);
    const type = String.fromCharCode(h[156]!);
    const prefix = cstring(h, 345, 155);
    const base = cstring(h, 0, 100);
    const name = longName ?? (prefix && new TextDecoder().decode(h.subarray(257, 262)) === "ustar" ? `${prefix}/${base}` : base);
    const start = pos + 512;
    if (size > maxBytes) throw new UnboxError(`tar entry ${name} of ${size} bytes exceeds the limit of ${maxBytes} bytes (ISTIO_WASM_MAX_BINARY_SIZE_BYTES)`);
    if (start + size > b.length) throw new UnboxError(`tar entry ${name} runs past the end of the archive`);
    const data = b.subarray(start, start + size);
    pos = start + Math.ceil(size / 512) * 512;
    if (type === "L") {
      longName = cstring(data, 0, data.length);
      continue;
    }
    longName = undefined;
    if (type === "0" || type === "\0" || type === "7") yield { name, data };
  }
}

/** Best effort, as Istio: unwrap gzip/tar layers until a Wasm binary shows; else the original bytes. */
export function unboxIfPossible(origin: Uint8Array, maxBytes: number): Uint8Array {
  let b = origin;
  for (let depth = 0; depth < 8; depth++) {
    if (isValidWasmBinary(b)) return b;
    try {
      if (isGzip(b)) b = gunzipCapped(b, maxBytes);
      else if (isPosixTar(b)) {
        const first = tarEntries(b, maxBytes).next();
        if (first.done) return origin;
        b = first.value.data;
      } else return origin;
    } catch {
      return origin;
    }
  }
  return origin;
}
