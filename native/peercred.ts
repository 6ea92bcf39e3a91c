// SO_PEERCRED on Unix sockets through bun:ffi, calling libc's getsockopt directly: no compiler and
// no extra file are needed at run time, so it works inside the compiled binary. glibc and musl
// are both tried. Linux only; elsewhere `peerCredentials` returns undefined.

import type { Socket } from "node:net";

export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

const SOL_SOCKET = 1;
const SO_PEERCRED = 17;

type GetSockOpt = (fd: number, level: number, opt: number, val: unknown, len: unknown) => number;
let getsockopt: GetSockOpt | null | undefined;
let toPtr: ((v: ArrayBufferView) => unknown) | undefined;

const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];

function load(): GetSockOpt | null {
  if (getsockopt !== undefined) return getsockopt;
  getsockopt = null;
  if (process.platform !== "linux") return null;
  try {
    // Required lazily so importing this module costs nothing until a socket is checked.
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    toPtr = ffi.ptr as (v: ArrayBufferView) => unknown;
    for (const name of LIBC_NAMES) {
      try {
        const lib = ffi.dlopen(name, {
          getsockopt: { args: [ffi.FFIType.i32, ffi.FFIType.i32, ffi.FFIType.i32, ffi.FFIType.ptr, ffi.FFIType.ptr], returns: ffi.FFIType.i32 },
        });
        getsockopt = lib.symbols.getsockopt as unknown as GetSockOpt;
        break;
      } catch {
        // try the next libc name
      }
    }
  } catch {
    getsockopt = null;
  }
  return getsockopt;
}

/** The file descriptor behind a node:net socket (Bun exposes it on the handle). */
export function socketFd(sock: Socket): number | undefined {
  const fd = (sock as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return typeof fd === "number" && fd >= 0 ? fd : undefined;
}

/** The file descriptor of one of Bun's own sockets (`Bun.listen`; it has an `fd` the types do not declare). */
export function bunSocketFd(sock: object): number | undefined {
  const fd = (sock as { fd?: unknown }).fd;
  return typeof fd === "number" && fd >= 0 ? fd : undefined;
}

/** Credentials of the process at the other end of a connected Unix socket. */
export function peerCredentials(fd: number): PeerCred | undefined {
  const fn = load();
  if (!fn || !toPtr) return undefined;
  const cred = new Int32Array(3);
  const len = new Uint32Array([12]);
  const rc = fn(fd, SOL_SOCKET, SO_PEERCRED, toPtr(cred), toPtr(len));
  if (rc !== 0) return undefined;
  return { pid: cred[0]!, uid: cred[1]! >>> 0, gid: cred[2]! >>> 0 };
}

/** True when the FFI path is usable on this machine. */
export function peerCredSupported(): boolean {
  return load() !== null;
}
