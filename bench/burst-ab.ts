// Burst memory side by side (issue 29): several compiled agents and Istio's pilot-agent, all alive
// at once as proxyless pods relaying the same bench istiod (bench/pilotagent.ts's shape), take
// turns relaying pushes of each size (bench/xds.ts's `measure`). Per agent and size: the peak RSS
// of that burst (VmHWM, reset through /proc/PID/clear_refs before it), split into anonymous and
// file-backed at the sampled peak, the RSS 5 s after the burst ended against the idle RSS before
// the first burst, CPU ms per MiB and MiB/s. Medians over the rounds.
// Usage: bun bench/burst-ab.ts <name=agent,name=agent,...> [size,size,...] [rounds]
//   (pilot-agent from test/interop/.bin is added when built; BURST_NO_ISTIO=1 leaves it out)

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PILOT_AGENT } from "../test/interop/support/go-build.ts";
import { memKiB } from "./procstat.ts";
import { startProxyless } from "./pilotagent.ts";
import { cpuMs, firstLine, fmt, summary, type Proc } from "./support.ts";
import { measure } from "./xds.ts";

const spec = (process.argv[2] ?? "").split(",").filter(Boolean);
const sizes = (process.argv[3] ?? `${10 * 1024},${474 * 1024},${1 << 20},${10 << 20}`).split(",").map(Number);
const rounds = Number(process.argv[4] ?? 3);
if (spec.length === 0) throw new Error("usage: bun bench/burst-ab.ts <name=agent,...> [size,...] [rounds]");
// name=bin, optionally followed by ?K=V&K=V: environment for that agent only (experiments).
const agents = spec.map((s) => {
  const [head, query] = s.split("?") as [string, string | undefined];
  const [name, bin] = head.includes("=") ? (head.split("=") as [string, string]) : [head, head];
  return { name, bin, env: Object.fromEntries(new URLSearchParams(query ?? "")) };
});
if (existsSync(PILOT_AGENT) && !process.env.BURST_NO_ISTIO) agents.push({ name: "pilot-agent", bin: PILOT_AGENT, env: {} });

const median = (xs: number[]) => summary(xs).median;
const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const label = (size: number) => (size >= 1 << 20 ? `${size / (1 << 20)} MiB` : `${Math.round(size / 1024)} KiB`);

const dir = mkdtempSync(join(tmpdir(), "burst-ab-"));
const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
const procs: Proc[] = [];
try {
  const port = Number(await firstLine(istiod.stdout as ReadableStream<Uint8Array>));
  for (const a of agents) procs.push(await startProxyless(a, join(dir, a.name), port, a.env));
  await Bun.sleep(8000);
  const idle = procs.map((p) => memKiB(p.pid).rss / 1024);
  const loads = [load()];
  type Row = { peak: number[]; anon: number[]; file: number[]; after: number[]; cpu: number[]; mibps: number[] };
  const res = new Map<number, Row[]>();
  for (const size of sizes) {
    const rows: Row[] = agents.map(() => ({ peak: [], anon: [], file: [], after: [], cpu: [], mibps: [] }));
    for (let r = 0; r < rounds; r++) {
      const ended: number[] = [];
      for (const [j, a] of agents.entries()) {
        const pid = procs[j]!.pid;
        writeFileSync(`/proc/${pid}/clear_refs`, "5");
        let top = { rss: 0, anon: 0, file: 0 };
        const sampler = setInterval(() => {
          const m = memKiB(pid);
          if (m.rss > top.rss) top = m;
        }, 20);
        const c0 = cpuMs(pid);
        const m = await measure(`unix://${join(dir, a.name, "etc/istio/proxy/XDS")}`, size);
        clearInterval(sampler);
        const cpu = cpuMs(pid) - c0;
        ended.push(performance.now());
        const row = rows[j]!;
        row.peak.push(Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024);
        row.anon.push(top.anon / 1024);
        row.file.push(top.file / 1024);
        row.cpu.push(cpu / m.mib);
        row.mibps.push(m.mibps);
      }
      // 5 s after each agent's burst ended (the others' bursts run meanwhile: the machine is shared anyway).
      for (const [j] of agents.entries()) {
        const wait = ended[j]! + 5000 - performance.now();
        if (wait > 0) await Bun.sleep(wait);
        rows[j]!.after.push(memKiB(procs[j]!.pid).rss / 1024);
      }
    }
    res.set(size, rows);
    loads.push(load());
  }
  const lines = [
    `Load average: ${loads.join(" → ")} (not a quiet machine: ratios side by side are what count). ${rounds} rounds, median.`,
    "",
    "| push | agent | idle RSS MiB | peak RSS MiB (VmHWM) | anon / file at the sampled peak | RSS 5 s after (÷ idle) | CPU ms/MiB | MiB/s |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const [size, rows] of res)
    for (const [j, a] of agents.entries()) {
      const r = rows[j]!;
      const after = median(r.after);
      lines.push(
        `| ${label(size)} | ${a.name} | ${fmt(idle[j]!)} | ${fmt(median(r.peak))} | ${fmt(median(r.anon))} / ${fmt(median(r.file))} | ${fmt(after)} (${fmt(after / idle[j]!, 2)}×) | ${fmt(median(r.cpu), 2)} | ${fmt(median(r.mibps), 0)} |`,
      );
    }
  console.log(lines.join("\n"));
} finally {
  for (const p of procs) p.kill("SIGKILL");
  istiod.kill("SIGKILL");
  await Promise.all([...procs.map((p) => p.exited), istiod.exited]);
  rmSync(dir, { recursive: true, force: true });
}
