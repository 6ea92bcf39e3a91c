// A/B of USS per pod in bench/podcost.ts's proxyless shape (issue 29): the system CA bundle as the
// mesh root and a CA address nothing listens on (bench/pilotagent.ts's pod()), so every agent
// keeps retrying its CSRs, as a pod does while istiod is unreachable. IDLE_COUNT agents of each
// build alive at once, started alternately; per build the median over its agents of the median
// of WINDOWS readings WINDOW_MS apart from STEADY_MS after the last start (bench/idle-ab-support.ts).
// Istio's pilot-agent in the same shape beside them when test/interop has built it.
//   IDLE_AGENTS="main=/tmp/agent-main,after=dist/agent" IDLE_COUNT=10 bun bench/proxyless-ab.ts
// Not part of `bun run bench` (a comparison of builds, like idle-ca.ts).

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agents, loadavg, steadyMemory, STEADY_MS, WINDOW_MS, WINDOWS } from "./idle-ab-support.ts";
import { startProxyless } from "./pilotagent.ts";
import { PILOT_AGENT } from "../test/interop/support/go-build.ts";
import { firstLine, fmt, type Proc } from "./support.ts";

const COUNT = Number(process.env.IDLE_COUNT ?? 10);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agent-proxyless-ab-"));
  const procs: Proc[] = [];
  try {
    const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
    procs.push(istiod);
    const port = Number((await firstLine(istiod.stdout as ReadableStream<Uint8Array>)).trim());
    const builds = agents();
    if (existsSync(PILOT_AGENT)) builds.push(["Istio pilot-agent", PILOT_AGENT]);
    const pids: number[][] = builds.map(() => []);
    for (let i = 0; i < COUNT; i++) {
      for (const [j, [label, bin]] of builds.entries()) {
        const p = await startProxyless({ name: label, bin }, join(dir, `build${j}-${i}`), port);
        procs.push(p);
        pids[j]!.push(p.pid);
      }
    }
    const { load, mib } = await steadyMemory(pids.flat(), performance.now());
    let k = 0;
    const rows = builds.map(([label], j) => {
      const m = pids[j]!.map(() => mib[k++]!);
      const f = (g: (x: (typeof m)[number]) => number) => fmt(median(m.map(g)));
      return `| ${label} | ${COUNT} | ${f((x) => x.uss)} | ${fmt(Math.min(...m.map((x) => x.uss)))}–${fmt(Math.max(...m.map((x) => x.uss)))} | ${f((x) => x.anon)} | ${f((x) => x.rss)} |`;
    });
    return [
      "## USS per pod, proxyless with an unreachable CA (bench/proxyless-ab.ts)",
      "",
      `${COUNT} agents of each build in bench/podcost.ts's proxyless shape (the system CA bundle as root, nothing listening at CA_ADDR, the bench's synthetic istiod), all alive at once; ` +
        `per build the median over its agents of the median of ${WINDOWS} readings ${WINDOW_MS / 1000} s apart from ${STEADY_MS / 1000} s after the last start. Load average: ${load} at the first reading, ${loadavg()} at the end.`,
      "",
      "| build | agents | USS MiB (median) | USS MiB (range) | anon RSS MiB | RSS MiB |",
      "|---|---|---|---|---|---|",
      ...rows,
      "",
    ].join("\n");
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
