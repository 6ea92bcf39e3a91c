// Seeded fuzzers of the compiled agent's surfaces: the XDS socket (raw bytes, HTTP/2 frames, gRPC
// prefixes up to 4 GiB, CONTINUATION (empty ones too), SETTINGS and empty-frame floods, rapid reset,
// PINGs between new streams, streams held open) and the status port
// (pipelined hostile requests, garbage, smuggling, huge headers, slowloris). What must hold: no
// crash, bounded RSS, and a normal client served after. FAULTS_FUZZ_COUNT sets the inputs per
// surface (default 10,000 frames on the XDS socket, 10,000 requests on the status port);
// FAULTS_FUZZ_SEED reproduces a run. The SDS socket exists only with Envoy (fuzz-sds-dns.test.ts);
// its server shares the HTTP/2 session fuzzed here.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { FakeIstiod } from "../support/fake-istiod.ts";
import { startPod, type Pod } from "../e2e/pod.ts";
import { CDS, EnvoyClient } from "../xds/harness.ts";
import { CLIENT_PREFACE, F, GRPC_REQUEST, T, headersFrame, ping, rawFrame, rst, settings } from "../xds/h2-support.ts";

const COUNT = Number(process.env.FAULTS_FUZZ_COUNT ?? 10_000);
/** Status-port inputs are requests, pipelined up to 12 on a connection (about 1,700 connections for 10,000). */
const HTTP_COUNT = Number(process.env.FAULTS_FUZZ_COUNT ?? 10_000);
const SEED = Number(process.env.FAULTS_FUZZ_SEED ?? 20);
/** Inputs between two checks that a normal client is served. */
const BATCH = 2_000;
const RSS_LIMIT_MIB = 400;
/** How long a connection may stay quiet before the fuzzer drops it. */
const QUIET_MS = 20;

function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let istiod: FakeIstiod;
let pod: Pod;

beforeAll(async () => {
  istiod = new FakeIstiod();
  istiod.onStream = (s) => s.call.on("data", () => void s.send({ typeUrl: CDS, versionInfo: "ok", resources: [] }));
  await istiod.start();
  pod = await startPod({
    env: { DISABLE_ENVOY: "true", CA_PROVIDER: "local" },
    proxyConfig: { discoveryAddress: istiod.address, controlPlaneAuthPolicy: "NONE" },
  });
  const deadline = Date.now() + 15_000;
  while (!existsSync(pod.path("etc/istio/proxy/XDS"))) {
    if (Date.now() > deadline) throw new Error(`sockets missing; agent log:\n${pod.tail()}`);
    await Bun.sleep(50);
  }
}, 30_000);

afterAll(async () => {
  pod?.kill();
  await istiod?.stop();
  pod?.box.cleanup();
});

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** One HTTP/2 connection's worth of hostile frames; returns the bytes and how many inputs they hold. */
function h2Inputs(rand: () => number, budget: number): { bytes: Buffer; inputs: number } {
  const ri = (n: number) => Math.floor(rand() * n);
  const parts: Buffer[] = [rand() < 0.95 ? CLIENT_PREFACE : Buffer.from(Array.from({ length: ri(40) }, () => ri(256)))];
  let inputs = 1;
  let stream = 1;
  const kind = ri(9);
  const n = Math.min(budget, 5 + ri(30));
  for (let i = 0; i < n; i++, inputs++) {
    switch (kind) {
      case 0: // random frames
        parts.push(rawFrame(ri(12), ri(256), ri(8), Buffer.from(Array.from({ length: ri(48) }, () => ri(256)))));
        break;
      case 1: // a gRPC stream with a hostile length prefix, then random DATA
        if (i === 0) parts.push(settings(), headersFrame(stream));
        const pre = Buffer.alloc(5);
        pre[0] = ri(3);
        pre.writeUInt32BE([0xffffffff, 0x7fffffff, ri(1 << 30), ri(100)][ri(4)]!, 1);
        parts.push(rawFrame(T.DATA, rand() < 0.1 ? F.END_STREAM : 0, stream, i % 3 === 0 ? pre : Buffer.from(Array.from({ length: ri(64) }, () => ri(256)))));
        break;
      case 2: // CONTINUATION flood on an unfinished header block, half of the frames empty
        parts.push(
          i === 0 ? rawFrame(T.HEADERS, 0, stream, Buffer.alloc(0)) : rawFrame(T.CONTINUATION, 0, stream, Buffer.alloc(rand() < 0.5 ? 0 : ri(1000), 0x40)),
        );
        break;
      case 3: // SETTINGS flood, some invalid
        parts.push(settings([ri(8), rand() < 0.8 ? ri(1 << 20) : 0xffffffff]));
        break;
      case 4: // rapid reset
        parts.push(headersFrame(stream), rst(stream, 8));
        stream += 2;
        break;
      case 6: // a PING after each new stream (the strikes must not start over)
        parts.push(headersFrame(stream, UNKNOWN_CALL, F.END_HEADERS | F.END_STREAM), ping(Buffer.alloc(8, i)));
        stream += 2;
        break;
      case 7: // streams held open (reflection waits for a request), many per frame batch
        for (let k = 0; k < 40; k++, stream += 2) parts.push(headersFrame(stream, REFLECTION_CALL));
        break;
      case 8: // empty DATA and empty HEADERS without END_STREAM
        if (i === 0) parts.push(headersFrame(stream));
        parts.push(rand() < 0.5 ? rawFrame(T.DATA, 0, stream) : rawFrame(T.HEADERS, 0, stream + 2 * ri(3)));
        break;
      default: // valid headers with mangled values
        parts.push(
          headersFrame(
            stream,
            GRPC_REQUEST.map(([k, v]) => [k, rand() < 0.3 ? v.slice(0, ri(v.length)) : v] as [string, string]),
          ),
        );
        stream += 2;
    }
  }
  return { bytes: Buffer.concat(parts), inputs };
}

