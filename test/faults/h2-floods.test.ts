// HTTP/2 floods against the compiled agent's XDS and SDS sockets (issue 34): each is sized so that
// the agent before its counted limits grew by hundreds of MiB (27 MB of empty CONTINUATIONs: +255
// MiB; 51.5 MB of SETTINGS from a client that never reads: +678 MiB; 100,000 open streams: +450
// MiB). What must hold: the agent's RSS stays within 64 MiB of what it was before the flood (the
// limits bound what a connection can make the agent hold to a few MiB: the margin is for the
// collector, not for data), the flooding connection is closed where the limit says so, with
// GOAWAY ENHANCE_YOUR_CALM when the peer reads and a log line naming the peer and the limit, and a
// normal client on another connection is served. Absence (no more PING ACKs, no stream past the
// cap) is asserted after the GOAWAY or a later sentinel, never after a sleep.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeIstiod, discoveryTypes } from "../support/fake-istiod.ts";
import { killRecordedEnvoys, startPod, until, xdsYamlWithPort, type Pod } from "../e2e/pod.ts";
import { writeE2eEnvoyLauncher } from "../e2e/xds-envoy.ts";
import { fetchSecret } from "../e2e/mesh.ts";
import { CDS, EnvoyClient } from "../xds/harness.ts";
import { CLIENT_PREFACE, F, GRPC_REQUEST, SETTINGS_ACK, T, literalBlock, ping, rawFrame, settings, type RawFrame } from "../xds/h2-support.ts";

const RSS_MARGIN_MIB = 64;
/** A connection's opening: preface, our SETTINGS and the ACK of the agent's (or it ends the connection after 10 s). */
const OPEN = Buffer.concat([CLIENT_PREFACE, settings(), SETTINGS_ACK]);
const MiB = 1024 * 1024;
const XDS = "etc/istio/proxy/XDS";
const SDS = "var/run/secrets/workload-spiffe-uds/socket";
const REFLECTION = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
const UNKNOWN = "/test.Nothing/Here";

