// xDS relay benchmark: a minimal istiod (bench/xds-istiod-main.ts, its own process) pushes
// DiscoveryResponses of 10 KB, 474 KB, 1 MB and 10 MB to a grpc-js client, in one run: directly,
// through the compiled agent (`dist/agent proxy sidecar`, its XDS socket, plaintext upstream),
// through socat in the agent's place (issue #16's floor) and through a plain Bun byte pipe
// (bench/xds-pipe-main.ts). Reports throughput, CPU ms per MiB (/proc/<pid>/stat) and the ratios
// to socat beside issue #16's targets with met/missed, and the agent's burst memory (VmHWM over
// the 10 MiB pushes, RSS 5 s later).

import * as grpc from "@grpc/grpc-js";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ADS_SERVICE_DEF, discoveryTypes } from "../test/support/fake-istiod.ts";
import { freePort } from "../test/support/fake-envoy.ts";

const T = discoveryTypes();
const SIZES = [10 * 1024, 474 * 1024, 1024 * 1024, 10 * 1024 * 1024];
const BUN = process.execPath;
const CLK_TCK = 100;

interface Sample {
  mibps: number;
  p50: number;
  p99: number;
  mib: number;
}

export async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.trim();
}

export function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

function statusKb(pid: number, key: string): number {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`${key}:\\s+(\\d+)`));
  return m ? Number(m[1]) : 0;
}

/**
 * The downstream client's channel options: Envoy's, as far as the relay can tell. Envoy's HTTP/2
 * windows toward the agent are its defaults, 256 MiB per stream and per connection (Istio's
 * bootstrap sets none for xds-grpc); grpc-js's would be 64 KiB, which holds a push in the relay's
 * queue waiting for window updates as no Envoy would.
 */
