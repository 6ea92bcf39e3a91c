// `bun run bench -- fleet`: the mesh at scale (issue #30, docs/scale.md). One istiod-lite (Istio's
// discovery server and CA) serving a realistic mesh (test/interop/support/fleet-config.ts), N pods
// each with its own identity, every pod's Envoy played by one fleet-envoy process (its cost
// stays out of the agents' figures); the same fleet with our agent and with Istio's
// pilot-agent, one after the other in the same run, for each xDS mode. Per fleet: the start storm
// (all N at once until every pod is ready), what istiod saw per pod (CSRs, xDS streams), private
// memory per agent once settled, push propagation of small (one endpoint) and large (a new
// Service with many endpoints) changes until every pod ACKed, an istiod restart (every pod has
// CDS and LDS again, nothing lost or added), istiod's CPU and peak RSS.
//
// Settings (env): FLEET_PODS (50), FLEET_CHANGES per size (20), FLEET_LARGE_ENDPOINTS (50),
// FLEET_MODES ("delta,sotw"), FLEET_SETTLE_S (10), FLEET_SVG (docs/scale-propagation.svg).

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { buildInterop, PILOT_AGENT } from "../test/interop/support/go-build.ts";
import { istioBootstrapTemplate } from "../test/interop/support/agent-run.ts";
import { Fleet, nowMs, type PodDump, type XdsMode } from "../test/interop/support/fleet.ts";
import { BENCH_MESH } from "../test/interop/support/fleet-config.ts";
import { cdfSvg, type CdfPanel } from "./fleet-plot.ts";
import { cpuMs, fmt, machine, peakRssKiB, percentile, rssKiB } from "./support.ts";

const ROOT = resolve(import.meta.dir, "..");
const PODS = Number(process.env.FLEET_PODS ?? 50);
const CHANGES = Number(process.env.FLEET_CHANGES ?? 20);
const LARGE_ENDPOINTS = Number(process.env.FLEET_LARGE_ENDPOINTS ?? 50);
const MODES = (process.env.FLEET_MODES ?? "delta,sotw").split(",") as XdsMode[];
const SETTLE_MS = Number(process.env.FLEET_SETTLE_S ?? 10) * 1000;
const SVG = resolve(ROOT, process.env.FLEET_SVG ?? "docs/scale-propagation.svg");
const TYPES = ["Cluster", "ClusterLoadAssignment", "Listener", "RouteConfiguration", "Secret"];

interface Agent {
  name: string;
  bin: string;
}

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const memAvailableKiB = () => Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]);

