// Reaping orphans when the agent is PID 1 of its container. Processes that Envoy (or anything
// else) forks and abandons are re-parented to PID 1; when they exit they stay zombies until PID 1
// waits for them.
//
// Bun cannot install a SIGCHLD handler that calls waitpid(-1): Bun itself waits for the children
// it spawned, and if anyone else collects such a child's status first, Bun's own waitpid fails
// with ECHILD and the whole process dies (verified with Bun 1.4.5). So this reaper never calls
// waitpid(-1). Every interval it lists zombies whose parent is this process (/proc/<pid>/stat,
// state `Z`), skips the pids it is told we spawned (Envoy epochs), and reaps a zombie with
// waitpid(pid, WNOHANG) only when the same zombie (pid + start time) was already there on the
// previous scan: a child spawned through Bun by any other part of the agent is collected by Bun's
// event loop well within one interval, so only true orphans linger long enough to be reaped.
// waitpid comes from libc through bun:ffi, which works inside the compiled binary.

import { readdirSync, readFileSync } from "node:fs";
import { systemClock, type Clock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";

export interface ProcEntry {
  pid: number;
  ppid: number;
  state: string;
  /** Start time in clock ticks since boot (distinguishes a reused pid). */
  startTime: string;
}

/** Parse /proc/<pid>/stat; the command name may contain spaces and parentheses. */
export function parseProcStat(text: string): ProcEntry | undefined {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) return undefined;
  const pid = Number(text.slice(0, open).trim());
  const rest = text.slice(close + 2).split(" ");
  // rest[0] = state (field 3), rest[1] = ppid (field 4), rest[19] = starttime (field 22)
  if (!Number.isInteger(pid) || rest.length < 20) return undefined;
  return { pid, ppid: Number(rest[1]), state: rest[0]!, startTime: rest[19]! };
}

/** All processes visible in /proc. */
export function listProcesses(procRoot = "/proc"): ProcEntry[] {
  const out: ProcEntry[] = [];
  let names: string[];
  try {
    names = readdirSync(procRoot);
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const e = parseProcStat(readFileSync(`${procRoot}/${name}/stat`, "utf8"));
      if (e) out.push(e);
    } catch {
      // the process went away between readdir and read
    }
  }
  return out;
}

/** waitpid(pid, &status, WNOHANG) from libc; returns the pid reaped, 0 if still running, -1 on error. */
export type WaitPid = (pid: number) => number;

const WNOHANG = 1;
const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];

/** Load waitpid through bun:ffi; undefined when not on Linux or libc cannot be opened. */
export function loadWaitPid(): WaitPid | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    for (const name of LIBC_NAMES) {
      try {
        const lib = ffi.dlopen(name, {
          waitpid: { args: [ffi.FFIType.i32, ffi.FFIType.ptr, ffi.FFIType.i32], returns: ffi.FFIType.i32 },
        });
        const status = new Int32Array(1);
        const fn = lib.symbols.waitpid as unknown as (pid: number, st: unknown, opts: number) => number;
        return (pid) => fn(pid, ffi.ptr(status), WNOHANG);
      } catch {
        // next libc name
      }
    }
  } catch {
    // bun:ffi unavailable
  }
  return undefined;
}

export interface ChildReaperOptions {
  log: Logger;
  selfPid: number;
  /** Children this process spawned through Bun and must never reap (Envoy epochs). */
  isOwnChild: (pid: number) => boolean;
  intervalMs?: number;
  /** The scan interval sleeps on it (tests pass a manual clock). */
  clock?: Clock;
  list?: () => ProcEntry[];
  waitpid?: WaitPid;
}

export class ChildReaper {
  private seen = new Set<string>();
  private reapedTotal = 0;
  private readonly waitpid: WaitPid | undefined;
  private readonly list: () => ProcEntry[];

  constructor(private readonly opts: ChildReaperOptions) {
    this.waitpid = opts.waitpid ?? loadWaitPid();
    this.list = opts.list ?? (() => listProcesses());
  }

  get reaped(): number {
    return this.reapedTotal;
  }

  /** Scan in the background until the signal aborts. */
  start(signal: AbortSignal): void {
    if (!this.waitpid) {
      this.opts.log.warn("cannot reap orphaned processes: waitpid is not available through bun:ffi (libc not found)");
      return;
    }
    this.opts.log.info(`reaping orphaned child processes every ${this.opts.intervalMs ?? 1000}ms (agent is PID ${this.opts.selfPid})`);
    void (async () => {
      while (await (this.opts.clock ?? systemClock).sleep(this.opts.intervalMs ?? 1000, signal)) this.scan();
    })();
  }

  /** One scan; returns the pids reaped. */
  scan(): number[] {
    const reaped: number[] = [];
    const now = new Set<string>();
    for (const p of this.list()) {
      if (p.ppid !== this.opts.selfPid || p.state !== "Z" || this.opts.isOwnChild(p.pid)) continue;
      const key = `${p.pid}:${p.startTime}`;
      if (!this.seen.has(key)) {
        now.add(key);
        continue;
      }
      const rc = this.waitpid!(p.pid);
      if (rc === p.pid) {
        reaped.push(p.pid);
        this.reapedTotal++;
      } else if (rc === 0) {
        now.add(key);
      }
    }
    this.seen = now;
    if (reaped.length > 0) this.opts.log.debug(`reaped orphaned processes: ${reaped.join(", ")}`);
    return reaped;
  }
}