export const ENVOY_LIKE_CLIENT = { "grpc.max_receive_message_length": -1, "grpc-node.flow_control_window": 256 << 20 };
export async function measure(address: string, size: number): Promise<Sample> {
  const Ctor = grpc.makeGenericClientConstructor(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, "ads");
  const client = new Ctor(address, grpc.credentials.createInsecure(), ENVOY_LIKE_CLIENT);
  const call = (client as unknown as Record<string, { call(c: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> }>).StreamAggregatedResources!.call(client);
  call.on("error", () => {});
  let waiting: (() => void) | undefined;
  let got = 0;
  call.on("data", () => {
    got++;
    waiting?.();
  });
  const ask = (n: number) =>
    call.write(
      Buffer.from(T.Req.encode(T.Req.create({ typeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", versionInfo: `${size},${n}` })).finish()),
    );
  const until = (n: number) => new Promise<void>((r) => (waiting = () => got >= n && r()));
  ask(2);
  await until(2); // warm up
  const samples = size >= 10 << 20 ? 15 : 40;
  const lat: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    const want = got + 1;
    ask(1);
    await until(want);
    lat.push(performance.now() - t0);
  }
  const n = Math.max(8, Math.min(2000, Math.floor((160 << 20) / size)));
  const t0 = performance.now();
  const want = got + n;
  ask(n);
  await until(want);
  const el = (performance.now() - t0) / 1000;
  call.end();
  client.close();
  lat.sort((a, b) => a - b);
  return {
    mibps: (size * n) / (1 << 20) / el,
    p50: lat[Math.floor(lat.length / 2)]!,
    p99: lat[Math.min(lat.length - 1, Math.ceil(lat.length * 0.99) - 1)]!,
    mib: (size * (n + samples + 2)) / (1 << 20),
  };
}

/** `count` pushes of `size` bytes on one stream, asked for `batch` at a time. */
export async function pushes(address: string, size: number, count: number, batch = 500): Promise<void> {
  const Ctor = grpc.makeGenericClientConstructor(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, "ads");
  const client = new Ctor(address, grpc.credentials.createInsecure(), ENVOY_LIKE_CLIENT);
  const call = (client as unknown as Record<string, { call(c: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> }>).StreamAggregatedResources!.call(client);
  call.on("error", () => {});
  let got = 0;
  let waiting: (() => void) | undefined;
  call.on("data", () => {
    got++;
    waiting?.();
  });
  for (let asked = 0; asked < count; asked += batch) {
    const n = Math.min(batch, count - asked);
    const want = got + n;
    call.write(
      Buffer.from(T.Req.encode(T.Req.create({ typeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", versionInfo: `${size},${n}` })).finish()),
    );
    await new Promise<void>((r) => (waiting = () => got >= want && r()));
  }
  call.end();
  client.close();
}

/** The lowest RSS (MiB) over `ms`: what stays resident once the collector had its chance. */
export async function settledRss(pid: number, ms = 3000): Promise<number> {
  let low = Infinity;
  for (const t0 = Date.now(); Date.now() - t0 < ms; await Bun.sleep(100)) low = Math.min(low, statusKb(pid, "VmRSS") / 1024);
  return low;
}

export const GROWTH_PUSHES = 10_000;

/** Issue #16's growth check: RSS after a warm-up against RSS after 10,000 consecutive 10 KiB pushes on one stream. */
export async function growth(address: string, pid: number): Promise<{ warm: number; after: number }> {
  await pushes(address, 10 * 1024, 1_000);
  const warm = await settledRss(pid);
  await pushes(address, 10 * 1024, GROWTH_PUSHES);
  const after = await settledRss(pid);
  return { warm, after };
}

async function waitFor(what: string, ok: () => boolean, proc: ReturnType<typeof Bun.spawn>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (proc.exitCode !== null) throw new Error(`${what}: the process exited (${proc.exitCode})`);
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await Bun.sleep(10);
  }
}

/** The compiled agent as a proxyless pod would run it, relaying to the bench's istiod. */
export async function startAgent(
  dir: string,
  istiodPort: number,
  bin = process.env.XDS_AGENT ?? join(import.meta.dir, "..", "dist", "agent"),
): Promise<ReturnType<typeof Bun.spawn>> {
  if (!existsSync(bin)) throw new Error("dist/agent not built (bun build.ts --host)");
  const proxyConfig = {
    discoveryAddress: `127.0.0.1:${istiodPort}`,
    controlPlaneAuthPolicy: "NONE",
    statusPort: await freePort(),
    proxyAdminPort: await freePort(),
  };
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: dir,
    POD_NAME: "bench-0",
    POD_NAMESPACE: "bench",
    INSTANCE_IP: "127.0.0.1",
    DISABLE_ENVOY: "true",
    CA_PROVIDER: "local",
    PROXY_CONFIG: JSON.stringify(proxyConfig),
  };
  const agent = Bun.spawn([bin, "proxy", "sidecar", "--log_output_level", "default:warn"], { cwd: dir, env, stdout: "ignore", stderr: "inherit" });
  await waitFor("agent XDS socket", () => existsSync(join(dir, "etc/istio/proxy/XDS")), agent);
  return agent;
}

const ROUNDS = 3;
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const verdict = (ok: boolean) => (ok ? "met" : "**missed**");

interface Path {
  name: string;
  address: string;
  cpu: () => number;
  /** Before / after each measurement (socat serves one connection per process). */
  before?: () => Promise<void>;
  after?: () => Promise<void>;
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "xds-bench-"));
  const istiod = Bun.spawn([BUN, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
  let agent: ReturnType<typeof Bun.spawn> | undefined;
  let pipe: ReturnType<typeof Bun.spawn> | undefined;
  let socat: ReturnType<typeof Bun.spawn> | undefined;
  try {
    const port = Number(await firstLine(istiod.stdout));
    agent = await startAgent(dir, port);
    const a = agent;
    const pipeSocket = join(dir, "pipe.sock");
    pipe = Bun.spawn([BUN, join(import.meta.dir, "xds-pipe-main.ts")], {
      stdout: "pipe",
      stderr: "inherit",
      env: { ...process.env, PIPE_SOCKET: pipeSocket, PIPE_UPSTREAM: String(port) },
    });
    if ((await firstLine(pipe.stdout as ReadableStream<Uint8Array>)) !== "READY") throw new Error("pipe did not start");
    const pp = pipe;
    const paths: Path[] = [
      { name: "direct", address: `127.0.0.1:${port}`, cpu: () => 0 },
      { name: "agent", address: `unix://${join(dir, "etc/istio/proxy/XDS")}`, cpu: () => cpuMs(a.pid) },
      { name: "pipe", address: `unix://${pipeSocket}`, cpu: () => cpuMs(pp.pid) },
    ];
    // The floor: socat in the agent's place (TCP_NODELAY upstream, 256 KiB buffer).
    const socatBin = Bun.which("socat");
    if (socatBin) {
      const sock = join(dir, "socat.sock");
      let cpu = 0;
      let proc: ReturnType<typeof Bun.spawn> | undefined;
      paths.push({
        name: "socat",
        address: `unix://${sock}`,
        cpu: () => cpu,
        before: async () => {
          rmSync(sock, { force: true });
          const s = Bun.spawn([socatBin, "-b262144", `UNIX-LISTEN:${sock}`, `TCP:127.0.0.1:${port},nodelay`], { stdout: "ignore", stderr: "inherit" });
          socat = proc = s;
          await waitFor("socat socket", () => existsSync(sock), s);
        },
        after: async () => {
          // grpc-js keeps its connection after close(); socat would wait on it forever.
          proc!.kill("SIGTERM");
          await proc!.exited;
          const u = proc!.resourceUsage()!.cpuTime;
          cpu += Number(u.user + u.system) / 1000;
        },
      });
    }
    const idleRss = statusKb(a.pid, "VmRSS") / 1024;
    const res = new Map<number, Map<string, { mibps: number[]; p50: number[]; cpu: number[] }>>();
    let burst = { before: NaN, peak: NaN, after: NaN };
    for (const size of SIZES) {
      const per = new Map(paths.map((p) => [p.name, { mibps: [] as number[], p50: [] as number[], cpu: [] as number[] }]));
      if (size === 10 << 20) {
        // Burst: the agent's peak RSS over the 10 MiB pushes (VmHWM reset first), and 5 s later.
        burst.before = statusKb(a.pid, "VmRSS") / 1024;
        writeFileSync(`/proc/${a.pid}/clear_refs`, "5");
      }
      for (let round = 0; round < ROUNDS; round++) {
        // Interleaved so machine noise spreads over every path.
        for (const p of paths) {
          await p.before?.();
          const c0 = p.cpu();
          const m = await measure(p.address, size);
          await p.after?.();
          const r = per.get(p.name)!;
          r.mibps.push(m.mibps);
          r.p50.push(m.p50);
          r.cpu.push((p.cpu() - c0) / m.mib);
        }
      }
      if (size === 10 << 20) {
        burst.peak = statusKb(a.pid, "VmHWM") / 1024;
        await Bun.sleep(5000);
        burst.after = statusKb(a.pid, "VmRSS") / 1024;
      }
      res.set(size, per);
    }
    const grew = await growth(paths[1]!.address, a.pid);
    const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    const x = (v: number) => `${v.toFixed(2)}×`;
    const lines = [...res].map(([size, per]) => {
      const label = size >= 1 << 20 ? `${size / (1 << 20)} MiB` : `${Math.round(size / 1024)} KiB`;
      const g = (n: string) => per.get(n);
      const d = g("direct")!;
      const ag = g("agent")!;
      const pi = g("pipe")!;
      const so = g("socat");
      const tp = so ? med(ag.mibps) / med(so.mibps) : NaN;
      const cpu = so ? med(ag.cpu) / med(so.cpu) : NaN;
      const cpuTarget = size >= 500 * 1024 ? 1.0 : 1.5;
      const soCols = so
        ? `${med(so.mibps).toFixed(0)} | ${x(tp)} (≥ 0.95×: ${verdict(tp >= 0.95)}) | ${med(so.cpu).toFixed(2)} | ${x(cpu)} (≤ ${cpuTarget.toFixed(1)}×: ${verdict(cpu <= cpuTarget)})`
        : "n/a | n/a | n/a | n/a";
      return `| ${label} | ${med(d.mibps).toFixed(0)} | ${med(ag.mibps).toFixed(0)} | ${soCols} | ${med(ag.cpu).toFixed(2)} | ${x(med(ag.p50) / med(d.p50))} | ${med(pi.mibps).toFixed(0)} / ${med(pi.cpu).toFixed(2)} |`;
    });
    const peakOk = burst.peak <= idleRss + 20;
    const backOk = burst.after <= idleRss * 1.1;
    const growthOk = grew.after <= grew.warm * 1.05;
    return [
      "## xDS relay (bench/xds.ts)",
      "",
      `grpc-js client ← \`dist/agent proxy sidecar\` (XDS socket) ← plaintext h2 ← grpc-js istiod (bench/xds-istiod-main.ts). Beside it, in the agent's place: socat (\`-b262144\`, TCP_NODELAY upstream; the issue's floor) and a plain Bun byte pipe; direct = client → istiod. ${ROUNDS} interleaved rounds, median; ${navigatorCores()} cores shared by all processes; load average at the end: ${load}. Targets (issue #16): throughput ≥ 0.95× socat at every size; CPU per MiB ≤ 1.0× socat at ≥ 500 KiB, ≤ 1.5× at 10 KiB.`,
      "",
      "| message | direct MiB/s | agent MiB/s | socat MiB/s | agent ÷ socat throughput | socat CPU ms/MiB | agent ÷ socat CPU per MiB | agent CPU ms/MiB | agent p50 ÷ direct | Bun pipe MiB/s / CPU ms/MiB |",
      "|---|---|---|---|---|---|---|---|---|---|",
      ...lines,
      "",
      `Burst memory (whole agent): idle ${idleRss.toFixed(0)} MiB; peak during the 10 MiB pushes ${burst.peak.toFixed(0)} MiB (target ≤ idle + 2 × 10 MiB = ${(idleRss + 20).toFixed(0)}: ${verdict(peakOk)}); 5 s after ${burst.after.toFixed(0)} MiB (target ≤ idle + 10 % = ${(idleRss * 1.1).toFixed(0)}: ${verdict(backOk)}).`,
      "",
      `Growth: RSS (lowest over 3 s) after 1,000 warm-up pushes of 10 KiB ${grew.warm.toFixed(1)} MiB, after ${GROWTH_PUSHES.toLocaleString("en")} more on one stream ${grew.after.toFixed(1)} MiB (${x(grew.after / grew.warm)}; target no growth, ≤ 1.05×: ${verdict(growthOk)}). test/xds/relay-growth.test.ts checks the same by live object counts.`,
      "",
    ].join("\n");
  } finally {
    for (const p of [agent, pipe, socat, istiod]) p?.kill("SIGTERM");
    await Promise.all([agent?.exited, pipe?.exited, socat?.exited, istiod.exited]);
    rmSync(dir, { recursive: true, force: true });
  }
}

function navigatorCores(): number {
  return require("node:os").cpus().length;
}

if (import.meta.main) console.log(await run());
