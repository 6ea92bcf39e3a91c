// The status port's native responder (statusresponder.c) through bun:ffi. The library is built
// at build time (build.ts, native/build-responder.ts) and embedded in the compiled binary; here
// its bytes are written to an anonymous memory file (memfd_create: nothing touches a filesystem,
// so a read-only root is fine) and loaded from /proc/self/fd/N. Where that cannot be opened (no
// /proc mounted, a kernel refusing executable memfds), the bytes go to a file in the temporary
// directory (a pod's writable volume), removed once loaded. Linux only. Every failure comes back
// as a sentence saying why, and the caller serves the port another way.

import { closeSync, existsSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** One listening responder (a pointer into the library). */
export interface StatusResponder {
  port(): number;
  /** The agent is ready: answer `GET /healthz/ready` natively while each of `files` exists. False when the list is too long. */
  ready(files: readonly string[]): boolean;
  /** Readiness may have changed: every probe goes to the main thread until ready() again. */
  unready(): void;
  /** The client's address of the relayed connection whose source port (on 127.0.0.1) is `relayPort`. */
  remote(relayPort: number): string | undefined;
  /** Probes answered natively, connections relayed to the main thread, connections open. */
  counts(): { answered: number; forwarded: number; active: number };
  stop(): void;
}

export interface StatusResponderLibrary {
  /** Binds `hostname` (an address literal) at `port`, relaying to 127.0.0.1:`backendPort`; throws with errno's name. */
  start(hostname: string, port: number, backendPort: number): StatusResponder;
}

/** The library's file name for this machine's architecture (one per architecture, libc-agnostic). */
export function responderFileName(arch: string = process.arch): string {
  return `statusresponder-${arch}.so`;
}

const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];
const MFD_CLOEXEC = 1;

/** Names of the errno values a bind or listen gives, for messages the status server recognises. */
const ERRNO: Record<number, string> = {
  1: "EPERM",
  12: "ENOMEM",
  13: "EACCES",
  22: "EINVAL",
  24: "EMFILE",
  97: "EAFNOSUPPORT",
  98: "EADDRINUSE (address in use)",
  99: "EADDRNOTAVAIL",
};

/**
 * The library's bytes: embedded in the compiled binary (build.ts names it `responderFileName()`),
 * else, when run from source, dist/native/ as build.ts or the tests leave it. A string says why not.
 */
export async function responderBytes(
  embedded: readonly Blob[] = Bun.embeddedFiles,
  sourceDir = join(import.meta.dir, "..", "dist", "native"),
): Promise<Uint8Array | string> {
  if (process.platform !== "linux") return `no native status responder on ${process.platform}`;
  const name = responderFileName();
  const blob = embedded.find((b) => (b as Blob & { name?: string }).name === name);
  if (blob) return new Uint8Array(await blob.arrayBuffer());
  if (Bun.main.startsWith("/$bunfs/")) return `this build carries no native status responder for linux-${process.arch} (${name})`;
  const file = join(sourceDir, name);
  if (!existsSync(file)) return `${file} does not exist (node_modules/.bin/bun native/build-responder.ts builds it)`;
  return readFileSync(file);
}

type Ptr = number;

interface Symbols {
  sr_start(host: Ptr, port: number, backend: number, err: Ptr): Ptr | null;
  sr_port(r: Ptr): number;
  sr_ready(r: Ptr, files: Ptr | null, len: number): number;
  sr_unready(r: Ptr): void;
  sr_remote(r: Ptr, relayPort: number, out: Ptr, cap: number): number;
  sr_answered(r: Ptr): number | bigint;
  sr_forwarded(r: Ptr): number | bigint;
  sr_active(r: Ptr): number;
  sr_stop(r: Ptr): void;
}

export interface LoadOptions {
  /** Where a file is written when the memfd cannot be opened (default: the temporary directory). */
  tempDir?: string;
  /** Where this process's descriptors are seen (default /proc/self/fd; tests name another). */
  procFd?: string;
}

