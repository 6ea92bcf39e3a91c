// Before/after for the relay (not part of `bun run bench`): several compiled agents relay the same
// bench istiod, measured interleaved (bench/xds.ts's `measure`), median CPU ms per MiB, MiB/s and p50.
// Usage: [XDS_AB_SETTLE_MS=ms] bun bench/xds-ab.ts <agent,agent,...> <size,size,...> [rounds]

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, firstLine, measure, startAgent } from "./xds.ts";

const bins = (process.argv[2] ?? "").split(",").filter(Boolean);
const sizes = (process.argv[3] ?? "10240").split(",").map(Number);
const rounds = Number(process.argv[4] ?? 3);
if (bins.length === 0) throw new Error("usage: bun bench/xds-ab.ts <agent,agent,...> <size,size,...> [rounds]");

const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
const port = Number(await firstLine(istiod.stdout));
const agents: { bin: string; dir: string; proc: ReturnType<typeof Bun.spawn>; address: string }[] = [];
for (const bin of bins) {
  const dir = mkdtempSync(join(tmpdir(), "xds-ab-"));
  agents.push({ bin, dir, proc: await startAgent(dir, port, bin), address: `unix://${join(dir, "etc/istio/proxy/XDS")}` });
}
// XDS_AB_SETTLE_MS: wait this long after the last start, so that start-up work (the agent's release
// of its start-up code, src/lib/startupmemory.ts) is over before the first round.
await Bun.sleep(Number(process.env.XDS_AB_SETTLE_MS ?? 0));
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
try {
  for (const size of sizes) {
    const res = new Map(bins.map((b) => [b, { cpu: [] as number[], mibps: [] as number[], p50: [] as number[] }]));
    for (let i = 0; i < rounds; i++) {
      for (const a of agents) {
        const c0 = cpuMs(a.proc.pid);
        const m = await measure(a.address, size);
        const r = res.get(a.bin)!;
        r.cpu.push((cpuMs(a.proc.pid) - c0) / m.mib);
        r.mibps.push(m.mibps);
        r.p50.push(m.p50);
      }
    }
    for (const [bin, r] of res)
      console.log(`${size} B  ${bin}: ${med(r.cpu).toFixed(2)} ms CPU/MiB, ${med(r.mibps).toFixed(0)} MiB/s, p50 ${med(r.p50).toFixed(2)} ms`);
  }
  console.log(`load average: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
} finally {
  for (const a of agents) a.proc.kill("SIGTERM");
  istiod.kill("SIGTERM");
  await Promise.all([...agents.map((a) => a.proc.exited), istiod.exited]);
  for (const a of agents) rmSync(a.dir, { recursive: true, force: true });
}
