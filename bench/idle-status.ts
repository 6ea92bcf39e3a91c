// A/B of the status port's thread (issue 29): many compiled agents of each build alive at once,
// in two shapes, both with certificates from istiod's CA (a grpc-js fake CA over TLS in this
// process) as every real pod has them: proxyless (DISABLE_ENVOY, bench/idle.ts's synthetic
// istiod) and sidecar (a stand-in Envoy that only sleeps). Per build and shape: the median over
// its agents of USS (Private_Clean + Private_Dirty of smaps_rollup), anonymous and total RSS, the
// number of threads, and wake-ups per second over the readings (bench/idle.ts's counter). With
// IDLE_PILOT_AGENT set, as many of Istio's pilot-agent in each shape beside them.
//   IDLE_AGENTS="main=/tmp/agent-main,native=dist/agent" IDLE_COUNT=10 bun bench/idle-status.ts
// Not part of `bun run bench` (a comparison of builds, like idle-ca.ts).

import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { agents, loadavg, steadyMemory, STEADY_MS, WINDOW_MS, WINDOWS, withIstiodCa } from "./idle-ab-support.ts";
import { startPilotAgent } from "./idle.ts";
import { switchCounter } from "./procstat.ts";
import { fmt, spawnUntil } from "./support.ts";

const COUNT = Number(process.env.IDLE_COUNT ?? 10);
const SHAPES = ["proxyless", "sidecar"] as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<string> {
  return withIstiodCa("agent-idle-status-", async ({ dir, ca, istiodPort, procs, pod }) => {
    const sleeper = join(dir, "envoy-sleep");
    writeFileSync(sleeper, "#!/bin/sh\nexec sleep 900\n", { mode: 0o755 });
    const groups: { label: string; shape: string; pids: number[] }[] = [];
    const t0 = performance.now();
    for (let i = 0; i < COUNT; i++) {
      for (const [label, bin] of agents()) {
        for (const shape of SHAPES) {
          const cwd = join(dir, `${label}-${shape}-${i}`);
          const env = await pod(cwd, shape === "sidecar" ? { binaryPath: sleeper } : {});
          if (shape === "sidecar") delete env.DISABLE_ENVOY;
          const p = await spawnUntil([bin, "proxy", "sidecar"], env, cwd, /certificates warmed/, 120_000);
          procs.push(p);
          let g = groups.find((x) => x.label === label && x.shape === shape);
          if (!g) groups.push((g = { label, shape, pids: [] }));
          g.pids.push(p.pid);
        }
      }
      const pilot = process.env.IDLE_PILOT_AGENT;
      if (pilot && existsSync(pilot)) {
        for (const shape of SHAPES) {
          const p = await startPilotAgent(pilot, join(dir, `istio-${shape}-${i}`), istiodPort, shape === "sidecar" ? sleeper : undefined);
          procs.push(p);
          let g = groups.find((x) => x.label === "Istio pilot-agent" && x.shape === shape);
          if (!g) groups.push((g = { label: "Istio pilot-agent", shape, pids: [] }));
          g.pids.push(p.pid);
        }
      }
    }
    const pids = groups.flatMap((g) => g.pids);
    const startedIn = (performance.now() - t0) / 1000;
    // Wake-ups over the readings' windows: counted from STEADY_MS, as the memory is read.
    await Bun.sleep(Math.max(0, STEADY_MS - (performance.now() - t0)));
    const counters = pids.map((pid) => switchCounter(pid, 1000));
    const tw = performance.now();
    const { load, mib } = await steadyMemory(pids, performance.now() - STEADY_MS);
    const switches = counters.map((c) => c.stop());
    const elapsed = (performance.now() - tw) / 1000;
    const threads = pids.map((pid) => readdirSync(`/proc/${pid}/task`).length);
    let k = 0;
    const rows = groups.map((g) => {
      const idx = g.pids.map(() => k++);
      const m = (f: (i: number) => number) => median(idx.map(f));
      return `| ${g.label} | ${g.shape} | ${g.pids.length} | ${fmt(m((i) => mib[i]!.uss))} | ${fmt(m((i) => mib[i]!.anon))} | ${fmt(m((i) => mib[i]!.rss))} | ${m((i) => threads[i]!)} | ${fmt(
        m((i) => switches[i]! / elapsed),
        2,
      )} |`;
    });
    return [
      "## Idle memory by status-port thread (bench/idle-status.ts)",
      "",
      `${COUNT} agents of each build in each shape (proxyless; sidecar with a sleeping stand-in Envoy), certificates from istiod's CA (a grpc-js fake CA over TLS; ${ca.requests.length} CSRs signed), all alive at once (started over ${fmt(startedIn, 0)} s); ` +
        `per build and shape the median over its agents of the median of ${WINDOWS} readings ${WINDOW_MS / 1000} s apart from ${STEADY_MS / 1000} s after the last start. Load average: ${load} at the first reading, ${loadavg()} at the end.`,
      "",
      "| build | shape | agents | USS MiB | anon RSS MiB | RSS MiB | threads | wake-ups/s |",
      "|---|---|---|---|---|---|---|---|",
      ...rows,
      "",
    ].join("\n");
  });
}

if (import.meta.main) console.log(await run());