const UNKNOWN_CALL = GRPC_REQUEST.map(([k, v]) => [k, k === ":path" ? "/fuzz.Nothing/Here" : v] as [string, string]);
const REFLECTION_CALL = GRPC_REQUEST.map(([k, v]) => [k, k === ":path" ? "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo" : v] as [string, string]);

const SMUGGLE = [
  "POST /healthz/ready HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /stats/prometheus HTTP/1.1\r\nHost: x\r\n\r\n",
  "GET /healthz/ready HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 0\r\n\r\nhello",
  "POST /healthz/ready HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
  "GET /stats/prometheus HTTP/1.0\r\n\r\n",
  "GET /app-health/x/livez HTTP/1.1\r\nHost: x\r\n\r\n",
];

/** One raw status-port request that ends the connection: garbage, a mutated request, smuggling, huge headers, slowloris. */
function httpTerminal(rand: () => number): Buffer {
  const ri = (n: number) => Math.floor(rand() * n);
  switch (ri(5)) {
    case 0:
      return Buffer.from(Array.from({ length: ri(200) }, () => ri(256)));
    case 1: {
      const b = Buffer.from(SMUGGLE[ri(SMUGGLE.length)]!);
      for (let i = 0; i < 1 + ri(4); i++) b[ri(b.length)] = ri(256);
      return b;
    }
    case 2:
      return Buffer.from(SMUGGLE[ri(SMUGGLE.length)]!);
    case 3:
      return Buffer.from(`GET /healthz/ready HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(ri(80_000))}\r\n\r\n`);
    default: // slowloris: a request that never finishes (the connection is dropped by us later)
      return Buffer.from("GET /healthz/ready HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  }
}

// Never /quitquitquit or /drain: those would stop the agent under test (loopback is allowed).
const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH", "get", "PRI"];
const PATHS = [
  "/healthz/ready",
  "/stats/prometheus",
  "/metrics",
  "/app-health/x/livez",
  "/app-lifecycle/x/prestopz",
  "/debug/ndsz",
  "/",
  "*",
  "//healthz/ready",
  "/%00",
  "/..%2f..%2fetc/passwd",
  "http://x/healthz/ready",
  "/healthz/ready#frag",
];
const VERSIONS = ["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1.1 extra"];
const HEADERS = [
  "Host: x",
  "Host: x",
  "Host:",
  "Host: a\r\nHost: b",
  "Connection: keep-alive",
  "Expect: 100-continue",
  "Accept-Encoding: gzip, br, *",
  "Accept: application/openmetrics-text; version=1.0.0",
  "X-Folded: a\r\n b",
  "Bad Name: v",
  "X-Empty:",
  "Transfer-Encoding: identity",
  "Content-Type: text/plain; charset=\u00ff",
];

/** One complete request the server can parse and answer (hostile in its details), for pipelining. */
function httpRequest(rand: () => number): string {
  const ri = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]) => xs[ri(xs.length)]!;
  let path = pick(PATHS);
  if (rand() < 0.2) path += `?${"q".repeat(ri(9_000))}=${ri(1000)}`;
  const headers = Array.from({ length: ri(5) }, () => pick(HEADERS));
  let body = "";
  if (rand() < 0.3) {
    body = "x".repeat(ri(2000));
    headers.push(rand() < 0.5 ? `Content-Length: ${body.length}` : "Transfer-Encoding: chunked");
    if (headers.at(-1)!.startsWith("Transfer")) body = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  }
  return `${pick(METHODS)} ${path} ${pick(VERSIONS)}\r\n${headers.map((h) => `${h}\r\n`).join("")}\r\n${body}`;
}

