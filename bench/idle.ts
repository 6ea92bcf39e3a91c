// Idle cost of the compiled agent (issue #16) beside a compiled hello-world and, when test/interop
// has built it, Istio's own pilot-agent, all alive at once so the machine's load falls on every
// column alike: wake-ups per second (context switches of every thread, /proc/<pid>/task/*/status),
// CPU (/proc/<pid>/stat), total and anonymous RSS. Modes:
//   proxyless  istiod mode (the bench's synthetic istiod), DISABLE_ENVOY=true: grpc-agent's shape;
//   sidecar    istiod mode with a stand-in Envoy that only sleeps (the agent spawns and watches it);
//   local      LOCAL_XDS_PATH + CA_PROVIDER=local, no Envoy.
// Two phases, each WINDOWS windows of WINDOW_MS (rates over the whole phase, memory the median):
//   after start  from SETTLE_MS after "Agent started": certificate warming and the runtime's
//                start-up work (JIT threads, Bun's GC controller at 1 Hz) are still running;
//   steady       from STEADY_MS: Bun's GC controller ticks every second until the heap size has
//                not changed for 30 ticks, then every 30 s; the steady windows start past that.
// The targets (issue #16) are judged on the steady phase; `met`/`missed` is printed beside each.
// Total RSS is compared with pilot-agent's in the same shape (local mode with its proxyless
// figure: Istio has no local mode); without pilot-agent the issue's interim 50 MiB applies.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/support/fake-envoy.ts";
import { PILOT_AGENT } from "../test/interop/support/go-build.ts";
import { compileHello, cpuMs, firstLine, fmt, spawnUntil, verdict, type Proc } from "./support.ts";
import { memKiB, switchCounter } from "./procstat.ts";

const ROOT = resolve(import.meta.dir, "..");
const SETTLE_MS = 3000;
const STEADY_MS = Number(process.env.IDLE_STEADY_MS ?? 45_000);
const WINDOW_MS = Number(process.env.IDLE_WINDOW_MS ?? 10_000);
const WINDOWS = 3;
/** The issue's interim total-RSS target while Istio's agent is not measured beside ours. */
const INTERIM_RSS_MIB = 50;

interface Idle {
  wakeupsPerS: number;
  cpuPct: number;
  rssMiB: number;
  anonMiB: number;
  fileMiB: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Sample every process over the same windows: wake-ups and CPU as rates over all the windows
 * together (a timer slower than one window, such as the GC controller's 30 s tick, still counts),
 * memory as the median of the readings at each window's end.
 */
async function sample(pids: number[]): Promise<Idle[]> {
  const per = pids.map(() => ({ r: [] as number[], a: [] as number[], f: [] as number[] }));
  const counters = pids.map((pid) => switchCounter(pid));
  const c0 = pids.map(cpuMs);
  const t0 = performance.now();
  for (let i = 0; i < WINDOWS; i++) {
    await Bun.sleep(WINDOW_MS);
    pids.forEach((pid, j) => {
      const m = memKiB(pid);
      per[j]!.r.push(m.rss / 1024);
      per[j]!.a.push(m.anon / 1024);
      per[j]!.f.push(m.file / 1024);
    });
  }
  const switches = counters.map((c) => c.stop());
  const el = performance.now() - t0;
  return per.map((p, j) => ({
    wakeupsPerS: (switches[j]! * 1000) / el,
    cpuPct: ((cpuMs(pids[j]!) - c0[j]!) * 100) / el,
    rssMiB: median(p.r),
    anonMiB: median(p.a),
    fileMiB: median(p.f),
  }));
}

function podEnv(dir: string, extra: Record<string, string>, proxyConfig: Record<string, unknown>): Record<string, string> {
  mkdirSync(join(dir, "var/run/secrets/istio"), { recursive: true });
  copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(dir, "var/run/secrets/istio/root-cert.pem"));
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    POD_NAME: "idle-0",
    POD_NAMESPACE: "bench",
    INSTANCE_IP: "127.0.0.1",
    CLOUD_PLATFORM: "none",
    PROXY_CONFIG: JSON.stringify({ terminationDrainDuration: "1s", ...proxyConfig }),
    ...extra,
  };
}

