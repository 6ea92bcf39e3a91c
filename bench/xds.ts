// xDS relay benchmark: a minimal istiod (bench/xds-istiod-main.ts, its own process) pushes
// DiscoveryResponses of 10 KB, 474 KB, 1 MB and 10 MB to a grpc-js client, in one run: directly,
// through the compiled agent (`dist/agent proxy sidecar`, its XDS socket, plaintext upstream), and
// through a plain byte pipe (bench/xds-pipe-main.ts: the cost of a third process moving bytes at
// all). Reports throughput ratio, p50/p99 push latency ratio, CPU ms per MiB (from
// /proc/<pid>/stat) and peak RSS (VmHWM) of the agent.

import * as grpc from "@grpc/grpc-js";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
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

export async function measure(address: string, size: number): Promise<Sample> {
  const Ctor = grpc.makeGenericClientConstructor(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, "ads");
  const client = new Ctor(address, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": -1 });
  const call = (client as unknown as Record<string, { call(c: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> }>).StreamAggregatedResources!.call(client);
  call.on("error", () => {});
  let waiting: (() => void) | undefined;
  let got = 0;
  call.on("data", () => {
    got++;
    waiting?.();
  });
  const ask = (n: number) => call.write(Buffer.from(T.Req.encode(T.Req.create({ typeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", versionInfo: `${size},${n}` })).finish()));
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
  return { mibps: (size * n) / (1 << 20) / el, p50: lat[Math.floor(lat.length / 2)]!, p99: lat[Math.min(lat.length - 1, Math.ceil(lat.length * 0.99) - 1)]!, mib: (size * (n + samples + 2)) / (1 << 20) };
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
export async function startAgent(dir: string, istiodPort: number, bin = process.env.XDS_AGENT ?? join(import.meta.dir, "..", "dist", "agent")): Promise<ReturnType<typeof Bun.spawn>> {
  if (!existsSync(bin)) throw new Error("dist/agent not built (bun build.ts --host)");
  const proxyConfig = { discoveryAddress: `127.0.0.1:${istiodPort}`, controlPlaneAuthPolicy: "NONE", statusPort: await freePort(), proxyAdminPort: await freePort() };
  const env = { PATH: process.env.PATH ?? "", HOME: dir, POD_NAME: "bench-0", POD_NAMESPACE: "bench", INSTANCE_IP: "127.0.0.1", DISABLE_ENVOY: "true", CA_PROVIDER: "local", PROXY_CONFIG: JSON.stringify(proxyConfig) };
  const agent = Bun.spawn([bin, "proxy", "sidecar", "--log_output_level", "default:warn"], { cwd: dir, env, stdout: "ignore", stderr: "inherit" });
  await waitFor("agent XDS socket", () => existsSync(join(dir, "etc/istio/proxy/XDS")), agent);
  return agent;
}

interface Row {
  direct: Sample;
  agent: Sample;
  pipe: Sample;
  agentCpu: number;
  pipeCpu: number;
  mib: number;
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "xds-bench-"));
  const istiod = Bun.spawn([BUN, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
  let agent: ReturnType<typeof Bun.spawn> | undefined;
  let pipe: ReturnType<typeof Bun.spawn> | undefined;
  try {
    const port = Number(await firstLine(istiod.stdout));
    agent = await startAgent(dir, port);
    const pipeSocket = join(dir, "pipe.sock");
    pipe = Bun.spawn([BUN, join(import.meta.dir, "xds-pipe-main.ts")], { stdout: "pipe", stderr: "inherit", env: { ...process.env, PIPE_SOCKET: pipeSocket, PIPE_UPSTREAM: String(port) } });
    if ((await firstLine(pipe.stdout as ReadableStream<Uint8Array>)) !== "READY") throw new Error("pipe did not start");
    const agentSocket = `unix://${join(dir, "etc/istio/proxy/XDS")}`;
    const idleRss = statusKb(agent.pid, "VmRSS") / 1024;
    const rows = new Map<number, Row>();
    let agentCpuTotal = 0;
    let mibTotal = 0;
    for (const size of SIZES) {
      let best: Row | undefined;
      let agentCpu = 0;
      let pipeCpu = 0;
      let mib = 0;
      for (let round = 0; round < 2; round++) {
        // Interleaved so machine noise spreads over all three paths.
        const d = await measure(`127.0.0.1:${port}`, size);
        const a0 = cpuMs(agent.pid);
        const a = await measure(agentSocket, size);
        agentCpu += cpuMs(agent.pid) - a0;
        mib += a.mib;
        const p0 = cpuMs(pipe.pid);
        const p = await measure(`unix://${pipeSocket}`, size);
        pipeCpu += cpuMs(pipe.pid) - p0;
        best = {
          direct: !best || d.mibps > best.direct.mibps ? d : best.direct,
          agent: !best || a.mibps > best.agent.mibps ? a : best.agent,
          pipe: !best || p.mibps > best.pipe.mibps ? p : best.pipe,
          agentCpu: 0,
          pipeCpu: 0,
          mib: 0,
        };
      }
      rows.set(size, { ...best!, agentCpu: agentCpu / mib, pipeCpu: pipeCpu / mib, mib });
      agentCpuTotal += agentCpu;
      mibTotal += mib;
    }
    const peak = statusKb(agent.pid, "VmHWM") / 1024;
    const x = (v: number) => `**${v.toFixed(2)}x**`;
    const lines = [...rows].map(([size, r]) => {
      const label = size >= 1 << 20 ? `${size / (1 << 20)} MiB` : `${Math.round(size / 1024)} KiB`;
      return `| ${label} | ${r.direct.mibps.toFixed(0)} | ${r.agent.mibps.toFixed(0)} | ${x(r.agent.mibps / r.direct.mibps)} | ${r.direct.p50.toFixed(2)} / ${r.agent.p50.toFixed(2)} (${x(r.agent.p50 / r.direct.p50)}) | ${r.direct.p99.toFixed(2)} / ${r.agent.p99.toFixed(2)} (${x(r.agent.p99 / r.direct.p99)}) | ${r.agentCpu.toFixed(2)} | ${x(r.pipe.mibps / r.direct.mibps)} / ${x(r.pipe.p50 / r.direct.p50)} / ${r.pipeCpu.toFixed(2)} |`;
    });
    return [
      "## xDS relay (bench/xds.ts)",
      "",
      `grpc-js client <- \`dist/agent proxy sidecar\` (XDS socket) <- plaintext h2 <- grpc-js istiod; direct = client -> istiod; pipe = the same through a plain Bun byte pipe (no HTTP/2, no gRPC). Best of 2 interleaved rounds; ${navigatorCores()} cores shared by all processes.`,
      "",
      "| message | direct MiB/s | agent MiB/s | throughput ratio | p50 ms direct / agent | p99 ms direct / agent | agent CPU ms/MiB | pipe: throughput / p50 ratio / CPU ms/MiB |",
      "|---|---|---|---|---|---|---|---|",
      ...lines,
      "",
      `Agent CPU overall: ${(agentCpuTotal / mibTotal).toFixed(2)} ms/MiB. Agent RSS (whole agent: status, SDS, local CA, relay): ${idleRss.toFixed(0)} MiB idle, ${peak.toFixed(0)} MiB peak (largest message 10 MiB; target <= 74 MiB).`,
      "",
    ].join("\n");
  } finally {
    for (const p of [agent, pipe, istiod]) p?.kill("SIGTERM");
    await Promise.all([agent?.exited, pipe?.exited, istiod.exited]);
    rmSync(dir, { recursive: true, force: true });
  }
}

function navigatorCores(): number {
  return require("node:os").cpus().length;
}

if (import.meta.main) console.log(await run());
