// Wasm binaries as they arrive: plain, gzipped, in a tarball, or a gzipped tarball (Istio's
// httpfetcher.go unboxIfPossible), and the tar reading the OCI compat image layout needs. All of
// it works file to file: a download is already on disk (spool.ts), gzip is inflated as a stream
// (node:zlib, 16 KiB at a time, so the main loop never runs one long inflate) into another file,
// and a tar entry is copied out by offset. The inflated size is counted as it grows and the
// stream stopped at the first byte over the limit: a small bomb costs one chunk past the limit,
// not the limit in memory. What cannot be unpacked is returned as it came (the caller's Wasm
// header check reports it); a limit or disk failure is reported as itself.

import { createReadStream } from "node:fs";
import { open, writeFile } from "node:fs/promises";
import { createGunzip } from "node:zlib";
import { WasmDiskError, WasmLimitError, diskError, readHead, spool, type ByteLimit, type Scratch } from "./spool.ts";

const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d];
const CHUNK = 16 * 1024;

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

/** Inflate the gzip file `src` into `dst`, stopping at the first byte over the limit. */
export async function gunzipFile(src: string, dst: string, limit: ByteLimit, what: string, scratch?: Scratch): Promise<void> {
  const input = createReadStream(src, { highWaterMark: CHUNK });
  const gz = createGunzip({ chunkSize: CHUNK });
  input.on("error", (e) => gz.destroy(e));
  input.pipe(gz);
  try {
    await spool(gz, dst, limit, `${what} (gunzipped)`, scratch);
  } catch (e) {
    if (e instanceof WasmLimitError || e instanceof WasmDiskError) throw e;
    throw new UnboxError(`not a valid gzip stream: ${(e as Error).message}`, { cause: e });
  } finally {
    input.destroy();
    gz.destroy();
  }
}

/** A regular file inside a tarball: where its bytes are. */
export interface TarEntry {
  name: string;
  offset: number;
  size: number;
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

/** The regular files of a (ustar/GNU) tar file, in order; entries over the limit are refused. */
export async function* tarEntries(path: string, limit: ByteLimit): AsyncGenerator<TarEntry> {
  const fh = await open(path, "r");
  try {
    const total = (await fh.stat()).size;
    const h = new Uint8Array(512);
    let pos = 0;
    let longName: string | undefined;
    while (pos + 512 <= total) {
      const { bytesRead } = await fh.read(h, 0, 512, pos);
      if (bytesRead < 512) return;
      if (h.every((x) => x === 0)) return;
      const size = octal(h, 124, 12);
      const type = String.fromCharCode(h[156]!);
      const prefix = cstring(h, 345, 155);
      const base = cstring(h, 0, 100);
      const name = longName ?? (prefix && new TextDecoder().decode(h.subarray(257, 262)) === "ustar" ? `${prefix}/${base}` : base);
      const start = pos + 512;
      if (size > limit.max) throw new WasmLimitError(`tar entry ${name} of ${size} bytes exceeds the limit of ${limit.max} bytes (${limit.why})`);
      if (start + size > total) throw new UnboxError(`tar entry ${name} runs past the end of the archive`);
      pos = start + Math.ceil(size / 512) * 512;
      if (type === "L") {
        if (size > 4096) throw new UnboxError(`tar long name of ${size} bytes`);
        const data = new Uint8Array(size);
        await fh.read(data, 0, size, start);
        longName = cstring(data, 0, data.length);
        continue;
      }
      longName = undefined;
      if (type === "0" || type === "\0" || type === "7") yield { name, offset: start, size };
    }
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Copy `size` bytes at `offset` of `src` into the new file `dst`. */
export async function copyRange(src: string, offset: number, size: number, dst: string, limit: ByteLimit, what: string, scratch?: Scratch): Promise<void> {
  if (size === 0) {
    await writeFile(dst, new Uint8Array(), { flag: "wx" }).catch((e: unknown) => {
      throw diskError(dst, e);
    });
    return;
  }
  await spool(createReadStream(src, { start: offset, end: offset + size - 1, highWaterMark: CHUNK }), dst, limit, what, scratch);
}

/**
 * Best effort, as Istio: unwrap gzip/tar layers of the file at `path` until a Wasm binary shows;
 * returns the path of the unwrapped file (a new scratch file), else `path` itself.
 */
export async function unboxFile(path: string, scratch: Scratch, limit: ByteLimit, what: string): Promise<string> {
  let cur = path;
  for (let depth = 0; depth < 8; depth++) {
    const head = await readHead(cur, 512);
    if (isValidWasmBinary(head)) return cur;
    try {
      if (isGzip(head)) {
        const next = scratch.file();
        await gunzipFile(cur, next, limit, what, scratch);
        cur = next;
      } else if (isPosixTar(head)) {
        let first: TarEntry | undefined;
        for await (const e of tarEntries(cur, limit)) {
          first = e;
          break; // closes the generator (and its file)
        }
        if (!first) return path;
        const next = scratch.file();
        await copyRange(cur, first.offset, first.size, next, limit, what, scratch);
        cur = next;
      } else return path;
    } catch (e) {
      if (e instanceof WasmLimitError || e instanceof WasmDiskError) throw e;
      return path;
    }
  }
  return path;
}
