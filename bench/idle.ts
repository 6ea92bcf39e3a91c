// Idle cost of the compiled agent (issue #16) beside a compiled hello-world, all alive at once so
// the machine's load falls on every column alike: wake-ups per second (context switches of every
// thread, /proc/<pid>/task/*/status), CPU (/proc/<pid>/stat), total and anonymous RSS. Modes:
//   proxyless  istiod mode (the bench's synthetic istiod), DISABLE_ENVOY=true: grpc-agent's shape;
//   sidecar    istiod mode with a stand-in Envoy that only sleeps (the agent spawns and watches it);
//   local      LOCAL_XDS_PATH + CA_PROVIDER=local, no Envoy.
// Each agent settles for SETTLE_MS after "Agent started", then is sampled over WINDOW_MS; three
// windows, median. The targets are issue #16's; `met`/`missed` is printed beside each.

import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/support/fake-envoy.ts";
import { compileHello, cpuMs, firstLine, fmt, spawnUntil, verdict, type Proc } from "./support.ts";

const ROOT = resolve(import.meta.dir, "..");
const SETTLE_MS = 3000;
const WINDOW_MS = Number(process.env.IDLE_WINDOW_MS ?? 10_000);
const WINDOWS = 3;

/** Voluntary + involuntary context switches summed over every thread of `pid`. */
export function wakeups(pid: number): number {
  let n = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
      n += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0);
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return n;
}

/** VmRSS and RssAnon in KiB. */
export function memKiB(pid: number): { rss: number; anon: number } {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  return { rss: Number(/^VmRSS:\s+(\d+)/m.exec(s)?.[1] ?? NaN), anon: Number(/^RssAnon:\s+(\d+)/m.exec(s)?.[1] ?? NaN) };
}

interface Idle {
  wakeupsPerS: number;
  cpuPct: number;
  rssMiB: number;
  anonMiB: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Sample every process over the same windows; medians per process. */
async function sample(pids: number[]): Promise<Idle[]> {
  const per: { w: number[]; c: number[]; r: number[]; a: number[] }[] = pids.map(() => ({ w: [], c: [], r: [], a: [] }));
  for (let i = 0; i < WINDOWS; i++) {
    const w0 = pids.map(wakeups);
    const c0 = pids.map(cpuMs);
    const t0 = performance.now();
    await Bun.sleep(WINDOW_MS);
    const el = performance.now() - t0;
    pids.forEach((pid, j) => {
      per[j]!.w.push(((wakeups(pid) - w0[j]!) * 1000) / el);
      per[j]!.c.push(((cpuMs(pid) - c0[j]!) * 100) / el);
      const m = memKiB(pid);
      per[j]!.r.push(m.rss / 1024);
      per[j]!.a.push(m.anon / 1024);
    });
  }
  return per.map((p) => ({ wakeupsPerS: median(p.w), cpuPct: median(p.c), rssMiB: median(p.r), anonMiB: median(p.a) }));
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

export async function run(): Promise<string> {
  const agent = process.env.IDLE_AGENT ?? join(ROOT, "dist/agent");
  const dir = mkdtempSync(join(tmpdir(), "agent-idle-"));
  const procs: Proc[] = [];
  try {
    const hello = compileHello(dir);
    const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
    procs.push(istiod);
    const istiodPort = Number((await firstLine(istiod.stdout as ReadableStream<Uint8Array>)).trim());
    const sleeper = join(dir, "envoy-sleep");
    writeFileSync(sleeper, "#!/bin/sh\nexec sleep 90\n", { mode: 0o755 });
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
    const started: Proc[] = [];
    for (const [name, env] of modes) {
      mkdirSync(join(dir, name), { recursive: true });
      const p = await spawnUntil([agent, "proxy", "sidecar"], await env(), join(dir, name), /Agent started/);
      procs.push(p);
      started.push(p);
    }
    const h = await spawnUntil([hello], { PATH: process.env.PATH ?? "" }, dir, /ready/);
    procs.push(h);
    await Bun.sleep(SETTLE_MS);
    const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    const [helloIdle, ...agents] = await sample([h.pid, ...started.map((p) => p.pid)]);
    const hi = helloIdle!;
    const rows = agents.map((a, i) => {
      const name = modes[i]![0];
      return `| ${name} | ${fmt(a.wakeupsPerS)} ${verdict(a.wakeupsPerS <= 2)} | ${fmt(a.cpuPct, 2)} (${fmt(a.cpuPct / Math.max(hi.cpuPct, 0.01), 1)}× hello) ${verdict(a.cpuPct <= 2 * Math.max(hi.cpuPct, 0.01))} | ${fmt(a.rssMiB)} ${verdict(a.rssMiB <= 50)} | ${fmt(a.anonMiB)} ${verdict(a.anonMiB <= 12)} |`;
    });
    return [
      "## Idle cost (bench/idle.ts)",
      "",
      `Three compiled agents and a compiled hello-world (\`console.log\`, then a 1 s interval) alive at once; ${SETTLE_MS / 1000} s to settle after "Agent started", then ${WINDOWS} windows of ${WINDOW_MS / 1000} s, median. Wake-ups = context switches of every thread. Load average at the start: ${load}.`,
      "",
      "| mode | wake-ups/s (target ≤ 2) | CPU % (target ≤ 2× hello) | RSS MiB (target ≤ 50) | anon RSS MiB (target ≤ 12) |",
      "|---|---|---|---|---|",
      `| hello-world | ${fmt(hi.wakeupsPerS)} | ${fmt(hi.cpuPct, 2)} | ${fmt(hi.rssMiB)} | ${fmt(hi.anonMiB)} |`,
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
