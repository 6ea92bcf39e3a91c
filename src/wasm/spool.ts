// Where a Wasm download goes while it arrives: straight to a scratch file in the cache directory,
// chunk by chunk, never whole in memory. Each download owns a Scratch (its temp files, all named
// `*.wasm.tmp-<pid>-<n>`); whatever it leaves is removed when the download ends, and a sweep
// removes the leftovers of a crashed run. A write that fails names the file, the cause and what to
// do; a body over its limit is cut off at the first byte past it.

import { createHash } from "node:crypto";
import { open, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage } from "../lib/errors.ts";
import type { GcMeter } from "./gcmeter.ts";

export class WasmLimitError extends Error {
  override name = "WasmLimitError";
}

export class WasmDiskError extends Error {
  override name = "WasmDiskError";
}

/** The bytes a stream may carry and the setting (or rule) that says so, for the error text. */
export interface ByteLimit {
  max: number;
  /** e.g. "ISTIO_WASM_MAX_BINARY_SIZE_BYTES", or "the layer's declared size". */
  why: string;
}

/** Every temp file name has this marker; the cache's sweep removes the ones no download owns. */
export const TMP_MARKER = ".wasm.tmp-";

/** One download's temp files. */
export class Scratch {
  private readonly files = new Set<string>();
  /** sha256 of the scratch files written through spool(), so the cache need not read them again. */
  private readonly digests = new Map<string, string>();
  private n = 0;

  constructor(
    readonly dir: string,
    private readonly tag: string,
    /** Counts the bytes this download streams (spool.ts), for the collector. */
    readonly meter?: GcMeter,
  ) {}

  /** A new temp file path (not yet created). */
  file(): string {
    const p = join(this.dir, `${this.tag}-${this.n++}${TMP_MARKER}${process.pid}`);
    this.files.add(p);
    return p;
  }

  owns(path: string): boolean {
    return this.files.has(path);
  }

  noteDigest(path: string, sha256: string): void {
    if (this.files.has(path)) this.digests.set(path, sha256);
  }

  /** The hex sha256 of a scratch file written by spool(), if known. */
  digestOf(path: string): string | undefined {
    return this.digests.get(path);
  }

  /** The file now belongs elsewhere (renamed into the cache). */
  release(path: string): void {
    this.files.delete(path);
  }

  /** Remove every temp file of this download that is still there. */
  async cleanup(): Promise<void> {
    for (const p of this.files) await rm(p, { force: true }).catch(() => {});
    this.files.clear();
  }
}

/** Wrap a file-system failure: which file, why, and what the operator can do. */
export function diskError(path: string, e: unknown): WasmDiskError {
  const code = (e as NodeJS.ErrnoException)?.code;
  const hint =
    code === "ENOSPC" || code === "EDQUOT"
      ? "free space in the Wasm cache directory (its volume is full) or give it a larger size limit"
      : code === "EACCES" || code === "EPERM" || code === "EROFS"
        ? "make the Wasm cache directory writable by the agent"
        : "check the Wasm cache directory's volume";
  return new WasmDiskError(`cannot write ${path}: ${errorMessage(e)}; ${hint}`, { cause: e });
}

/** Writes chunks to a new file, counting them against a limit and hashing them. */
export class SpoolWriter {
  private fh: FileHandle | undefined;
  private readonly hash = createHash("sha256");
  size = 0;

  private constructor(
    readonly path: string,
    private readonly limit: ByteLimit,
    private readonly what: string,
  ) {}

  static async create(path: string, limit: ByteLimit, what: string): Promise<SpoolWriter> {
    const w = new SpoolWriter(path, limit, what);
    try {
      w.fh = await open(path, "wx", 0o644);
    } catch (e) {
      throw diskError(path, e);
    }
    return w;
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.size += chunk.length;
    if (this.size > this.limit.max) throw new WasmLimitError(`${this.what} exceeds the limit of ${this.limit.max} bytes (${this.limit.why})`);
    this.hash.update(chunk);
    try {
      let off = 0;
      while (off < chunk.length) off += (await this.fh!.write(chunk, off, chunk.length - off)).bytesWritten;
    } catch (e) {
      throw diskError(this.path, e);
    }
  }

  /** Close the file; the hex sha256 of what was written. */
  async finish(): Promise<string> {
    await this.close();
    return this.hash.digest("hex");
  }

  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = undefined;
    try {
      await fh?.close();
    } catch (e) {
      throw diskError(this.path, e);
    }
  }
}

/** Copy a byte stream into `path` under `limit`; size and sha256 of what was written (also noted in `scratch`). */
export async function spool(
  source: AsyncIterable<Uint8Array>,
  path: string,
  limit: ByteLimit,
  what: string,
  scratch?: Scratch,
): Promise<{ size: number; sha256: string }> {
  const w = await SpoolWriter.create(path, limit, what);
  try {
    for await (const chunk of source) {
      await w.write(chunk);
      scratch?.meter?.count(chunk.length);
    }
    const sha256 = await w.finish();
    scratch?.noteDigest(path, sha256);
    return { size: w.size, sha256 };
  } finally {
    await w.close().catch(() => {});
  }
}

/** The chunks of a Response body; cancelling the body when the consumer stops early. */
export async function* bodyChunks(res: Response): AsyncGenerator<Uint8Array> {
  if (!res.body) return;
  const reader = res.body.getReader();
  let done = false;
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) {
        done = true;
        return;
      }
      yield r.value;
    }
  } finally {
    if (!done) await reader.cancel().catch(() => {});
  }
}

/** The first `n` bytes of a file (fewer when it is shorter). */
export async function readHead(path: string, n: number): Promise<Uint8Array> {
  const fh = await open(path, "r");
  try {
    const b = new Uint8Array(n);
    const { bytesRead } = await fh.read(b, 0, n, 0);
    return b.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** sha256 (hex) of a file, read in chunks. */
export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  const fh = await open(path, "r");
  try {
    for await (const chunk of fh.createReadStream({ highWaterMark: 16 * 1024 })) h.update(chunk as Buffer);
  } finally {
    await fh.close().catch(() => {});
  }
  return h.digest("hex");
}