/** Istio's pilot-agent in `shape`, the way bench/pilotagent.ts runs it; resolves once its XDS socket exists. */
export async function startPilotAgent(bin: string, dir: string, istiodPort: number, envoy: string | undefined): Promise<Proc> {
  const { pod } = await import("./pilotagent.ts");
  mkdirSync(dir, { recursive: true });
  const base = { discoveryAddress: `127.0.0.1:${istiodPort}`, statusPort: await freePort(), proxyAdminPort: await freePort() };
  const env = envoy ? pod(dir, { ...base, binaryPath: envoy }, {}) : pod(dir, base, { DISABLE_ENVOY: "true" });
  const p = Bun.spawn([bin, "proxy", "sidecar"], { cwd: dir, env, stdout: "ignore", stderr: "ignore" });
  const deadline = performance.now() + 20_000;
  while (!existsSync(join(dir, "etc/istio/proxy/XDS"))) {
    if (p.exitCode !== null) throw new Error(`pilot-agent exited (${p.exitCode}) before listening`);
    if (performance.now() > deadline) throw new Error("pilot-agent: no XDS socket within 20 s");
    await Bun.sleep(20);
  }
  return p;
}

/** The markdown rows of one phase: hello-world, pilot-agent shapes, then our modes with verdicts (steady phase only). */
function rows(phase: string, hello: Idle, istio: Map<string, Idle>, ours: [string, Idle][], judge: boolean): string[] {
  const out = [
    `| ${phase}: hello-world | ${fmt(hello.wakeupsPerS)} | ${fmt(hello.cpuPct, 2)} | ${fmt(hello.rssMiB)} | ${fmt(hello.anonMiB)} | ${fmt(hello.fileMiB)} |`,
  ];
  for (const [shape, i] of istio)
    out.push(
      `| ${phase}: Istio pilot-agent, ${shape} | ${fmt(i.wakeupsPerS)} | ${fmt(i.cpuPct, 2)} | ${fmt(i.rssMiB)} | ${fmt(i.anonMiB)} | ${fmt(i.fileMiB)} |`,
    );
  const helloCpu = Math.max(hello.cpuPct, 0.01);
  for (const [mode, a] of ours) {
    const peer = istio.get(mode === "sidecar" ? "sidecar" : "proxyless");
    const rssTarget = peer ? peer.rssMiB : INTERIM_RSS_MIB;
    const rss = peer ? `${fmt(a.rssMiB)} (${fmt(a.rssMiB / peer.rssMiB, 2)}× Istio's)` : fmt(a.rssMiB);
    const v = (ok: boolean) => (judge ? ` ${verdict(ok)}` : "");
    out.push(
      `| ${phase}: ${mode} | ${fmt(a.wakeupsPerS)}${v(a.wakeupsPerS <= 2)} | ${fmt(a.cpuPct, 2)} (${fmt(a.cpuPct / helloCpu, 1)}× hello)${v(a.cpuPct <= 2 * helloCpu)} | ${rss}${v(a.rssMiB <= rssTarget)} | ${fmt(a.anonMiB)}${v(a.anonMiB <= 12)} | ${fmt(a.fileMiB)} |`,
    );
  }
  return out;
}

