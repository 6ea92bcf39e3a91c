// Parent-death signal for the Envoy child, through bun:ffi and libc: prctl(PR_SET_PDEATHSIG)
// then execv, called in a short-lived copy of the agent that then becomes Envoy (Bun.spawn has
// no hook between fork and exec). The signal survives execv, so the kernel SIGKILLs Envoy when the
// agent dies, even by SIGKILL. Linux only; elsewhere `parentDeathSupported()` is false.

const PR_SET_PDEATHSIG = 1;
const SIGKILL = 9;

interface Libc {
  prctl(option: number, arg2: number, arg3: number, arg4: number, arg5: number): number;
  getppid(): number;
  execv(path: unknown, argv: unknown): number;
}

export const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];

function loadLibc(): { libc: Libc; ptr: (v: ArrayBufferView) => number } | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    const T = ffi.FFIType;
    for (const name of LIBC_NAMES) {
      try {
        const lib = ffi.dlopen(name, {
          prctl: { args: [T.i32, T.u64, T.u64, T.u64, T.u64], returns: T.i32 },
          getppid: { args: [], returns: T.i32 },
          execv: { args: [T.ptr, T.ptr], returns: T.i32 },
        });
        return { libc: lib.symbols as unknown as Libc, ptr: ffi.ptr as unknown as (v: ArrayBufferView) => number };
      } catch {
        // try the next libc name
      }
    }
  } catch {
    // no bun:ffi
  }
  return undefined;
}

/** True when prctl and execv can be reached through FFI on this machine. */
export function parentDeathSupported(): boolean {
  return loadLibc() !== undefined;
}

function cString(s: string): Buffer {
  return Buffer.from(`${s}\0`, "utf8");
}

/**
 * Arm SIGKILL-on-parent-death, check the parent is still `expectedParent` (it may have died before
 * prctl took effect), then replace this process with `file` (environment unchanged). Returns only
 * on failure, with the reason.
 */
export function execWithParentDeathSignal(expectedParent: number, file: string, argv: readonly string[]): string {
  const l = loadLibc();
  if (!l) return "prctl/execv are not reachable through bun:ffi on this system";
  if (l.libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) !== 0) return "prctl(PR_SET_PDEATHSIG) failed";
  if (l.libc.getppid() !== expectedParent) return `the agent (pid ${expectedParent}) died before Envoy started`;
  const strings = argv.map(cString);
  const table = new BigUint64Array(strings.length + 1);
  strings.forEach((s, i) => (table[i] = BigInt(l.ptr(s))));
  table[strings.length] = 0n;
  const path = cString(file);
  l.libc.execv(l.ptr(path), l.ptr(table));
  // Still here: execv failed. Keep the buffers alive until this point.
  void strings.length;
  return `execv ${file} failed`;
}
