// Side by side with Istio's own pilot-agent (issue #15's bench rows): both agents, built from
// their sources on this machine, measured in the same run on the same inputs:
//   idle       proxyless (DISABLE_ENVOY=true) against the bench's synthetic istiod, both alive at
//              once: wake-ups/s, CPU %, RSS, anonymous RSS over the same windows;
//   start      spawn -> the stand-in Envoy started (a shell script that records its start), the
//              sidecar shape with Istio's bootstrap template; alternating runs;
//   relay      a grpc-js client through each agent's XDS socket, the bench's istiod behind it
//              (plaintext, controlPlaneAuthPolicy NONE): throughput, CPU ms per MiB, and the
//              agent's peak RSS after pushes up to each size; alternating, 3 rounds, median.
// Istio's pilot-agent comes from test/interop (`bun test/interop/support/go-build.ts`); without
// it this section says how to build it and measures nothing.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/support/fake-envoy.ts";
import { PILOT_AGENT } from "../test/interop/support/go-build.ts";
import { istioBootstrapTemplate } from "../test/interop/support/agent-run.ts";
import { memKiB, switchCounter } from "./procstat.ts";
import { cpuMs, firstLine, fmt, peakRssKiB, rssKiB, summary, type Proc } from "./support.ts";
import { measure } from "./xds.ts";

const ROOT = resolve(import.meta.dir, "..");
export const SIZES = [10 * 1024, 474 * 1024, 1 << 20, 10 << 20];
const ROUNDS = 3;
const START_RUNS = Number(process.env.PILOTAGENT_START_RUNS ?? 10);
const IDLE_WINDOW_MS = 10_000;

export interface Agent {
  name: string;
  bin: string;
}

const median = (xs: number[]) => summary(xs).median;

/** A pod directory: mounted root CA and token, Istio's bootstrap template; the env both agents get. */
export function pod(dir: string, proxyConfig: Record<string, unknown>, extra: Record<string, string>): Record<string, string> {
  mkdirSync(join(dir, "var/run/secrets/istio"), { recursive: true });
  mkdirSync(join(dir, "var/run/secrets/tokens"), { recursive: true });
  mkdirSync(join(dir, "var/lib/istio/envoy"), { recursive: true });
  copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(dir, "var/run/secrets/istio/root-cert.pem"));
  writeFileSync(join(dir, "var/run/secrets/tokens/istio-token"), "bench-token");
  copyFileSync(istioBootstrapTemplate(), join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"));
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    POD_NAME: "bench-0",
    POD_NAMESPACE: "bench",
    SERVICE_ACCOUNT: "bench",
    INSTANCE_IP: "127.0.0.1",
    CLOUD_PLATFORM: "none",
    // Nothing listens here: neither agent needs a certificate in these shapes (proxyless without
    // OUTPUT_CERTS; Envoy's SDS requests never come from the stand-in).
    CA_ADDR: "127.0.0.1:1",
    PROXY_CONFIG: JSON.stringify({ controlPlaneAuthPolicy: "NONE", drainDuration: "1s", terminationDrainDuration: "1s", ...proxyConfig }),
    ...extra,
  };
}

export async function waitFor(what: string, ok: () => boolean, proc: Proc, ms = 20_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!ok()) {
    if (proc.exitCode !== null) throw new Error(`${what}: the process exited (${proc.exitCode})`);
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await Bun.sleep(5);
  }
}

/** The proxyless agent relaying the bench's istiod; resolves once its XDS socket exists. */
export async function startProxyless(a: Agent, dir: string, istiodPort: number, extraEnv: Record<string, string> = {}): Promise<Proc> {
  mkdirSync(dir, { recursive: true });
  const env = pod(
    dir,
    { discoveryAddress: `127.0.0.1:${istiodPort}`, statusPort: await freePort(), proxyAdminPort: await freePort() },
    { DISABLE_ENVOY: "true", ...extraEnv },
  );
  const p = Bun.spawn([a.bin, "proxy", "sidecar"], { cwd: dir, env, stdout: "ignore", stderr: "ignore" });
  await waitFor(`${a.name}: XDS socket`, () => existsSync(join(dir, "etc/istio/proxy/XDS")), p);
  return p;
}

