// A/B of idle memory with istiod's CA (issue #16): compiled agents in bench/idle.ts's proxyless
// shape (DISABLE_ENVOY, the bench's synthetic istiod), each once with the local CA (idle.ts's
// proxyless mode) and once signing through istiod's CA (a grpc-js fake CA over TLS in this
// process), all alive at once so the machine's load falls on every column alike. Memory (RSS, its
// anonymous and file-backed parts, and USS) is the median of WINDOWS readings from STEADY_MS after start.
//   IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent" bun bench/idle-ca.ts
// Not part of `bun run bench` (a comparison of builds, like xds-ab.ts).

import { join } from "node:path";
import { agents, loadavg, steadyMemory, STEADY_MS, WINDOW_MS, WINDOWS, withIstiodCa } from "./idle-ab-support.ts";
import { fmt, spawnUntil } from "./support.ts";

export async function run(): Promise<string> {
  return withIstiodCa("agent-idle-ca-", async ({ dir, ca, procs, pod }) => {
    const runs: { label: string; mode: string; pid: number }[] = [];
    const t0 = performance.now();
    for (const [label, bin] of agents()) {
      for (const mode of ["local CA", "istiod's CA"]) {
        const cwd = join(dir, `${label}-${mode === "local CA" ? "local" : "istiod"}`);
        const env = await pod(cwd);
        if (mode === "local CA") {
          delete env.CA_ADDR;
          delete env.CA_ROOT_CA;
          env.CA_PROVIDER = "local";
        }
        const p = await spawnUntil([bin, "proxy", "sidecar"], env, cwd, /certificates warmed/, 60_000);
        procs.push(p);
        runs.push({ label, mode, pid: p.pid });
      }
    }
    const signed = ca.requests.length;
    const { load, mib } = await steadyMemory(
      runs.map((r) => r.pid),
      t0,
    );
    return [
      "## Idle memory with istiod's CA (bench/idle-ca.ts)",
      "",
      `Proxyless agents (bench/idle.ts's shape), each build with the local CA and with istiod's CA (a grpc-js fake CA over TLS; ${signed} CSRs signed), all alive at once; ` +
        `memory the median of ${WINDOWS} readings ${WINDOW_MS / 1000} s apart from ${STEADY_MS / 1000} s after the first start. Load average: ${load} at the start, ${loadavg()} at the end.`,
      "",
      "| build | certificates | RSS MiB | anon RSS MiB (target ≤ 12) | file RSS MiB | USS MiB |",
      "|---|---|---|---|---|---|",
      ...runs.map((r, i) => `| ${r.label} | ${r.mode} | ${fmt(mib[i]!.rss)} | ${fmt(mib[i]!.anon)} | ${fmt(mib[i]!.file)} | ${fmt(mib[i]!.uss)} |`),
      "",
    ].join("\n");
  });
}

if (import.meta.main) console.log(await run());
