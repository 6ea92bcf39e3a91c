// What the benches read of a running process from /proc: its threads' context switches (wake-ups)
// and its resident memory. Shared by bench/idle.ts, bench/pilotagent.ts and the benches built on
// them, so none of them imports another bench for it.

import { readdirSync, readFileSync } from "node:fs";

/** Voluntary + involuntary context switches of each thread of `pid`, by thread id. */
export function threadSwitches(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
      out.set(tid, Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0));
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return out;
}

/** Context switches summed over every thread of `pid` (one reading). */
export function wakeups(pid: number): number {
  let n = 0;
  for (const v of threadSwitches(pid).values()) n += v;
  return n;
}

/**
 * Context switches of `pid` from now on, threads that start or end meanwhile included: each
 * thread is read every `everyMs`, and a thread's last reading counts after it has gone (a plain
 * difference of two sums would lose an exiting thread's switches, and can even go negative).
 */
export function switchCounter(pid: number, everyMs = 250): { sample(): void; stop(): number } {
  const first = threadSwitches(pid);
  const last = new Map(first);
  const read = () => {
    for (const [tid, n] of threadSwitches(pid)) last.set(tid, n);
  };
  const t = setInterval(read, everyMs);
  return {
    /** Reads every thread now (the interval may not have run while a short-lived thread lived). */
    sample: read,
    stop() {
      clearInterval(t);
      read();
      let n = 0;
      for (const [tid, v] of last) n += v - (first.get(tid) ?? 0);
      return n;
    },
  };
}

/** VmRSS, RssAnon and RssFile in KiB. */
export function memKiB(pid: number): { rss: number; anon: number; file: number } {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? NaN);
  return { rss: kib("VmRSS"), anon: kib("RssAnon"), file: kib("RssFile") };
}
