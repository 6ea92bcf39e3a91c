// Issue #29's per-pod cost, every row beside its target with met or missed: ours (dist/agent)
// against Istio's pilot-agent (built by test/interop), both measured in this one run.
//   memory     USS (private pages, /proc/PID/smaps_rollup) per pod with PODCOST_PODS agents of each
//              alive at once, settled PODCOST_SETTLE_MS: proxyless (DISABLE_ENVOY, the bench's
//              synthetic istiod); sidecar (istiod-lite: Istio's discovery server and CA, a stand-in
//              Envoy with its ADS stream and both SDS streams open, certificate issued); local mode
//              (ours only, LOCAL_XDS_PATH + CA_PROVIDER=local, the same stand-in; against Istio's
//              sidecar figure: it has no local mode).
//   start      spawn -> the stand-in Envoy's first instruction (bench/pilotagent.ts), alternating;
//              spawn -> ready: a stand-in Envoy has the workload certificate over SDS and a first
//              config over ADS, from istiod-lite through the agent, alternating. That stand-in is
//              bench/envoy-fast.ts, compiled: it asks 20-30 ms after its exec, as Envoy does (the
//              interop stand-in parses Envoy's protos first, and its 250-500 ms were the row).
//   relay      bench/pilotagent.ts's relay through one proxyless pair of the memory phase: peak RSS,
//              RSS 5 s after each size, CPU per MiB, throughput; idle wake-ups before it.
// The load average is printed at the start and the end: on a busy machine only the ratios hold.

import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/support/fake-envoy.ts";
import { startIstiodLite, LITE_NAMESPACE, LITE_SERVICE_ACCOUNT, LITE_TOKEN, type IstiodLite } from "../test/interop/support/istiod-lite.ts";
import { readStandinRecords, writeStandinLauncher } from "../test/interop/support/envoy-standin.ts";
import { agentsUnderTest, idleWindow, pod, relaySamples, sizeLabel, startProxyless, startSamples, waitFor, type Agent } from "./pilotagent.ts";
import { loadavg, ussKiB } from "./idle-ab-support.ts";
import { compileFastEnvoy } from "./envoy-fast.ts";
import { firstLine, fmt, rssKiB, summary, verdict, type Proc } from "./support.ts";

const ROOT = resolve(import.meta.dir, "..");
const PODS = Number(process.env.PODCOST_PODS ?? 10);
const SETTLE_MS = Number(process.env.PODCOST_SETTLE_MS ?? 30_000);
const START_RUNS = Number(process.env.PODCOST_START_RUNS ?? 21);
const READY_RUNS = Number(process.env.PODCOST_READY_RUNS ?? 11);
const IDLE_WINDOW_MS = 10_000;
const AFTER_RELAY_MS = 5000;

type Mode = "proxyless" | "sidecar" | "local";