/** Loads the library from `bytes` (a memfd, else a file in the temporary directory); a string says why it could not. */
export function loadStatusResponder(bytes: Uint8Array, opts: LoadOptions = {}): StatusResponderLibrary | string {
  const tempDir = opts.tempDir ?? tmpdir();
  const procFd = opts.procFd ?? "/proc/self/fd";
  if (process.platform !== "linux") return `no native status responder on ${process.platform}`;
  let ffi: typeof import("bun:ffi");
  try {
    ffi = require("bun:ffi") as typeof import("bun:ffi");
  } catch (e) {
    return `bun:ffi is not available: ${(e as Error).message}`;
  }
  const T = ffi.FFIType;
  let memfdCreate: ((name: Ptr, flags: number) => number) | undefined;
  for (const name of LIBC_NAMES) {
    try {
      memfdCreate = ffi.dlopen(name, { memfd_create: { args: [T.ptr, T.u32], returns: T.i32 } }).symbols.memfd_create as unknown as typeof memfdCreate;
      break;
    } catch {
      // try the next libc name
    }
  }
  const symbols = {
    sr_start: { args: [T.ptr, T.i32, T.i32, T.ptr], returns: T.ptr },
    sr_port: { args: [T.ptr], returns: T.i32 },
    sr_ready: { args: [T.ptr, T.ptr, T.i32], returns: T.i32 },
    sr_unready: { args: [T.ptr], returns: T.void },
    sr_remote: { args: [T.ptr, T.i32, T.ptr, T.i32], returns: T.i32 },
    sr_answered: { args: [T.ptr], returns: T.i64_fast },
    sr_forwarded: { args: [T.ptr], returns: T.i64_fast },
    sr_active: { args: [T.ptr], returns: T.i32 },
    sr_stop: { args: [T.ptr], returns: T.void },
  } as const;
  const open = (path: string) => ffi.dlopen(path, symbols).symbols as unknown as Symbols;
  const why: string[] = [];
  let syms: Symbols | undefined;
  const fd = memfdCreate ? memfdCreate(ffi.ptr(Buffer.from("agent-status-responder\0")), MFD_CLOEXEC) : -1;
  if (!memfdCreate) why.push("memfd_create is not reachable through bun:ffi (no glibc or musl libc found)");
  else if (fd < 0) why.push("memfd_create failed");
  else {
    try {
      writeSync(fd, bytes);
      syms = open(`${procFd}/${fd}`);
    } catch (e) {
      why.push(`from ${procFd}/${fd}: ${(e as Error).message}`);
    } finally {
      closeSync(fd); // the mapping outlives the descriptor
    }
  }
  if (!syms) {
    const file = join(tempDir, `agent-status-responder-${process.pid}.so`);
    try {
      rmSync(file, { force: true });
      writeFileSync(file, bytes, { mode: 0o500 });
      syms = open(file);
    } catch (e) {
      why.push(`from ${file}: ${(e as Error).message}`);
    } finally {
      rmSync(file, { force: true }); // the mapping outlives the file
    }
  }
  if (!syms) return `cannot load the native status responder: ${why.join("; ")}`;
  const sym = syms;
  const ptr = (b: Buffer | Int32Array) => ffi.ptr(b) as Ptr;
  return {
    start(hostname, port, backendPort) {
      const host = Buffer.from(`${hostname}\0`);
      const err = new Int32Array(1);
      const r = sym.sr_start(ptr(host), port, backendPort, ptr(err));
      if (!r) {
        if (err[0] === -1) throw new Error(`${hostname} is not an IP address`);
        throw new Error(`listen [${hostname}]:${port}: ${ERRNO[err[0]!] ?? `errno ${err[0]}`}`);
      }
      const out = Buffer.alloc(64);
      return {
        port: () => sym.sr_port(r),
        ready(files) {
          const list = Buffer.from(files.map((f) => `${f}\0`).join(""));
          return sym.sr_ready(r, list.length ? ptr(list) : null, list.length) === 0;
        },
        unready: () => sym.sr_unready(r),
        remote(relayPort) {
          const n = sym.sr_remote(r, relayPort, ptr(out), out.length);
          return n > 0 ? out.toString("latin1", 0, n) : undefined;
        },
        counts: () => ({ answered: Number(sym.sr_answered(r)), forwarded: Number(sym.sr_forwarded(r)), active: sym.sr_active(r) }),
        stop: () => sym.sr_stop(r),
      };
    },
  };
}