/** Unique set size (private clean + private dirty) of a process in KiB, from smaps_rollup. */
function ussKiB(pid: number): number {
  try {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const f = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(t)?.[1] ?? 0);
    return f("Private_Clean") + f("Private_Dirty");
  } catch {
    return NaN;
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / (xs.length || 1);
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

export interface FleetResult {
  agent: string;
  mode: XdsMode;
  load: { start: string; end: string };
  stormLastMs: number;
  stormMedianMs: number;
  csrsPerPod: number[];
  streamsPerPod: number[];
  streamsPerPodEnd: number[];
  csrsPerPodEnd: number[];
  unknownRecords: number;
  ussKiB: number[];
  rssKiB: number[];
  memDropPerPodKiB: number;
  memDropCorrectedKiB: number;
  small: number[][];
  large: number[][];
  restartFromStopMs: number;
  restartFromUpMs: number;
  lost: number;
  added: number;
  changedContent: number;
  recoveryResponsesPerPod: number;
  nacks: number;
  marksMissing: number;
  istiodCpuStormS: number;
  istiodCpuS: number;
  istiodPeakMiB: number;
}

/** Names held per pod per type; lost/added between two dumps, and contents that differ. */
function compareStates(before: Record<string, PodDump>, after: Record<string, PodDump>): { lost: number; added: number; changed: number } {
  let lost = 0;
  let added = 0;
  let changed = 0;
  for (const [id, b] of Object.entries(before)) {
    const a = after[id];
    for (const t of TYPES) {
      const bs = b.state[t] ?? {};
      const as = a?.state[t] ?? {};
      for (const [n, h] of Object.entries(bs)) {
        if (!(n in as)) lost++;
        else if (as[n] !== h) changed++;
      }
      for (const n of Object.keys(as)) if (!(n in bs)) added++;
    }
  }
  return { lost, added, changed };
}

async function measureFleet(agent: Agent, mode: XdsMode, log: (l: string) => void): Promise<FleetResult> {
  const work = mkdtempSync(join(tmpdir(), `fleet-${agent.name}-${mode}-`));
  const loadStart = loadavg();
  const f = await Fleet.start({ bin: agent.bin, pods: PODS, mode, mesh: BENCH_MESH, work, template: istioBootstrapTemplate() });
  try {
    await Bun.sleep(2000);
    const istiod0 = f.lite.pid();
    const cpu0 = cpuMs(istiod0);
    const mem0 = memAvailableKiB();
    const rss0 = rssKiB(istiod0) + rssKiB(f.envoys.pid);
    log(`fleet ${agent.name} ${mode}: start storm of ${PODS} pods (load ${loadavg()})`);
    const storm = await f.storm(600_000);
    const readyMs = [...storm.ready.values()].map((t) => t - storm.t0);
    const cpuStorm = cpuMs(istiod0) - cpu0;
    const atStorm = await f.counters();
    await Bun.sleep(SETTLE_MS);
    const uss = f.pods.map((p) => ussKiB(p.proc!.pid));
    const rss = f.pods.map((p) => rssKiB(p.proc!.pid));
    const mem1 = memAvailableKiB();
    const rss1 = rssKiB(istiod0) + rssKiB(f.envoys.pid);
    log(`fleet ${agent.name} ${mode}: ${CHANGES} small and ${CHANGES} large changes`);
    const small: number[][] = [];
    const large: number[][] = [];
    for (let i = 0; i < CHANGES; i++) small.push((await f.change("small", LARGE_ENDPOINTS, 120_000)).latencies);
    for (let i = 0; i < CHANGES; i++) large.push((await f.change("large", LARGE_ENDPOINTS, 120_000)).latencies);
    const before = await f.dump();
    const cpuBefore = cpuMs(istiod0) - cpu0;
    const peakBefore = peakRssKiB(istiod0);
    log(`fleet ${agent.name} ${mode}: istiod restart`);
    const r = await f.restart(300_000);
    await Bun.sleep(3000);
    const after = await f.dump(r.tStop);
    const cmp = compareStates(before, after);
    const istiod1 = f.lite.pid();
    const end = f.counts();
    const perPod = (m: Map<string, number>, key: (i: number) => string) => f.pods.map((_, i) => m.get(key(i)) ?? 0);
    const marks = 2 * CHANGES;
    return {
      agent: agent.name,
      mode,
      load: { start: loadStart, end: loadavg() },
      stormLastMs: Math.max(...readyMs),
      stormMedianMs: percentile(sorted(readyMs), 50),
      csrsPerPod: perPod(atStorm.csrs, (i) => `pod-${i}`),
      streamsPerPod: perPod(atStorm.streams, (i) => `fleet-${i}`),
      csrsPerPodEnd: perPod(end.csrs, (i) => `pod-${i}`),
      streamsPerPodEnd: perPod(end.streams, (i) => `fleet-${i}`),
      unknownRecords: end.unknown,
      ussKiB: uss,
      rssKiB: rss,
      memDropPerPodKiB: (mem0 - mem1) / PODS,
      memDropCorrectedKiB: (mem0 - mem1 - (rss1 - rss0)) / PODS,
      small,
      large,
      restartFromStopMs: Math.max(...r.back.values()) - r.tStop,
      restartFromUpMs: Math.max(...r.back.values()) - r.tUp,
      lost: cmp.lost,
      added: cmp.added,
      changedContent: cmp.changed,
      recoveryResponsesPerPod: mean(Object.values(after).map((d) => d.responses.length)),
      nacks: Object.values(after).reduce((a, d) => a + Object.values(d.nacked).reduce((x, y) => x + y, 0), 0),
      marksMissing: Object.values(after).reduce((a, d) => a + (marks - d.seen.length), 0),
      istiodCpuStormS: cpuStorm / 1000,
      istiodCpuS: (cpuBefore + cpuMs(istiod1)) / 1000,
      istiodPeakMiB: Math.max(peakBefore, peakRssKiB(istiod1)) / 1024,
    };
  } finally {
    await f.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** p50/p99/max of the time until EVERY pod ACKed, one value per change. */
function allPods(changes: number[][]): { p50: number; p99: number; max: number } {
  const s = sorted(changes.map((l) => Math.max(...l)));
  return { p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN };
}

const range = (xs: number[]) => {
  const s = sorted(xs);
  return s[0] === s[s.length - 1] ? `${s[0]}` : `${s[0]}–${s[s.length - 1]}`;
};

function table(o: FleetResult, t: FleetResult): string[] {
  const row = (what: string, a: number, b: number, digits = 1, ratio = true) =>
    `| ${what} | ${fmt(a, digits)} | ${fmt(b, digits)} | ${ratio && b > 0 ? `${fmt(a / b, 2)}×` : "—"} |`;
  const text = (what: string, a: string, b: string) => `| ${what} | ${a} | ${b} | ${a === b ? "same" : "**differ**"} |`;
  const [os, ts, ol, tl] = [allPods(o.small), allPods(t.small), allPods(o.large), allPods(t.large)];
  return [
    "| measure | ours | Istio's pilot-agent | ours ÷ Istio's |",
    "|---|---|---|---|",
    row("agent USS per pod, MiB (mean, settled)", mean(o.ussKiB) / 1024, mean(t.ussKiB) / 1024),
    row("agent USS per pod, MiB (max)", Math.max(...o.ussKiB) / 1024, Math.max(...t.ussKiB) / 1024),
    row("agent RSS per pod, MiB (mean)", mean(o.rssKiB) / 1024, mean(t.rssKiB) / 1024),
    row("MemAvailable drop per pod, MiB (raw)", o.memDropPerPodKiB / 1024, t.memDropPerPodKiB / 1024),
    row("… less istiod's and fleet-envoy's growth, MiB", o.memDropCorrectedKiB / 1024, t.memDropCorrectedKiB / 1024),
    row(`start storm: all ${PODS} → last ready, s`, o.stormLastMs / 1000, t.stormLastMs / 1000, 2),
    row("start storm: median pod ready, s", o.stormMedianMs / 1000, t.stormMedianMs / 1000, 2),
    text(
      "CSRs per pod seen by istiod (storm: its counters; whole run: its records)",
      `${range(o.csrsPerPod)}; ${range(o.csrsPerPodEnd)}`,
      `${range(t.csrsPerPod)}; ${range(t.csrsPerPodEnd)}`,
    ),
    text(
      "xDS streams per pod seen by istiod (storm: its counters; after restart: its records)",
      `${range(o.streamsPerPod)}; ${range(o.streamsPerPodEnd)}`,
      `${range(t.streamsPerPod)}; ${range(t.streamsPerPodEnd)}`,
    ),
    row("small change (one endpoint) → every pod ACKed, p50 ms", os.p50, ts.p50, 0),
    row("small change → every pod ACKed, p99 ms", os.p99, ts.p99, 0),
    row("small change → every pod ACKed, max ms", os.max, ts.max, 0),
    row(`large change (new Service, ${LARGE_ENDPOINTS} endpoints) → every pod ACKed, p50 ms`, ol.p50, tl.p50, 0),
    row("large change → every pod ACKed, p99 ms", ol.p99, tl.p99, 0),
    row("large change → every pod ACKed, max ms", ol.max, tl.max, 0),
    row("istiod restart: stop → every pod has CDS+LDS again, s", o.restartFromStopMs / 1000, t.restartFromStopMs / 1000, 2),
    row("… from the new istiod up, s", o.restartFromUpMs / 1000, t.restartFromUpMs / 1000, 2),
    text("restart: resources lost / added (all pods)", `${o.lost} / ${o.added}`, `${t.lost} / ${t.added}`),
    row("restart: responses per pod to recover", o.recoveryResponsesPerPod, t.recoveryResponsesPerPod, 1),
    text("NACKs; change marks not ACKed (all pods)", `${o.nacks}; ${o.marksMissing}`, `${t.nacks}; ${t.marksMissing}`),
    row("istiod CPU s, start storm", o.istiodCpuStormS, t.istiodCpuStormS, 2),
    row("istiod CPU s, whole run (storm → restart settled)", o.istiodCpuS, t.istiodCpuS, 2),
    row("istiod peak RSS MiB", o.istiodPeakMiB, t.istiodPeakMiB, 0),
  ];
}

export async function run(): Promise<string> {
  const log = (l: string) => process.stderr.write(`bench: ${l}\n`);
  const ours = process.env.FLEET_OURS ?? join(ROOT, "dist/agent");
  if (!existsSync(ours)) return "## Fleet at scale\n\nnot measured: dist/agent not built (bun build.ts --host)\n";
  try {
    await buildInterop(log);
  } catch (e) {
    return `## Fleet at scale\n\nnot measured: the Go interop binaries did not build: ${(e as Error).message.split("\n").slice(0, 4).join(" | ")}\n`;
  }
  const agents: Agent[] = [
    { name: "ours", bin: ours },
    { name: "pilot-agent", bin: PILOT_AGENT },
  ];
  const date = new Date().toISOString().slice(0, 16).replace("T", " ");
  const results: FleetResult[] = [];
  const t0 = nowMs();
  for (const mode of MODES) for (const a of agents) results.push(await measureFleet(a, mode, log));
  const minutes = (nowMs() - t0) / 60_000;

  const out = [
    "## Fleet at scale (bench/fleet.ts)",
    "",
    `${date} UTC on ${machine()}; ${fmt(minutes)} min. ${PODS} pods per fleet, one istiod-lite per fleet serving ${BENCH_MESH.services} Services / ${BENCH_MESH.services * BENCH_MESH.endpointsPerService} endpoints over ${BENCH_MESH.namespaces} namespaces (the pods' Sidecar imports half) and ${BENCH_MESH.serviceEntries} ServiceEntries, DNS capture on; every pod's Envoy is one fleet-envoy process. Fleets run one after the other (ours first in each mode). ${CHANGES} small and ${CHANGES} large changes per fleet; propagation = change applied at istiod → the last pod ACKed it. Ratio = ours ÷ Istio's.`,
  ];
  const panels: CdfPanel[] = [];
  for (const mode of MODES) {
    const o = results.find((r) => r.mode === mode && r.agent === "ours")!;
    const t = results.find((r) => r.mode === mode && r.agent === "pilot-agent")!;
    out.push(
      "",
      `### ${mode === "delta" ? "Delta xDS" : "SotW xDS"}`,
      "",
      `Load average (1/5/15 min): ours ${o.load.start} → ${o.load.end}; Istio's ${t.load.start} → ${t.load.end}.`,
      "",
      ...table(o, t),
    );
    const flat = (xs: number[][]) => xs.flat();
    panels.push({
      title: `${mode === "delta" ? "Delta" : "SotW"}: ${PODS} pods, ${CHANGES} changes per line`,
      series: [
        { label: "ours, small", color: "#1f77b4", dashed: false, values: flat(o.small) },
        { label: "Istio's, small", color: "#d62728", dashed: false, values: flat(t.small) },
        { label: "ours, large", color: "#1f77b4", dashed: true, values: flat(o.large) },
        { label: "Istio's, large", color: "#d62728", dashed: true, values: flat(t.large) },
      ],
    });
  }
  writeFileSync(SVG, cdfSvg(panels, `bench/fleet.ts, ${date} UTC, ${machine()}, load ${results[0]?.load.start}; each point one pod's ACK of one change`));
  out.push("", `Propagation CDF (each pod's ACK of each change): ${relative(ROOT, SVG)}.`, "");
  return out.join("\n");
}

if (import.meta.main) console.log(await run());
