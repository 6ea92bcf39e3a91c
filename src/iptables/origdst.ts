// SO_ORIGINAL_DST of a redirected TCP connection (getsockopt(SOL_IP, 80) / (SOL_IPV6, 80)) through
// bun:ffi on libc, so it works in the compiled binary. Used by --run-validation and tests.

const SOL_IP = 0;
const SOL_IPV6 = 41;
const SO_ORIGINAL_DST = 80;
const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];

type GetSockOpt = (fd: number, level: number, opt: number, val: unknown, len: unknown) => number;

export interface OriginalDst {
  address: string;
  port: number;
}

/** Opens libc lazily; one instance per user (no module-level state). */
export class OriginalDstReader {
  private fn: GetSockOpt | null | undefined;
  private ptr: ((v: ArrayBufferView) => unknown) | undefined;

  private load(): GetSockOpt | null {
    if (this.fn !== undefined) return this.fn;
    this.fn = null;
    if (process.platform !== "linux") return null;
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    this.ptr = ffi.ptr as (v: ArrayBufferView) => unknown;
    for (const name of LIBC_NAMES) {
      try {
        const lib = ffi.dlopen(name, {
          getsockopt: { args: [ffi.FFIType.i32, ffi.FFIType.i32, ffi.FFIType.i32, ffi.FFIType.ptr, ffi.FFIType.ptr], returns: ffi.FFIType.i32 },
        });
        this.fn = lib.symbols.getsockopt as unknown as GetSockOpt;
        break;
      } catch {
        // next libc name
      }
    }
    return this.fn;
  }

  /** The pre-NAT destination of an accepted socket, or undefined (not redirected / not supported). */
  read(fd: number, ipv6 = false): OriginalDst | undefined {
    const fn = this.load();
    if (!fn || !this.ptr) return undefined;
    const buf = new Uint8Array(28);
    const len = new Uint32Array([buf.length]);
    if (fn(fd, ipv6 ? SOL_IPV6 : SOL_IP, SO_ORIGINAL_DST, this.ptr(buf), this.ptr(len)) !== 0) return undefined;
    return parseSockaddr(buf);
  }
}

/** sockaddr_in / sockaddr_in6 (little-endian family, big-endian port). */
export function parseSockaddr(b: Uint8Array): OriginalDst | undefined {
  const family = b[0]! | (b[1]! << 8);
  const port = (b[2]! << 8) | b[3]!;
  if (family === 2) return { address: `${b[4]}.${b[5]}.${b[6]}.${b[7]}`, port };
  if (family === 10) {
    const groups: string[] = [];
    for (let i = 0; i < 8; i++) groups.push(((b[8 + i * 2]! << 8) | b[9 + i * 2]!).toString(16));
    return { address: groups.join(":"), port };
  }
  return undefined;
}
