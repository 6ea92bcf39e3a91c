// Reading a file someone else named (a mounted certificate, a mesh config, a token, a template):
// only regular files, never more than a cap suited to what the file is, and stopping as soon as
// the requester goes away. A FIFO or a device (/dev/zero) is refused without blocking: the file
// is opened non-blocking and checked with fstat before anything is read. The size is checked
// twice: by fstat up front and by counting while reading (a file can grow under us).
// Errors from open (ENOENT, EACCES) pass through unchanged so callers can tell "missing" apart.

import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { open } from "node:fs/promises";

export const KiB = 1024;
export const MiB = 1024 * KiB;

/** Caps by kind of file; each is far above any legitimate file of that kind. */
export const FILE_LIMITS = {
  /** A PEM certificate, chain, key or CA bundle (the system bundle is ~200 KiB). */
  certificate: 4 * MiB,
  /** A bearer token (a Kubernetes projected token is ~1 KiB). */
  token: 64 * KiB,
  /** Mesh config, ProxyConfig, bootstrap override, gRPC bootstrap, Envoy template. */
  config: 8 * MiB,
  /** Downward-API labels/annotations (Kubernetes caps all annotations at 256 KiB). */
  podInfo: 1 * MiB,
  /** LOCAL_XDS_PATH: a whole xDS snapshot. */
  localXds: 64 * MiB,
  /** /etc/resolv.conf, /etc/passwd. */
  system: 4 * MiB,
} as const;

export class FileLimitError extends Error {
  constructor(
    readonly path: string,
    readonly limit: number,
    reason: string,
  ) {
    super(`${path}: ${reason}`);
    this.name = "FileLimitError";
  }
}

export function formatBytes(n: number): string {
  if (n >= MiB && n % MiB === 0) return `${n / MiB} MiB`;
  if (n >= KiB && n % KiB === 0) return `${n / KiB} KiB`;
  return `${n} bytes`;
}

export interface BoundedReadOptions {
  maxBytes: number;
  /** Reading stops (AbortError) when this fires. */
  signal?: AbortSignal;
}

const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
const CHUNK = 64 * KiB;

function kindOf(st: Stats): string {
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isSocket()) return "a socket";
  if (st.isDirectory()) return "a directory";
  return "not a regular file";
}

function checkStat(path: string, st: Stats, maxBytes: number): void {
  if (!st.isFile()) throw new FileLimitError(path, maxBytes, `is ${kindOf(st)}, not a regular file`);
  if (st.size > maxBytes) throw tooBig(path, maxBytes);
}

function tooBig(path: string, maxBytes: number): FileLimitError {
  return new FileLimitError(path, maxBytes, `larger than the ${formatBytes(maxBytes)} limit`);
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException("reading was aborted", "AbortError");
}

/** The file's bytes; throws FileLimitError for a non-regular or too large file. */
export async function readBoundedFile(path: string, opts: BoundedReadOptions): Promise<Buffer> {
  const { maxBytes, signal } = opts;
  if (signal?.aborted) throw abortError(signal);
  const fh = await open(path, OPEN_FLAGS);
  try {
    checkStat(path, await fh.stat(), maxBytes);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, maxBytes + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > maxBytes) throw tooBig(path, maxBytes);
      chunks.push(buf.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, total);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The file's text (UTF-8). */
export async function readBoundedText(path: string, opts: BoundedReadOptions): Promise<string> {
  return (await readBoundedFile(path, opts)).toString("utf8");
}

/** Synchronous form, for start-up reads that happen before anything serves. */
export function readBoundedFileSync(path: string, maxBytes: number): Buffer {
  const fd = openSync(path, OPEN_FLAGS);
  try {
    checkStat(path, fstatSync(fd), maxBytes);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, maxBytes + 1 - total));
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      total += n;
      if (total > maxBytes) throw tooBig(path, maxBytes);
      chunks.push(buf.subarray(0, n));
    }
    return Buffer.concat(chunks, total);
  } finally {
    closeSync(fd);
  }
}

export function readBoundedTextSync(path: string, maxBytes: number): string {
  return readBoundedFileSync(path, maxBytes).toString("utf8");
}
