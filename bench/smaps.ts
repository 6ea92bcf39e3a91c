// A process's private memory (USS: Private_Clean + Private_Dirty) split by mapping, from
// /proc/PID/smaps, and each thread's stack mapping found from the stack pointer the kernel shows in
// /proc/PID/task/TID/syscall (a sleeping thread's). Used by bench/idle-sidecar.ts to say where a
// settled agent's MiB go. Not a bench itself (bench/run.ts skips names without a run()).

import { readdirSync, readFileSync, readlinkSync } from "node:fs";

export interface Mapping {
  start: bigint;
  end: bigint;
  perms: string;
  path: string;
  sizeKiB: number;
  rssKiB: number;
  ussKiB: number;
  /** Private_Dirty alone: what stays private however many processes map the same file. */
  dirtyKiB: number;
}

/** Every mapping of `pid` with its size, RSS and private pages, in KiB. */
export function mappings(pid: number): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      cur = { start: BigInt(`0x${head[1]}`), end: BigInt(`0x${head[2]}`), perms: head[3]!, path: head[4]!, sizeKiB: 0, rssKiB: 0, ussKiB: 0, dirtyKiB: 0 };
      out.push(cur);
      continue;
    }
    const kv = /^(\w+):\s+(\d+) kB/.exec(line);
    if (!kv || !cur) continue;
    const v = Number(kv[2]);
    if (kv[1] === "Size") cur.sizeKiB = v;
    else if (kv[1] === "Rss") cur.rssKiB = v;
    else if (kv[1] === "Private_Clean") cur.ussKiB += v;
    else if (kv[1] === "Private_Dirty") {
      cur.ussKiB += v;
      cur.dirtyKiB += v;
    }
  }
  return out;
}

export interface ThreadInfo {
  tid: number;
  comm: string;
  /** The stack pointer of a thread blocked in a system call, if the kernel shows it. */
  sp?: bigint;
}

export function threads(pid: number): ThreadInfo[] {
  return readdirSync(`/proc/${pid}/task`).map((t) => {
    const tid = Number(t);
    const comm = readFileSync(`/proc/${pid}/task/${t}/comm`, "utf8").trim();
    let sp: bigint | undefined;
    try {
      const f = readFileSync(`/proc/${pid}/task/${t}/syscall`, "utf8").trim().split(" ");
      if (f.length >= 8) sp = BigInt(f[f.length - 2]!);
    } catch {
      // not readable: no stack pointer
    }
    return { tid, comm, sp };
  });
}

/** Names each mapping: the binary, a thread's stack, JIT code, a file, or anonymous memory by size. */
export function classify(pid: number, ms = mappings(pid), ts = threads(pid)): { name: string; m: Mapping }[] {
  const exe = readlinkSync(`/proc/${pid}/exe`);
  return ms.map((m) => {
    const owner = ts.filter((t) => t.sp !== undefined && t.sp >= m.start && t.sp < m.end).map((t) => t.comm);
    let name: string;
    if (owner.length) name = `stack: ${owner.join(", ")}`;
    else if (m.path === exe) name = `binary ${m.perms}`;
    else if (m.path.startsWith("/memfd:") || m.path.includes("memfd")) name = `memfd ${m.path}`;
    else if (m.path.startsWith("[")) name = m.path;
    else if (m.path) name = `file ${m.path.split("/").pop()} ${m.perms}`;
    else if (m.perms.includes("x")) name = "anon executable (JIT code)";
    else
      name = `anon ${m.perms} ${m.sizeKiB >= 1 << 20 ? `${m.sizeKiB >> 20} GiB` : m.sizeKiB >= 1024 ? `${Math.round(m.sizeKiB / 1024)} MiB` : `${m.sizeKiB} KiB`}`;
    return { name, m };
  });
}