function rssMiB(pod: Pod): number {
  if (pod.exitCode() !== null || pod.agent.proc.signalCode) throw new Error(`the agent exited; log tail:\n${pod.tail(40)}`);
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pod.agent.proc.pid}/status`, "utf8"));
  return Number(m![1]) / 1024;
}

const request = (path: string) => GRPC_REQUEST.map(([k, v]) => [k, k === ":path" ? path : v] as [string, string]);
const headers = (id: number, path: string, flags: number) => rawFrame(T.HEADERS, flags, id, literalBlock(request(path)));

/** Frames read back from the agent: a parser written from RFC 9113 (independent of src). */
class FrameReader {
  readonly frames: RawFrame[] = [];
  counts = new Map<number, number>();
  goaway: { code: number; debug: string } | undefined;
  lastPingAck = "";
  private buf: Buffer = Buffer.alloc(0);
  feed(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    let at = 0;
    while (this.buf.length - at >= 9) {
      const len = this.buf.readUIntBE(at, 3);
      if (this.buf.length - at < 9 + len) break;
      const type = this.buf[at + 3]!;
      const payload = this.buf.subarray(at + 9, at + 9 + len);
      this.counts.set(type, (this.counts.get(type) ?? 0) + 1);
      if (type === T.GOAWAY) this.goaway = { code: payload.readUInt32BE(4), debug: payload.subarray(8).toString() };
      if (type === T.PING && this.buf[at + 4] === F.ACK) this.lastPingAck = payload.toString("latin1");
      if (type === T.RST_STREAM)
        this.frames.push({ type, flags: this.buf[at + 4]!, stream: this.buf.readUInt32BE(at + 5) & 0x7fffffff, payload: Buffer.from(payload) });
      at += 9 + len;
    }
    this.buf = this.buf.subarray(at);
  }
  count(type: number): number {
    return this.counts.get(type) ?? 0;
  }
}

interface FloodResult {
  written: number;
  closedByAgent: boolean;
  reader: FrameReader;
  peakRss: number;
}

/**
 * One connection: `head`, then `body()` chunks until `total` bytes or the agent closes it. A
 * client that `reads` parses what comes back; one that does not never reads a byte. RSS is
 * sampled every 20 ms meanwhile; the result's peak includes a last sample after the connection ends.
 */
async function flood(pod: Pod, socketPath: string, head: Buffer, body: (i: number) => Buffer, total: number, reads: boolean): Promise<FloodResult> {
  const reader = new FrameReader();
  let peakRss = rssMiB(pod);
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(pod))), 20);
  let closed = false;
  let wake: (() => void) | undefined;
  let onGone!: () => void;
  const gone = new Promise<void>((r) => (onGone = r));
  // Bun's own socket: pause() stops reading from the kernel, and write() says what the kernel took.
  const sock = await Bun.connect({
    unix: socketPath,
    socket: {
      data: (_s, d) => reader.feed(Buffer.from(d)),
      drain: () => wake?.(),
      close: () => {
        closed = true;
        wake?.();
        onGone();
      },
      error: () => {},
    },
  });
  if (!reads) sock.pause();
  let written = 0;
  const write = async (b: Buffer) => {
    let at = 0;
    while (at < b.length && !closed) {
      const n = sock.write(b.subarray(at));
      if (n < 0)
        closed = true; // the agent closed the connection (EPIPE)
      else at += n;
      // A paused socket may not hear the close: try again every 100 ms.
      if (at < b.length && !closed) await Promise.race([new Promise<void>((r) => (wake = r)), Bun.sleep(100)]);
      wake = undefined;
    }
    return at;
  };
  await write(head);
  for (let i = 0; written < total && !closed; i++) written += await write(body(i));
  if (!closed && !reads) {
    // A client that does not read learns of the close by a failing write: the agent lingers 1 s.
    for (let t = 0; t < 50 && !closed; t++) {
      await write(settings());
      if (!closed) await Bun.sleep(100);
    }
  }
  if (!closed && reads) {
    // Everything the agent answered is read before we end (a PING sent last is answered last).
    await write(ping(Buffer.from("sentinel")));
    for (let t = 0; t < 200 && !closed && reader.lastPingAck !== "sentinel"; t++) await Bun.sleep(50);
  }
  const closedByAgent = closed;
  if (!closed) {
    sock.end();
    await Promise.race([gone, Bun.sleep(5000)]);
  }
  clearInterval(sampler);
  peakRss = Math.max(peakRss, rssMiB(pod));
  return { written, closedByAgent, reader, peakRss };
}

/** `n` copies of `frame` in one buffer (about `bytes` long). */
const repeat = (frame: Buffer, bytes: number) => Buffer.concat(Array.from({ length: Math.ceil(bytes / frame.length) }, () => frame));

let istiod: FakeIstiod;
let xdsPod: Pod;
let sdsPod: Pod;
let work: string;
const { Req } = discoveryTypes();
const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-faults-h2-"));
  istiod = new FakeIstiod();
  istiod.onStream = (s) => s.call.on("data", () => void s.send({ typeUrl: CDS, versionInfo: "ok", resources: [] }));
  await istiod.start();
  xdsPod = await startPod({
    env: { DISABLE_ENVOY: "true", CA_PROVIDER: "local" },
    proxyConfig: { discoveryAddress: istiod.address, controlPlaneAuthPolicy: "NONE" },
  });
  sdsPod = await startPod({
    env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", FAKE_ENVOY_RECORD: join(work, "envoy-record.jsonl") },
    proxyConfig: { controlPlaneAuthPolicy: "NONE", binaryPath: writeE2eEnvoyLauncher(work), terminationDrainDuration: "1s", drainDuration: "2s" },
    files: { "xds.yaml": xdsYamlWithPort(1) },
  });
  await until(xdsPod, "the XDS socket", () => (existsSync(xdsPod.path(XDS)) ? true : undefined));
  await until(sdsPod, "the SDS socket", () => (existsSync(sdsPod.path(SDS)) ? true : undefined));
  await adsServed();
  await sdsServed();
}, 40_000);

afterAll(async () => {
  xdsPod?.kill();
  sdsPod?.kill();
  killRecordedEnvoys(join(work, "envoy-record.jsonl"));
  await istiod?.stop();
  xdsPod?.box.cleanup();
  sdsPod?.box.cleanup();
  rmSync(work, { recursive: true, force: true });
});

/** A normal ADS client on its own connection gets istiod's answer. */
async function adsServed(): Promise<void> {
  const envoy = new EnvoyClient(xdsPod.path(XDS));
  envoy.send({ typeUrl: CDS });
  await envoy.waitFor(1, 10_000);
  envoy.close();
}

/** A normal SDS client on its own connection gets the workload certificate. */
async function sdsServed(): Promise<void> {
  expect((await fetchSecret(sdsPod.path(SDS), "default", enc, 10_000)).length).toBeGreaterThan(100);
}

/** The flood plus a normal client served on another connection while it runs. */
async function floodServed(pod: Pod, served: () => Promise<void>, ...args: Parameters<typeof flood> extends [Pod, ...infer R] ? R : never) {
  const before = rssMiB(pod);
  const [r] = await Promise.all([flood(pod, ...args), served()]);
  await served();
  return { ...r, before };
}

/** 100,000 requests on one XDS connection, 1,000 a chunk: HEADERS on `path` with `flags`. */
const requestFlood = (path: string, flags: number, reads: boolean) =>
  floodServed(
    xdsPod,
    adsServed,
    xdsPod.path(XDS),
    OPEN,
    (i) => Buffer.concat(Array.from({ length: 1000 }, (_, j) => headers(2 * (i * 1000 + j) + 1, path, flags))),
    100_000 * headers(1, path, flags).length,
    reads,
  );

const abuseLogged = (pod: Pod, limit: string) =>
  until(pod, `the abuse log line naming the peer and "${limit}"`, () =>
    pod.tail(200).includes(`connection from pid=${process.pid} uid=${process.getuid?.()} closed (GOAWAY ENHANCE_YOUR_CALM): ${limit}`) ? true : undefined,
  );

describe("HTTP/2 floods (compiled agent)", () => {
  for (const [name, podOf, rel, served] of [
    ["XDS", () => xdsPod, XDS, adsServed],
    ["SDS", () => sdsPod, SDS, sdsServed],
  ] as const) {
    test(`${name} socket: 27 MB of empty CONTINUATION frames: GOAWAY ENHANCE_YOUR_CALM within a few frames, RSS within ${RSS_MARGIN_MIB} MiB`, async () => {
      const pod = podOf();
      // HEADERS carrying the first 10 bytes of a request's block, no END_HEADERS; then only CONTINUATIONs.
      const head = Buffer.concat([OPEN, rawFrame(T.HEADERS, 0, 1, literalBlock(request(REFLECTION)).subarray(0, 10))]);
      const chunk = repeat(rawFrame(T.CONTINUATION, 0, 1), MiB);
      const r = await floodServed(pod, served, pod.path(rel), head, () => chunk, 27 * MiB, true);
      console.log(`${name} CONTINUATION flood: ${(r.written / MiB).toFixed(1)} MiB written, RSS ${r.before.toFixed(0)} -> peak ${r.peakRss.toFixed(0)} MiB`);
      expect(r.peakRss - r.before).toBeLessThan(RSS_MARGIN_MIB);
      expect(r.closedByAgent).toBe(true);
      expect(r.reader.goaway).toEqual({ code: 11, debug: "more than 1 consecutive empty HEADERS/CONTINUATION/DATA frames" });
      await abuseLogged(pod, "more than 1 consecutive empty HEADERS/CONTINUATION/DATA frames");
    }, 120_000);

    test(`${name} socket: 51.5 MB of SETTINGS from a client that never reads: closed once 1,000 ACKs wait, RSS within ${RSS_MARGIN_MIB} MiB`, async () => {
      const pod = podOf();
      const chunk = repeat(settings([4, 65_535]), MiB);
      const r = await floodServed(pod, served, pod.path(rel), OPEN, () => chunk, 51.5 * MiB, false);
      console.log(`${name} SETTINGS flood: ${(r.written / MiB).toFixed(1)} MiB written, RSS ${r.before.toFixed(0)} -> peak ${r.peakRss.toFixed(0)} MiB`);
      expect(r.peakRss - r.before).toBeLessThan(RSS_MARGIN_MIB);
      expect(r.closedByAgent).toBe(true);
      await abuseLogged(pod, "peer does not read: over 1000 control frames (SETTINGS/PING ACKs, RST_STREAM) queued");
    }, 120_000);
  }

  test("XDS socket: 100,000 PINGs each after a new stream: GOAWAY too_many_pings after the third, not 100,000 ACKs", async () => {
    const pod = xdsPod;
    const r = await floodServed(
      pod,
      adsServed,
      pod.path(XDS),
      OPEN,
      (i) =>
        Buffer.concat(
          Array.from({ length: 1000 }, (_, j) => [
            headers(2 * (i * 1000 + j) + 1, UNKNOWN, F.END_HEADERS | F.END_STREAM),
            ping(Buffer.alloc(8, j & 0xff)),
          ]).flat(),
        ),
      100 * 1000 * (headers(1, UNKNOWN, 0).length + 17), // 100,000 of each
      true,
    );
    console.log(
      `XDS PINGs with streams: ${(r.written / MiB).toFixed(1)} MiB written, ${r.reader.count(T.PING)} PING ACKs, RSS ${r.before.toFixed(0)} -> peak ${r.peakRss.toFixed(0)} MiB`,
    );
    expect(r.reader.goaway).toEqual({ code: 11, debug: "too_many_pings" });
    expect(r.reader.count(T.PING)).toBe(3);
    expect(r.peakRss - r.before).toBeLessThan(RSS_MARGIN_MIB);
  }, 120_000);

  test("XDS socket: 100,000 streams held open: 1,000 served, the rest REFUSED_STREAM, RSS within 64 MiB", async () => {
    const r = await requestFlood(REFLECTION, F.END_HEADERS, true);
    const refused = r.reader.frames.filter((f) => f.payload.readUInt32BE(0) === 7).map((f) => f.stream);
    console.log(
      `XDS 100,000 streams: ${refused.length} refused, closed by the agent: ${r.closedByAgent}, RSS ${r.before.toFixed(0)} -> peak ${r.peakRss.toFixed(0)} MiB`,
    );
    expect(r.peakRss - r.before).toBeLessThan(RSS_MARGIN_MIB);
    // Streams 1..1999 (the first 1,000) are served; every later one is refused, in order. This
    // client writes faster than it reads: once 1,000 refusals wait unread, it is cut off.
    expect(refused[0]).toBe(2001);
    expect(refused.every((id, i) => id === 2001 + 2 * i)).toBe(true);
    expect(r.reader.count(T.HEADERS)).toBe(1000); // the served streams' response headers
    if (r.closedByAgent) await abuseLogged(xdsPod, "peer does not read: over 1000 control frames (SETTINGS/PING ACKs, RST_STREAM) queued");
    else expect(refused.length).toBe(99_000);
  }, 120_000);

  test("XDS socket: 100,000 requests whose answers are never read: closed once 10,000 frames wait, RSS within 64 MiB", async () => {
    const pod = xdsPod;
    const r = await requestFlood(UNKNOWN, F.END_HEADERS | F.END_STREAM, false);
    console.log(`XDS unread answers: ${(r.written / MiB).toFixed(1)} MiB written, RSS ${r.before.toFixed(0)} -> peak ${r.peakRss.toFixed(0)} MiB`);
    expect(r.peakRss - r.before).toBeLessThan(RSS_MARGIN_MIB);
    expect(r.closedByAgent).toBe(true);
    await abuseLogged(pod, "peer does not read: over 10000 frames queued");
  }, 120_000);
});