/** Spawn -> the stand-in Envoy's first instruction, in ms. */
export async function startToEnvoy(a: Agent, dir: string, istiodPort: number): Promise<number> {
  mkdirSync(dir, { recursive: true });
  const mark = join(dir, "envoy-started");
  const envoy = join(dir, "envoy");
  writeFileSync(envoy, `#!/bin/sh\necho $$ > "${mark}.tmp"\nmv "${mark}.tmp" "${mark}"\nexec sleep 30\n`, { mode: 0o755 });
  const env = pod(dir, { discoveryAddress: `127.0.0.1:${istiodPort}`, binaryPath: envoy, statusPort: await freePort(), proxyAdminPort: await freePort() }, {});
  const t0 = performance.now();
  const p = Bun.spawn([a.bin, "proxy", "sidecar"], { cwd: dir, env, stdout: "ignore", stderr: "ignore" });
  try {
    await waitFor(`${a.name}: Envoy spawned`, () => existsSync(mark), p);
    return performance.now() - t0;
  } finally {
    p.kill("SIGKILL");
    await p.exited;
    try {
      process.kill(Number(readFileSync(mark, "utf8")), "SIGKILL"); // the stand-in (its pid, recorded by itself)
    } catch {
      // never started, or already gone
    }
  }
}

/** Ours (dist/agent or PILOTAGENT_OURS) and Istio's pilot-agent, or why they cannot be measured. */
export function agentsUnderTest(): Agent[] | string {
  if (!existsSync(PILOT_AGENT)) return "Istio's pilot-agent is not built (`bun test/interop/support/go-build.ts` builds it into test/interop/.bin).";
  const ours = process.env.PILOTAGENT_OURS ?? join(ROOT, "dist/agent");
  if (!existsSync(ours)) return "dist/agent not built (bun build.ts --host)";
  return [
    { name: "ours", bin: ours },
    { name: "pilot-agent", bin: PILOT_AGENT },
  ];
}

/** Start -> Envoy spawned, `runs` alternating runs of each agent (ms per agent). */
export async function startSamples(agents: Agent[], dir: string, istiodPort: number, runs: number): Promise<number[][]> {
  const start: number[][] = agents.map(() => []);
  for (let i = 0; i < runs; i++) for (const [j, a] of agents.entries()) start[j]!.push(await startToEnvoy(a, join(dir, `start-${a.name}-${i}`), istiodPort));
  return start;
}

export interface Idle {
  wakeups: number;
  cpu: number;
  rss: number;
  anon: number;
  file: number;
}

/** Wake-ups/s, CPU % and memory of each running process over one window of `windowMs`, all at once. */
export async function idleWindow(running: Proc[], windowMs: number): Promise<Idle[]> {
  const counters = running.map((p) => switchCounter(p.pid));
  const c0 = running.map((p) => cpuMs(p.pid));
  const t0 = performance.now();
  await Bun.sleep(windowMs);
  const switches = counters.map((c) => c.stop());
  const el = performance.now() - t0;
  return running.map((p, j) => ({ wakeups: (switches[j]! * 1000) / el, cpu: ((cpuMs(p.pid) - c0[j]!) * 100) / el, ...memKiB(p.pid) }));
}

export interface Relay {
  mibps: number;
  cpu: number;
  /** Peak RSS (VmHWM) after pushes up to this size, MiB. */
  peak: number;
  /** RSS `settleMs` after this size's last push, MiB (NaN when not waited for). */
  after: number;
}

/**
 * Each push size through each agent's XDS socket (`socketOf`), ROUNDS alternating rounds, median;
 * with `settleMs`, the RSS that long after each size's last push.
 */
export async function relaySamples(agents: Agent[], running: Proc[], socketOf: (a: Agent) => string, settleMs = 0): Promise<Map<number, Relay[]>> {
  const relay = new Map<number, Relay[]>();
  for (const size of SIZES) {
    const per = agents.map(() => ({ mibps: [] as number[], cpu: [] as number[] }));
    for (let r = 0; r < ROUNDS; r++) {
      for (const [j, a] of agents.entries()) {
        const p = running[j]!;
        const c = cpuMs(p.pid);
        const s = await measure(`unix://${socketOf(a)}`, size);
        per[j]!.cpu.push((cpuMs(p.pid) - c) / s.mib);
        per[j]!.mibps.push(s.mibps);
      }
    }
    const peak = running.map((p) => peakRssKiB(p.pid) / 1024);
    if (settleMs > 0) await Bun.sleep(settleMs);
    relay.set(
      size,
      per.map((x, j) => ({ mibps: median(x.mibps), cpu: median(x.cpu), peak: peak[j]!, after: settleMs > 0 ? rssKiB(running[j]!.pid) / 1024 : NaN })),
    );
  }
  return relay;
}