/**
 * One status-port connection: up to 12 pipelined requests (each an input), often ended by one that
 * ends the connection. Returns the bytes and how many inputs they hold.
 */
function httpConnection(rand: () => number): { bytes: Buffer; inputs: number } {
  const n = Math.floor(rand() * 12);
  const parts: Buffer[] = Array.from({ length: n }, () => Buffer.from(httpRequest(rand), "latin1"));
  if (n === 0 || rand() < 0.5) parts.push(httpTerminal(rand));
  return { bytes: Buffer.concat(parts), inputs: parts.length };
}

/** Connect, write, wait for the server to close or QUIET_MS of quiet, then drop. */
function throwAt(target: { path: string } | { port: number }, bytes: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const sock = "path" in target ? net.connect(target.path) : net.connect(target.port, "127.0.0.1");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve();
    };
    const quiet = () => {
      clearTimeout(timer);
      timer = setTimeout(done, QUIET_MS);
    };
    sock.on("error", done);
    sock.on("close", done);
    sock.on("data", quiet);
    sock.on("connect", () => {
      sock.write(bytes, () => quiet());
    });
  });
}

async function pool(total: number, concurrency: number, one: (i: number) => Promise<number>): Promise<number> {
  let sent = 0;
  const worker = async () => {
    while (sent < total) {
      // Not `sent += await one()`: that reads `sent` before the await and loses the other workers' counts.
      const n = await one(sent);
      sent += n;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return sent;
}

/** A plain readiness probe gets an answer (200 or 503: readiness is not what is tested here). */
async function normalProbeAnswered(): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${pod.statusPort}/healthz/ready`, { signal: AbortSignal.timeout(10_000) });
  await res.arrayBuffer();
  if (res.status !== 200 && res.status !== 503) throw new Error(`a normal probe got ${res.status} mid-fuzz`);
}

async function normalClientServed(): Promise<void> {
  const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
  envoy.send({ typeUrl: CDS });
  await envoy.waitFor(1, 5000);
  envoy.close();
}

describe(`fuzzing the compiled agent (${COUNT} inputs per surface, seed ${SEED})`, () => {
  for (const [name, rel] of [["XDS socket", "etc/istio/proxy/XDS"]] as const) {
    test(`${name}: hostile HTTP/2 and gRPC, no crash, RSS < ${RSS_LIMIT_MIB} MiB, a normal client served after`, async () => {
      const rand = rng(SEED);
      const path = pod.path(rel);
      // In batches of 2,000 inputs; between them (no hostile stream open: a new stream from Envoy
      // replaces the one before, as in Istio) a normal client is served.
      let sent = 0;
      while (sent < COUNT) {
        sent += await pool(Math.min(BATCH, COUNT - sent), 16, async () => {
          const { bytes, inputs } = h2Inputs(rand, COUNT);
          await throwAt({ path }, bytes);
          return inputs;
        });
        await normalClientServed();
      }
      expect(sent).toBeGreaterThanOrEqual(COUNT);
      if (pod.exitCode() !== null) console.log(pod.tail(40));
      expect(pod.exitCode()).toBeNull();
      expect(rssMiB(pod.agent.proc.pid)).toBeLessThan(RSS_LIMIT_MIB);
      await normalClientServed();
      console.log(`${name}: ${sent} inputs, agent RSS ${rssMiB(pod.agent.proc.pid).toFixed(0)} MiB`);
    }, 120_000);
  }

  test(`status port (${HTTP_COUNT} requests): pipelined hostile requests, garbage, smuggling, huge headers, slowloris; answers within 100 ms after`, async () => {
    const rand = rng(SEED + 1);
    let connections = 0;
    const t0 = performance.now();
    let sent = 0;
    while (sent < HTTP_COUNT) {
      sent += await pool(Math.min(BATCH, HTTP_COUNT - sent), 48, async () => {
        const { bytes, inputs } = httpConnection(rand);
        connections++;
        await throwAt({ port: pod.statusPort }, bytes);
        return inputs;
      });
      await normalProbeAnswered();
    }
    const secs = (performance.now() - t0) / 1000;
    expect(sent).toBeGreaterThanOrEqual(HTTP_COUNT);
    expect(pod.exitCode()).toBeNull();
    expect(rssMiB(pod.agent.proc.pid)).toBeLessThan(RSS_LIMIT_MIB);
    const tReady = performance.now();
    const res = await fetch(`http://127.0.0.1:${pod.statusPort}/healthz/ready`);
    await res.text();
    expect(performance.now() - tReady).toBeLessThan(100);
    await normalClientServed();
    console.log(`status port: ${sent} inputs on ${connections} connections in ${secs.toFixed(1)} s, agent RSS ${rssMiB(pod.agent.proc.pid).toFixed(0)} MiB`);
  }, 180_000);
});
