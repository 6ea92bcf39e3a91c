// Before/after for the SDS server (not part of `bun run bench`): compiled agents in the sidecar
// shape (CA_PROVIDER=local, a stand-in Envoy that sleeps), alive side by side. Each serves one
// StreamSecrets stream held open, as Envoy does; then
//   idle: anonymous and total RSS at rest (median of 3 readings 10 s apart, from STEADY_MS after start);
//   burst: 200 SDS streams at once (200 connections, a grpc-js client each, as test/faults/load.test.ts),
//     time until every one is answered, the agent's CPU, and how long its main event loop was held:
//     from another process, a new connection to its XDS socket every 10 ms, timed until the server's
//     first bytes (sent by the main loop), median and longest during the burst. Rounds interleave the agents; medians.
// Usage: bun bench/sds-ab.ts <agent,agent,...> [rounds]

import * as grpc from "@grpc/grpc-js";
import net from "node:net";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sdsCodec, SECRET_TYPE_URL } from "../src/sds/proto.ts";
import { SDS_SERVICE } from "../src/sds/server.ts";
import { freePort } from "../test/support/fake-envoy.ts";
import { memKiB } from "./procstat.ts";
import { cpuMs, fmt, spawnUntil, type Proc } from "./support.ts";

const bins = (process.argv[2] ?? "").split(",").filter(Boolean);
const rounds = Number(process.argv[3] ?? 3);
const STEADY_MS = Number(process.env.STEADY_MS ?? 45_000);
const STREAMS = 200;
if (bins.length === 0) throw new Error("usage: bun bench/sds-ab.ts <agent,agent,...> [rounds]");

const codec = sdsCodec();
const pass = (b: Buffer) => b;
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN;
const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** One StreamSecrets for `default`; resolves with the client and call once answered (the caller ends them). */
async function sdsStream(socket: string): Promise<{ client: grpc.Client; call: grpc.ClientDuplexStream<Buffer, Buffer> }> {
  const client = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(`/${SDS_SERVICE}/StreamSecrets`, pass, pass);
  await new Promise<void>((resolve, reject) => {
    call.once("data", () => resolve());
    call.once("error", reject);
    call.write(codec.encodeRequest({ typeUrl: SECRET_TYPE_URL, resourceNames: ["default"] }));
  });
  return { client, call };
}

/**
 * A process of its own (the bench's loop is busy with 200 clients) that opens a new connection to
 * the agent's XDS socket every 10 ms, one at a time, timed from connect to the server's first bytes
 * (its HTTP/2 SETTINGS, sent by the main loop on accept): how long the agent's main loop keeps a
 * newcomer waiting. (PINGs on one connection would trip gRPC's ping enforcement.)
 */
const PROBE = `
const net = require("node:net");
const rtts = [];
let inFlight = false;
setInterval(() => {
  if (inFlight) return;
  inFlight = true;
  const t0 = performance.now();
  const sock = net.connect(process.argv[process.argv.length - 1]);
  sock.on("error", () => (inFlight = false));
  sock.once("data", () => { rtts.push(performance.now() - t0); inFlight = false; sock.destroy(); });
}, 10);
process.on("SIGTERM", () => { process.stdout.write(JSON.stringify(rtts)); process.exit(0); });
console.error("probing");
`;

async function mainLoopProbe(xdsSocket: string): Promise<{ stop(): Promise<number[]> }> {
  const p = Bun.spawn([process.execPath, "-e", PROBE, xdsSocket], { stdout: "pipe", stderr: "pipe" });
  const reader = (p.stderr as ReadableStream<Uint8Array>).getReader();
  await reader.read(); // "probing": its interval runs
  return {
    async stop() {
      p.kill("SIGTERM");
      return JSON.parse(await new Response(p.stdout as ReadableStream<Uint8Array>).text()) as number[];
    },
  };
}

interface Agent {
  bin: string;
  dir: string;
  proc: Proc;
  held: { client: grpc.Client; call: grpc.ClientDuplexStream<Buffer, Buffer> };
}

