// A/B of start -> first certificate with istiod's CA: compiled agents in bench/idle.ts's proxyless
// shape (DISABLE_ENVOY, the bench's synthetic istiod), certificates from a grpc-js fake CA over TLS
// in this process; spawn -> "Agent started" and spawn -> "certificates warmed" (default and ROOTCA
// signed: the key, the CSR and the CA's answer). The builds take turns, RUNS each, so the machine's
// load falls on both alike; each agent is SIGKILLed after its run.
//   IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent" bun bench/cert-start-ab.ts
// Not part of `bun run bench` (a comparison of builds, like idle-ca.ts).

import { rmSync } from "node:fs";
import { join } from "node:path";
import { agents, loadavg, withIstiodCa } from "./idle-ab-support.ts";
import { fmt, summary } from "./support.ts";

const RUNS = Number(process.env.CERT_START_RUNS ?? 15);
const STARTED = /Agent started/;
const WARMED = /certificates warmed/;

/** ms from spawn to each marker on stdout (in order); the agent is killed after the last. */
async function timeToMarkers(cmd: string[], env: Record<string, string>, cwd: string, markers: RegExp[]): Promise<number[]> {
  const t0 = performance.now();
  const proc = Bun.spawn(cmd, { env, cwd, stdout: "pipe", stderr: "ignore" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  const dec = new TextDecoder();
  const times: number[] = [];
  let buf = "";
  try {
    while (times.length < markers.length) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${cmd[0]} exited before printing ${markers[times.length]}: ${buf.slice(-2000)}`);
      buf += dec.decode(value);
      while (times.length < markers.length && markers[times.length]!.test(buf)) times.push(performance.now() - t0);
    }
  } finally {
    clearTimeout(timer);
    proc.kill("SIGKILL");
    await proc.exited;
  }
  return times;
}

export async function run(): Promise<string> {
  return withIstiodCa("agent-cert-start-", async ({ dir, ca, pod }) => {
    const builds = agents();
    const samples = builds.map(() => ({ started: [] as number[], warmed: [] as number[] }));
    const loadBefore = loadavg();
    for (let i = 0; i < RUNS; i++) {
      for (const [b, [label, bin]] of builds.entries()) {
        const cwd = join(dir, `${label}-${i}`);
        const env = await pod(cwd);
        const [started, warmed] = await timeToMarkers([bin, "proxy", "sidecar"], env, cwd, [STARTED, WARMED]);
        samples[b]!.started.push(started!);
        samples[b]!.warmed.push(warmed!);
        rmSync(cwd, { recursive: true, force: true });
      }
    }
    return [
      "## Start -> first certificate with istiod's CA (bench/cert-start-ab.ts)",
      "",
      `Proxyless agents (bench/idle.ts's shape), certificates from a grpc-js fake CA over TLS (${ca.requests.length} CSRs signed, RSA-2048 keys, the default), ` +
        `${RUNS} runs per build taking turns. Load average: ${loadBefore} at the start, ${loadavg()} at the end.`,
      "",
      "| build | spawn → Agent started, median / p99 ms | spawn → certificates warmed, median / p99 ms |",
      "|---|---|---|",
      ...builds.map(([label], b) => {
        const s = summary(samples[b]!.started);
        const w = summary(samples[b]!.warmed);
        return `| ${label} | ${fmt(s.median)} / ${fmt(s.p99)} | ${fmt(w.median)} / ${fmt(w.p99)} |`;
      }),
      "",
    ].join("\n");
  });
}

if (import.meta.main) console.log(await run());