export async function run(): Promise<string> {
  const agent = process.env.IDLE_AGENT ?? join(ROOT, "dist/agent");
  const pilotAgent = process.env.IDLE_PILOT_AGENT ?? PILOT_AGENT;
  const withIstio = existsSync(pilotAgent);
  const dir = mkdtempSync(join(tmpdir(), "agent-idle-"));
  const procs: Proc[] = [];
  try {
    const hello = compileHello(dir);
    const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
    procs.push(istiod);
    const istiodPort = Number((await firstLine(istiod.stdout as ReadableStream<Uint8Array>)).trim());
    const sleeper = join(dir, "envoy-sleep");
    writeFileSync(sleeper, "#!/bin/sh\nexec sleep 600\n", { mode: 0o755 });
    const base = async () => ({ statusPort: await freePort(), proxyAdminPort: await freePort() });
    const istiodCfg = async () => ({ ...(await base()), discoveryAddress: `127.0.0.1:${istiodPort}`, controlPlaneAuthPolicy: "NONE" });
    const modes: [string, () => Promise<Record<string, string>>][] = [
      ["proxyless", async () => podEnv(join(dir, "proxyless"), { DISABLE_ENVOY: "true", CA_PROVIDER: "local" }, await istiodCfg())],
      ["sidecar", async () => podEnv(join(dir, "sidecar"), { CA_PROVIDER: "local" }, { ...(await istiodCfg()), binaryPath: sleeper })],
      [
        "local",
        async () =>
          podEnv(
            join(dir, "local"),
            { LOCAL_XDS_PATH: join(ROOT, "examples/xds.yaml"), CA_PROVIDER: "local", DISABLE_ENVOY: "true" },
            { ...(await base()), controlPlaneAuthPolicy: "NONE" },
          ),
      ],
    ];
    const t0 = performance.now();
    const started: Proc[] = [];
    for (const [name, env] of modes) {
      mkdirSync(join(dir, name), { recursive: true });
      const p = await spawnUntil([agent, "proxy", "sidecar"], await env(), join(dir, name), /Agent started/);
      procs.push(p);
      started.push(p);
    }
    const istioShapes: [string, Proc][] = [];
    if (withIstio) {
      for (const shape of ["proxyless", "sidecar"]) {
        const p = await startPilotAgent(pilotAgent, join(dir, `istio-${shape}`), istiodPort, shape === "sidecar" ? sleeper : undefined);
        procs.push(p);
        istioShapes.push([shape, p]);
      }
    }
    const h = await spawnUntil([hello], { PATH: process.env.PATH ?? "" }, dir, /ready/);
    procs.push(h);
    const pids = [h.pid, ...istioShapes.map(([, p]) => p.pid), ...started.map((p) => p.pid)];
    const split = (xs: Idle[]) => ({
      hello: xs[0]!,
      istio: new Map(istioShapes.map(([shape], i) => [shape, xs[1 + i]!] as [string, Idle])),
      ours: modes.map(([name], i) => [name, xs[1 + istioShapes.length + i]!] as [string, Idle]),
    });
    await Bun.sleep(SETTLE_MS);
    const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    const early = split(await sample(pids));
    await Bun.sleep(Math.max(0, STEADY_MS - (performance.now() - t0)));
    const steady = split(await sample(pids));
    const loadEnd = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    const rssTarget = withIstio ? "≤ 1.0× Istio's" : `≤ ${INTERIM_RSS_MIB}`;
    return [
      "## Idle cost (bench/idle.ts)",
      "",
      `Three compiled agents, ${withIstio ? "Istio's pilot-agent (built by test/interop) in the proxyless and sidecar shapes, " : ""}and a compiled hello-world (\`console.log\`, then a 1 s interval) alive at once. ` +
        `"after start": ${WINDOWS} windows of ${WINDOW_MS / 1000} s from ${SETTLE_MS / 1000} s after "Agent started"; "steady": ${WINDOWS} windows of ${WINDOW_MS / 1000} s from ${STEADY_MS / 1000} s after the first start ` +
        `(Bun's GC controller ticks every second until the heap has not changed for 30 ticks, then every 30 s). Wake-ups (context switches of every thread) and CPU over the whole phase; memory the median of the windows' readings. ` +
        `Targets (issue #16) judged on the steady phase; total RSS against ${withIstio ? "pilot-agent's in the same shape (local mode: its proxyless figure)" : `the interim ${INTERIM_RSS_MIB} MiB (pilot-agent not built)`}. Load average: ${load} at the start, ${loadEnd} at the end.`,
      "",
      `| phase: process | wake-ups/s (target ≤ 2) | CPU % (target ≤ 2× hello) | RSS MiB (target ${rssTarget}) | anon RSS MiB (target ≤ 12) | file RSS MiB |`,
      "|---|---|---|---|---|---|",
      ...rows("after start", early.hello, early.istio, early.ours, false),
      ...rows("steady", steady.hello, steady.istio, steady.ours, true),
      "",
    ].join("\n");
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