const dir = mkdtempSync(join(tmpdir(), "sds-ab-"));
const procs: Proc[] = [];
try {
  const sleeper = join(dir, "envoy-sleep");
  writeFileSync(sleeper, "#!/bin/sh\nexec sleep 600\n", { mode: 0o755 });
  const agents: Agent[] = [];
  const t0 = performance.now();
  for (const [i, bin] of bins.entries()) {
    const pod = join(dir, `agent-${i}`);
    mkdirSync(join(pod, "var/run/secrets/istio"), { recursive: true });
    copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(pod, "var/run/secrets/istio/root-cert.pem"));
    const env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: pod,
      POD_NAME: "sds-ab-0",
      POD_NAMESPACE: "bench",
      INSTANCE_IP: "127.0.0.1",
      CLOUD_PLATFORM: "none",
      CA_PROVIDER: "local",
      PROXY_CONFIG: JSON.stringify({
        terminationDrainDuration: "1s",
        discoveryAddress: "127.0.0.1:1",
        controlPlaneAuthPolicy: "NONE",
        binaryPath: sleeper,
        statusPort: await freePort(),
        proxyAdminPort: await freePort(),
      }),
    };
    const proc = await spawnUntil([bin, "proxy", "sidecar"], env, pod, /certificates warmed/);
    procs.push(proc);
    const held = await sdsStream(join(pod, "var/run/secrets/workload-spiffe-uds/socket"));
    agents.push({ bin, dir: pod, proc, held });
  }
  const loadStart = load();
  await Bun.sleep(Math.max(0, STEADY_MS - (performance.now() - t0)));
  const mem = agents.map(() => ({ anon: [] as number[], rss: [] as number[] }));
  for (let i = 0; i < 3; i++) {
    if (i > 0) await Bun.sleep(10_000);
    agents.forEach((a, j) => {
      const m = memKiB(a.proc.pid);
      mem[j]!.anon.push(m.anon / 1024);
      mem[j]!.rss.push(m.rss / 1024);
    });
  }
  const burst = agents.map(() => ({ ms: [] as number[], cpu: [] as number[], maxHold: [] as number[], p50Hold: [] as number[] }));
  for (let r = 0; r < rounds; r++) {
    for (const [j, a] of agents.entries()) {
      const probe = await mainLoopProbe(join(a.dir, "etc/istio/proxy/XDS"));
      await Bun.sleep(200);
      const c0 = cpuMs(a.proc.pid);
      const b0 = performance.now();
      const streams = await Promise.all(Array.from({ length: STREAMS }, () => sdsStream(join(a.dir, "var/run/secrets/workload-spiffe-uds/socket"))));
      const ms = performance.now() - b0;
      const cpu = cpuMs(a.proc.pid) - c0;
      const rtts = await probe.stop();
      if (process.env.SDS_AB_DEBUG) console.error(a.bin, rtts.length, rtts.map((x) => Math.round(x)).join(" "));
      for (const s of streams) {
        s.call.cancel();
        s.client.close();
      }
      burst[j]!.ms.push(ms);
      burst[j]!.cpu.push(cpu);
      burst[j]!.maxHold.push(Math.max(...rtts));
      burst[j]!.p50Hold.push(q(rtts, 0.5));
      await Bun.sleep(1000);
    }
  }
  console.log(`| agent | idle anon RSS MiB | idle RSS MiB | ${STREAMS} SDS streams answered, ms | agent CPU ms | main-loop wait p50 / max ms |`);
  console.log("|---|---|---|---|---|---|");
  agents.forEach((a, j) => {
    const b = burst[j]!;
    console.log(
      `| ${a.bin} | ${fmt(med(mem[j]!.anon))} | ${fmt(med(mem[j]!.rss))} | ${fmt(med(b.ms), 0)} | ${fmt(med(b.cpu), 0)} | ${fmt(med(b.p50Hold), 0)} / ${fmt(med(b.maxHold), 0)} |`,
    );
  });
  console.log(`\n${rounds} rounds interleaved, medians; load average ${loadStart} at the start, ${load()} at the end.`);
  for (const a of agents) {
    a.held.call.cancel();
    a.held.client.close();
  }
} finally {
  for (const p of procs) p.kill("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
  rmSync(dir, { recursive: true, force: true });
}
