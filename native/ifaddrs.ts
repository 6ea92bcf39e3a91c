// getifaddrs(3) through bun:ffi, calling libc directly (glibc or musl): no compiler and no extra
// file at run time, so it works inside the compiled binary. It gives every interface with its
// flags and every address of it, in the kernel's order (the netlink dump: the links, then the IPv4
// addresses, then the IPv6 ones), as Go's net package reads them. os.networkInterfaces() (libuv's
// filter) leaves out an interface that is up without carrier (IFF_RUNNING unset) or down; this
// does not. Linux on 64-bit (x86_64, aarch64: one layout of struct ifaddrs for glibc and musl);
// elsewhere `readIfAddrs` says why it cannot.

export const IFF_UP = 0x1;
export const IFF_LOOPBACK = 0x8;
export const IFF_RUNNING = 0x40;

const AF_INET = 2;
const AF_INET6 = 10;
/** More entries than any pod or VM has: the walk stops there (a corrupt list cannot loop for ever). */
export const MAX_ENTRIES = 4096;

// struct ifaddrs on LP64 Linux: ifa_next 0, ifa_name 8, ifa_flags 16 (unsigned int), ifa_addr 24.
const OFF_NAME = 8;
const OFF_FLAGS = 16;
const OFF_ADDR = 24;

export interface IpBytes {
  family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array;
}

/** One entry of the list: an interface (with the link-level entry, `ip` is absent) or one of its addresses. */
export interface IfEntry {
  name: string;
  flags: number;
  ip?: IpBytes;
}

const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];

/** Every entry of getifaddrs(3), or the reason it could not be called. */
export function readIfAddrs(): IfEntry[] | string {
  if (process.platform !== "linux") return `getifaddrs through bun:ffi is for Linux (this is ${process.platform})`;
  if (process.arch !== "x64" && process.arch !== "arm64") return `getifaddrs through bun:ffi is for 64-bit x86 and ARM (this is ${process.arch})`;
  let ffi: typeof import("bun:ffi");
  try {
    ffi = require("bun:ffi") as typeof import("bun:ffi");
  } catch (e) {
    return `bun:ffi is not available: ${(e as Error).message}`;
  }
  const T = ffi.FFIType;
  let lib: { symbols: { getifaddrs: (out: unknown) => number; freeifaddrs: (list: unknown) => void }; close(): void } | undefined;
  const tried: string[] = [];
  for (const name of LIBC_NAMES) {
    try {
      lib = ffi.dlopen(name, {
        getifaddrs: { args: [T.ptr], returns: T.i32 },
        freeifaddrs: { args: [T.ptr], returns: T.void },
      }) as unknown as typeof lib;
      break;
    } catch (e) {
      tried.push(`${name}: ${(e as Error).message}`);
    }
  }
  if (!lib) return `getifaddrs could not be loaded from libc (${tried.join("; ")})`;
  try {
    const head = new BigUint64Array(1);
    if (lib.symbols.getifaddrs(ffi.ptr(head)) !== 0) return "getifaddrs failed";
    const first = Number(head[0]);
    const out: IfEntry[] = [];
    try {
      type Ptr = import("bun:ffi").Pointer;
      for (let p = first; p !== 0 && out.length < MAX_ENTRIES; p = ffi.read.ptr(p as Ptr, 0)) {
        const namePtr = ffi.read.ptr(p as Ptr, OFF_NAME);
        const name = namePtr === 0 ? "" : new ffi.CString(namePtr as Ptr).toString();
        const flags = ffi.read.u32(p as Ptr, OFF_FLAGS);
        const sa = ffi.read.ptr(p as Ptr, OFF_ADDR);
        // sa_family first (host order), then only the bytes that family's sockaddr has, copied
        // out before freeifaddrs: sin_addr at 4 (4 bytes), sin6_addr at 8 (16 bytes).
        const family = sa === 0 ? -1 : ffi.read.u16(sa as Ptr, 0);
        const copy = (off: number, len: number) => new Uint8Array(ffi.toArrayBuffer(sa as Ptr, off, len)).slice();
        if (family === AF_INET) out.push({ name, flags, ip: { family: 4, bytes: copy(4, 4) } });
        else if (family === AF_INET6) out.push({ name, flags, ip: { family: 6, bytes: copy(8, 16) } });
        else out.push({ name, flags });
      }
    } finally {
      lib.symbols.freeifaddrs(first);
    }
    return out;
  } finally {
    lib.close();
  }
}