/** "10 KiB", "1 MiB". */
export const sizeLabel = (size: number) => (size >= 1 << 20 ? `${size / (1 << 20)} MiB` : `${Math.round(size / 1024)} KiB`);

export async function run(): Promise<string> {
  const agents = agentsUnderTest();
  if (typeof agents === "string") return `## Against Istio's pilot-agent\n\nnot measured: ${agents}\n`;
  const dir = mkdtempSync(join(tmpdir(), "agent-vs-istio-"));
  const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
  const procs: Proc[] = [];
  try {
    const port = Number(await firstLine(istiod.stdout as ReadableStream<Uint8Array>));
    const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

    // Start to Envoy spawned, alternating.
    const start = await startSamples(agents, dir, port, START_RUNS);

    // Idle, both alive at once.
    const running: Proc[] = [];
    for (const a of agents) {
      const p = await startProxyless(a, join(dir, `relay-${a.name}`), port);
      procs.push(p);
      running.push(p);
    }
    await Bun.sleep(5000);
    const idle = await idleWindow(running, IDLE_WINDOW_MS);

    // Relay, alternating rounds.
    const relay = await relaySamples(agents, running, (a) => join(dir, `relay-${a.name}`, "etc/istio/proxy/XDS"));

    const ratio = (o: number, t: number) => `${fmt(o / t, 2)}×`;
    const [io, it] = idle;
    const so = summary(start[0]!);
    const st = summary(start[1]!);
    const rows = [
      `| idle wake-ups/s (proxyless) | ${fmt(io!.wakeups)} | ${fmt(it!.wakeups)} | ${ratio(io!.wakeups, it!.wakeups)} |`,
      `| idle CPU % (proxyless) | ${fmt(io!.cpu, 2)} | ${fmt(it!.cpu, 2)} | ${ratio(io!.cpu, Math.max(it!.cpu, 0.01))} |`,
      `| idle RSS MiB (proxyless) | ${fmt(io!.rss / 1024)} | ${fmt(it!.rss / 1024)} | ${ratio(io!.rss, it!.rss)} |`,
      `| idle anonymous RSS MiB | ${fmt(io!.anon / 1024)} | ${fmt(it!.anon / 1024)} | ${ratio(io!.anon, it!.anon)} |`,
      `| start → Envoy spawned, median ms | ${fmt(so.median)} | ${fmt(st.median)} | ${ratio(so.median, st.median)} |`,
      `| start → Envoy spawned, p99 ms | ${fmt(so.p99)} | ${fmt(st.p99)} | ${ratio(so.p99, st.p99)} |`,
    ];
    for (const [size, [o, t]] of relay) {
      const label = sizeLabel(size);
      rows.push(`| relay ${label}: MiB/s | ${fmt(o!.mibps, 0)} | ${fmt(t!.mibps, 0)} | ${ratio(o!.mibps, t!.mibps)} |`);
      rows.push(`| relay ${label}: CPU ms per MiB | ${fmt(o!.cpu, 2)} | ${fmt(t!.cpu, 2)} | ${ratio(o!.cpu, t!.cpu)} |`);
      rows.push(`| relay ${label}: peak RSS MiB (pushes up to this size) | ${fmt(o!.peak, 0)} | ${fmt(t!.peak, 0)} | ${ratio(o!.peak, t!.peak)} |`);
    }
    return [
      "## Against Istio's pilot-agent (bench/pilotagent.ts)",
      "",
      `Both agents on the same inputs in one run: Istio's pilot-agent built from istio.io/istio by test/interop, ours \`dist/agent\`. Idle: proxyless (DISABLE_ENVOY=true), 5 s to settle, one ${IDLE_WINDOW_MS / 1000} s window with both alive. Start: the sidecar shape with Istio's bootstrap template and a stand-in Envoy (a shell script marking its start), ${START_RUNS} alternating runs each. Relay: grpc-js client → the agent's XDS socket → the bench's synthetic istiod (plaintext), ${ROUNDS} alternating rounds, median. Ratio = ours ÷ pilot-agent (below 1 is better for every row except MiB/s). Load average at the start: ${load}.`,
      "",
      "| measure | ours | pilot-agent | ours ÷ pilot-agent |",
      "|---|---|---|---|",
      ...rows,
      "",
    ].join("\n");
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    istiod.kill("SIGKILL");
    await Promise.all([...procs.map((p) => p.exited), istiod.exited]);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
