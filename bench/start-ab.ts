// A/B of the start path: compiled builds (and Istio's pilot-agent) side by side in one run, taking
// turns so the machine's load falls on all alike. Start -> Envoy spawned (bench/pilotagent.ts's
// sidecar shape: Istio's bootstrap template, a shell stand-in that marks its first instruction) and
// start -> ready (bench/podcost.ts's: the compiled fast stand-in Envoy, bench/envoy-fast.ts, has the
// workload certificate over SDS and a first ADS answer, from istiod-lite through the agent). Load average printed at start and end.
//   START_AB_AGENTS="main=/tmp/agent-main,new=dist/agent" bun bench/start-ab.ts
// pilot-agent (test/interop/.bin) is added as the last column when built. Not part of `bun run bench`.

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PILOT_AGENT } from "../test/interop/support/go-build.ts";
import { startIstiodLite } from "../test/interop/support/istiod-lite.ts";
import { loadavg } from "./idle-ab-support.ts";
import { startToEnvoy, type Agent } from "./pilotagent.ts";
import { compileFastEnvoy } from "./envoy-fast.ts";
import { startToReady } from "./podcost.ts";
import { firstLine, fmt, summary } from "./support.ts";

const START_RUNS = Number(process.env.START_AB_RUNS ?? 21);
const READY_RUNS = Number(process.env.START_AB_READY_RUNS ?? 11);

function agentsFromEnv(): Agent[] {
  const spec = process.env.START_AB_AGENTS ?? "";
  const agents = spec
    .split(",")
    .filter(Boolean)
    .map((kv) => {
      const [name, bin] = kv.split("=");
      if (!name || !bin || !existsSync(bin)) throw new Error(`START_AB_AGENTS: ${kv}: expected name=path to a built binary`);
      return { name, bin: bin.startsWith("/") ? bin : join(process.cwd(), bin) };
    });
  if (agents.length === 0) throw new Error('START_AB_AGENTS="a=/path/agent,b=dist/agent" names the builds to compare');
  if (existsSync(PILOT_AGENT)) agents.push({ name: "pilot-agent", bin: PILOT_AGENT });
  return agents;
}

export async function run(): Promise<string> {
  const agents = agentsFromEnv();
  const dir = mkdtempSync(join(tmpdir(), "agent-start-ab-"));
  const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
  const lite = READY_RUNS > 0 ? await startIstiodLite() : undefined;
  const load0 = loadavg();
  try {
    const port = Number(await firstLine(istiod.stdout as ReadableStream<Uint8Array>));
    const spawned: number[][] = agents.map(() => []);
    for (let i = 0; i < START_RUNS; i++)
      for (const [j, a] of agents.entries()) spawned[j]!.push(await startToEnvoy(a, join(dir, `start-${a.name}-${i}`), port));
    const loadMid = loadavg();
    const ready: number[][] = agents.map(() => []);
    const envoy = READY_RUNS > 0 ? compileFastEnvoy(join(dir, "envoy-fast")) : "";
    for (let i = 0; i < READY_RUNS; i++)
      for (const [j, a] of agents.entries()) ready[j]!.push(await startToReady(a, join(dir, `ready-${a.name}-${i}`), lite!, envoy));
    const load1 = loadavg();
    const base = agents.length - 1;
    const row = (what: string, xs: number[][], key: "median" | "p99") => {
      const s = xs.map((x) => summary(x)[key]);
      return `| ${what} | ${s.map((v, j) => `${fmt(v)}${j === base ? "" : ` (${fmt(v / s[base]!, 2)}×)`}`).join(" | ")} |`;
    };
    return [
      `## Start A/B (bench/start-ab.ts): ${START_RUNS} alternating runs to Envoy spawned, ${READY_RUNS} to ready; ms (÷ ${agents[base]!.name})`,
      "",
      `Load average: ${load0} at the start, ${loadMid} after the spawn runs, ${load1} at the end.`,
      "",
      `| | ${agents.map((a) => a.name).join(" | ")} |`,
      `|---|${agents.map(() => "---|").join("")}`,
      row("start → Envoy spawned, median", spawned, "median"),
      row("start → Envoy spawned, p99", spawned, "p99"),
      ...(READY_RUNS > 0 ? [row("start → ready, median", ready, "median"), row("start → ready, p99", ready, "p99")] : []),
      "",
    ].join("\n");
  } finally {
    istiod.kill("SIGKILL");
    await lite?.stop();
    await istiod.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
