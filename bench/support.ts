// Shared helpers for benchmarks: statistics, process RSS/CPU from /proc, machine description.

import { readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function summary(samples: number[]): { median: number; p99: number; min: number; mean: number } {
  const s = [...samples].sort((a, b) => a - b);
  return { median: percentile(s, 50), p99: percentile(s, 99), min: s[0] ?? NaN, mean: s.reduce((a, b) => a + b, 0) / (s.length || 1) };
}

/** Resident set size of a process in KiB (VmRSS), or NaN. */
export function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** Peak RSS (VmHWM) of a process in KiB, or NaN. */
export function peakRssKiB(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** User+system CPU time of a process in milliseconds, from /proc/<pid>/stat. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return NaN;
  }
}

export function machine(): string {
  const c = cpus();
  return `${c.length} × ${c[0]?.model ?? "unknown CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, ${process.platform}/${process.arch}, Bun ${Bun.version}`;
}

export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

export type Proc = ReturnType<typeof Bun.spawn>;

/** `met` or `missed`, for a target printed beside its measured value. */
export const verdict = (ok: boolean) => (ok ? "met" : "**missed**");

/** The first line a process prints (the stream is released afterwards). */
export async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.trim();
}

/** Spawn and resolve once stdout matches `marker`; stdout keeps draining afterwards. */
export async function spawnUntil(cmd: string[], env: Record<string, string>, cwd: string, marker: RegExp, limitMs = 20_000): Promise<Proc & { ms: number }> {
  const t0 = performance.now();
  const proc = Bun.spawn(cmd, { env, cwd, stdout: "pipe", stderr: "ignore" });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  const dec = new TextDecoder();
  let buf = "";
  const timer = setTimeout(() => proc.kill("SIGKILL"), limitMs);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${cmd[0]} exited before printing ${marker}: ${buf.slice(-2000)}`);
      buf += dec.decode(value);
      if (marker.test(buf)) break;
    }
  } finally {
    clearTimeout(timer);
  }
  const ms = performance.now() - t0;
  void (async () => {
    for (;;) if ((await reader.read()).done) break;
  })();
  return Object.assign(proc, { ms });
}

/** A compiled hello-world (prints "ready", then a 1 s interval) in `dir`: the floor of every idle figure. */
export function compileHello(dir: string): string {
  const src = `${dir}/hello.ts`;
  writeFileSync(src, 'console.log("ready"); setInterval(() => {}, 1000);\n');
  const out = `${dir}/hello`;
  const b = Bun.spawnSync([process.execPath, "build", src, "--compile", "--minify", "--bytecode", "--outfile", out], { stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`compiling hello-world: ${b.stderr.toString()}`);
  return out;
}
