// xDS relay benchmark: a minimal istiod (bench/xds-istiod-main.ts, its own process) pushes
// DiscoveryResponses of 10 KB, 474 KB, 1 MB and 10 MB to a grpc-js client, directly and through
// the relay (bench/xds-relay-main.ts, its own process, or XDS_BENCH_RELAY_CMD e.g. the compiled
// agent), in one run. Reports throughput ratio, p50/p99 push latency ratio, relay CPU ms per MiB
// (from /proc/<pid>/stat) and relay peak RSS (VmHWM). Plaintext upstream on both paths.

import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ADS_SERVICE_DEF, discoveryTypes } from "../test/support/fake-istiod.ts";

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

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
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

function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

function statusKb(pid: number, key: string): number {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`${key}:\\s+(\\d+)`));
  return m ? Number(m[1]) : 0;
}

async function measure(address: string, size: number): Promise<Sample> {
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

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "xds-bench-"));
  const socket = join(dir, "XDS");
  const istiod = Bun.spawn([BUN, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
  const port = Number(await firstLine(istiod.stdout));
  const relayCmd = process.env.XDS_BENCH_RELAY_CMD?.split(" ").filter(Boolean) ?? [BUN, join(import.meta.dir, "xds-relay-main.ts")];
  const relay = Bun.spawn(relayCmd, { stdout: "pipe", stderr: "inherit", env: { ...process.env, XDS_RELAY_SOCKET: socket, XDS_RELAY_UPSTREAM: `127.0.0.1:${port}` } });
  const rows: string[] = [];
  try {
    if ((await firstLine(relay.stdout)) !== "READY") throw new Error("relay did not start");
    const idleRss = statusKb(relay.pid, "VmRSS") / 1024;
    let cpuTotal = 0;
    let mibTotal = 0;
    for (const size of SIZES) {
      let direct: Sample | undefined;
      let relayed: Sample | undefined;
      let cpu = 0;
      let mib = 0;
      for (let round = 0; round < 2; round++) {
        const d = await measure(`127.0.0.1:${port}`, size);
        const c0 = cpuMs(relay.pid);
        const r = await measure(`unix://${socket}`, size);
        cpu += cpuMs(relay.pid) - c0;
        mib += r.mib;
        if (!direct || d.mibps > direct.mibps) direct = d;
        if (!relayed || r.mibps > relayed.mibps) relayed = r;
      }
      cpuTotal += cpu;
      mibTotal += mib;
      const label = size >= 1 << 20 ? `${size / (1 << 20)} MiB` : `${Math.round(size / 1024)} KiB`;
      rows.push(
        `| ${label} | ${direct!.mibps.toFixed(0)} | ${relayed!.mibps.toFixed(0)} | **${(relayed!.mibps / direct!.mibps).toFixed(2)}x** | ${direct!.p50.toFixed(2)} / ${relayed!.p50.toFixed(2)} (**${(relayed!.p50 / direct!.p50).toFixed(2)}x**) | ${direct!.p99.toFixed(2)} / ${relayed!.p99.toFixed(2)} (**${(relayed!.p99 / direct!.p99).toFixed(2)}x**) | ${(cpu / mib).toFixed(2)} |`,
      );
    }
    const peak = statusKb(relay.pid, "VmHWM") / 1024;
    return [
      "## xDS relay (bench/xds.ts)",
      "",
      `grpc-js client <- ${process.env.XDS_BENCH_RELAY_CMD ? `\`${process.env.XDS_BENCH_RELAY_CMD}\`` : "relay (bun bench/xds-relay-main.ts)"} over UDS <- plaintext h2 <- grpc-js istiod; direct = client -> istiod. Best of 2 rounds; ${navigatorCores()} cores shared by all three processes.`,
      "",
      "| message | direct MiB/s | relayed MiB/s | throughput ratio | p50 ms direct / relayed | p99 ms direct / relayed | relay CPU ms/MiB |",
      "|---|---|---|---|---|---|---|",
      ...rows,
      "",
      `Relay CPU overall: ${(cpuTotal / mibTotal).toFixed(2)} ms/MiB. Relay RSS: ${idleRss.toFixed(0)} MiB idle, ${peak.toFixed(0)} MiB peak (largest message 10 MiB; target <= 74 MiB).`,
      "",
    ].join("\n");
  } finally {
    relay.kill("SIGTERM");
    istiod.kill();
    await Promise.all([relay.exited, istiod.exited]);
    rmSync(dir, { recursive: true, force: true });
  }
}

function navigatorCores(): number {
  return require("node:os").cpus().length;
}

if (import.meta.main) console.log(await run());