/** A sidecar pod against istiod-lite (its root, token and identity), Envoy = the stand-in with ADS + SDS; local mode: the file and a local CA instead. */
export async function sidecarEnv(dir: string, lite: IstiodLite, local: boolean, envoy?: string): Promise<{ env: Record<string, string>; records: string }> {
  mkdirSync(dir, { recursive: true });
  const env = pod(
    dir,
    {
      discoveryAddress: lite.xdsAddress,
      binaryPath: envoy ?? writeStandinLauncher(dir),
      statusPort: await freePort(),
      proxyAdminPort: await freePort(),
      ...(local ? { controlPlaneAuthPolicy: "NONE" } : { controlPlaneAuthPolicy: "MUTUAL_TLS" }),
    },
    {},
  );
  writeFileSync(join(dir, "var/run/secrets/istio/root-cert.pem"), lite.rootPem);
  writeFileSync(join(dir, "var/run/secrets/tokens/istio-token"), LITE_TOKEN);
  const records = join(dir, "standin.jsonl");
  const extra: Record<string, string> = local
    ? { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local" }
    : { CA_ADDR: lite.caAddress, ISTIOD_SAN: "istiod.istio-system.svc" };
  if (local) copyFileSync(join(ROOT, "examples/xds.yaml"), join(dir, "xds.yaml"));
  return {
    env: {
      ...env,
      ...extra,
      POD_NAMESPACE: LITE_NAMESPACE,
      SERVICE_ACCOUNT: LITE_SERVICE_ACCOUNT,
      INTEROP_ENVOY_XDS: "sotw",
      INTEROP_ENVOY_SDS: "1",
      INTEROP_ENVOY_RECORD: records,
    },
    records,
  };
}

/** The stand-in has the workload certificate (SDS `default`) and a first configuration (any ADS answer). */
export function ready(records: string): boolean {
  const rs = readStandinRecords(records);
  return rs.some((r) => r.event === "sds" && r.names?.includes("default")) && rs.some((r) => r.event === "xds");
}

/** Spawn -> ready (certificate and first config at `envoy`, bench/envoy-fast.ts compiled), in ms; the agent and its stand-in are killed after. */
export async function startToReady(a: Agent, dir: string, lite: IstiodLite, envoy: string): Promise<number> {
  const { env, records } = await sidecarEnv(dir, lite, false, envoy);
  const t0 = performance.now();
  const p = Bun.spawn([a.bin, "proxy", "sidecar"], { cwd: dir, env, stdout: "ignore", stderr: "ignore" });
  try {
    await waitFor(`${a.name}: ready`, () => ready(records), p, 30_000);
    return performance.now() - t0;
  } finally {
    p.kill("SIGKILL");
    await p.exited;
    for (const r of readStandinRecords(records))
      if (r.event === "start")
        try {
          process.kill(r.pid, "SIGKILL");
        } catch {
          // already gone
        }
  }
}

interface Row {
  measure: string;
  ours: number;
  theirs: number;
  digits?: number;
  /** ours ÷ theirs must be at most this (or at least, with `atLeast`). */
  target: number;
  atLeast?: boolean;
  /** A target that is not a ratio (RSS back near idle): met or not, said here. */
  met?: boolean;
  targetText?: string;
}

function table(rows: Row[]): string[] {
  return rows.map((r) => {
    const ratio = r.ours / r.theirs;
    const met = r.met ?? (r.atLeast ? ratio >= r.target : ratio <= r.target);
    const target = r.targetText ?? `${r.atLeast ? "≥" : "≤"} ${fmt(r.target, 1)}×`;
    return `| ${r.measure} | ${fmt(r.ours, r.digits ?? 1)} | ${fmt(r.theirs, r.digits ?? 1)} | ${fmt(ratio, 2)}× | ${target} | ${verdict(met)} |`;
  });
}

export async function run(): Promise<string> {
  const agents = agentsUnderTest();
  if (typeof agents === "string") return `## Per-pod cost against Istio's pilot-agent\n\nnot measured: ${agents}\n`;
  const [ours, theirs] = agents as [Agent, Agent];
  const dir = mkdtempSync(join(tmpdir(), "agent-podcost-"));
  const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
  let lite: IstiodLite | undefined;
  const procs: Proc[] = [];
  const loadStart = loadavg();
  try {
    const port = Number(await firstLine(istiod.stdout as ReadableStream<Uint8Array>));
    lite = await startIstiodLite();

    // Start-up, one agent at a time, alternating.
    const start = await startSamples(agents, join(dir, "start"), port, START_RUNS);
    const readyMs: number[][] = agents.map(() => []);
    const envoy = compileFastEnvoy(join(dir, "envoy-fast"));
    for (let i = 0; i < READY_RUNS; i++)
      for (const [j, a] of agents.entries()) readyMs[j]!.push(await startToReady(a, join(dir, `ready-${a.name}-${i}`), lite, envoy));

    // Memory: PODS of each agent in each mode, all alive at once.
    const pods: { agent: Agent; mode: Mode; proc: Proc; records?: string }[] = [];
    const t0 = performance.now();
    for (let i = 0; i < PODS; i++) {
      for (const a of agents) {
        const px = await startProxyless(a, join(dir, `mem-proxyless-${a.name}-${i}`), port);
        procs.push(px);
        pods.push({ agent: a, mode: "proxyless", proc: px });
        for (const mode of a === ours ? (["sidecar", "local"] as const) : (["sidecar"] as const)) {
          const d = join(dir, `mem-${mode}-${a.name}-${i}`);
          const { env, records } = await sidecarEnv(d, lite, mode === "local");
          const p = Bun.spawn([a.bin, "proxy", "sidecar"], { cwd: d, env, stdout: "ignore", stderr: "ignore" });
          procs.push(p);
          pods.push({ agent: a, mode, proc: p, records });
        }
      }
    }
    // Every sidecar must be ready (certificate and config at its stand-in) before the settle counts.
    for (const p of pods) if (p.records) await waitFor(`${p.agent.name} ${p.mode}: ready`, () => ready(p.records!), p.proc, 60_000);
    await Bun.sleep(Math.max(0, SETTLE_MS - (performance.now() - t0)));
    const loadMem = loadavg();
    const uss = (a: Agent, mode: Mode) => summary(pods.filter((p) => p.agent === a && p.mode === mode).map((p) => ussKiB(p.proc.pid) / 1024));

    // Idle and relay through the first proxyless pair (the others stay alive: a busy node).
    const pair = agents.map((a) => pods.find((p) => p.agent === a && p.mode === "proxyless")!.proc);
    const idleRss = pair.map((p) => rssKiB(p.pid) / 1024);
    const idle = await idleWindow(pair, IDLE_WINDOW_MS);
    const relay = await relaySamples(agents, pair, (a) => join(dir, `mem-proxyless-${a.name}-0`, "etc/istio/proxy/XDS"), AFTER_RELAY_MS);
    const loadEnd = loadavg();

    const so = summary(start[0]!);
    const st = summary(start[1]!);
    const ro = summary(readyMs[0]!);
    const rt = summary(readyMs[1]!);
    const sidecarTheirs = uss(theirs, "sidecar").median;
    const rows: Row[] = [
      { measure: `USS per pod, proxyless, MiB (median of ${PODS})`, ours: uss(ours, "proxyless").median, theirs: uss(theirs, "proxyless").median, target: 1 },
      { measure: `USS per pod, sidecar, MiB (median of ${PODS})`, ours: uss(ours, "sidecar").median, theirs: sidecarTheirs, target: 1 },
      { measure: `USS per pod, local mode vs Istio's sidecar, MiB (median of ${PODS})`, ours: uss(ours, "local").median, theirs: sidecarTheirs, target: 1 },
      { measure: "start → Envoy spawned, median ms", ours: so.median, theirs: st.median, target: 1 },
      { measure: "start → Envoy spawned, p99 ms", ours: so.p99, theirs: st.p99, target: 1 },
      { measure: "start → ready (certificate + first config at Envoy), median ms", ours: ro.median, theirs: rt.median, target: 1 },
      { measure: "start → ready, p99 ms", ours: ro.p99, theirs: rt.p99, target: 1 },
      { measure: "idle wake-ups/s (proxyless)", ours: idle[0]!.wakeups, theirs: idle[1]!.wakeups, target: 1 },
    ];
    for (const [size, [o, t]] of relay) {
      const label = sizeLabel(size);
      rows.push({ measure: `peak RSS relaying pushes up to ${label}, MiB`, ours: o!.peak, theirs: t!.peak, digits: 0, target: 1 });
      const back = o!.after / idleRss[0]!;
      rows.push({
        measure: `RSS ${AFTER_RELAY_MS / 1000} s after ${label} pushes ÷ idle RSS before relaying (ours ${fmt(idleRss[0]!, 0)} MiB idle, Istio's ${fmt(idleRss[1]!, 0)})`,
        ours: back,
        theirs: t!.after / idleRss[1]!,
        digits: 2,
        target: 1.1,
        met: back <= 1.1,
        targetText: "ours ≤ 1.10",
      });
      rows.push({ measure: `relay CPU ms per MiB, ${label}`, ours: o!.cpu, theirs: t!.cpu, digits: 2, target: 1 });
      rows.push({ measure: `relay throughput MiB/s, ${label}`, ours: o!.mibps, theirs: t!.mibps, digits: 0, target: 1, atLeast: true });
    }
    return [
      "## Per-pod cost against Istio's pilot-agent (bench/podcost.ts, issue #29's targets)",
      "",
      `Ours \`${ours.bin.replace(ROOT + "/", "")}\` and Istio's pilot-agent (test/interop/.bin) in one run. Memory: ${PODS} agents of each alive at once per mode ` +
        `(${PODS * 4} agents in all, plus the stand-in Envoys), ${SETTLE_MS / 1000} s after the first start and every sidecar ready; USS = Private_Clean + Private_Dirty. ` +
        `Start → Envoy spawned: ${START_RUNS} alternating runs each (Istio's bootstrap template, a shell stand-in). Start → ready: ${READY_RUNS} alternating runs each against istiod-lite ` +
        `(Istio's discovery server and CA), until a compiled stand-in Envoy (bench/envoy-fast.ts: its first requests 20-30 ms after its exec) has the workload certificate over SDS and a first ADS answer. Relay: bench/pilotagent.ts's (the bench's synthetic istiod) through one proxyless pair while the other agents stay up. ` +
        `Load average: ${loadStart} at the start, ${loadMem} when memory was read, ${loadEnd} at the end.`,
      "",
      "| measure | ours | pilot-agent | ours ÷ pilot-agent | target | |",
      "|---|---|---|---|---|---|",
      ...table(rows),
      "",
    ].join("\n");
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    istiod.kill("SIGKILL");
    await Promise.all([...procs.map((p) => p.exited), istiod.exited]);
    // The stand-in Envoys leave with their agent (the death link, Istio's Pdeathsig); what is left of the pods goes.
    await lite?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
