// DNS over TCP floods against the compiled agent's DNS proxy, with a slow upstream resolver (each
// TCP answer 50-300 ms late) that counts the TCP connections the agent opens to it. What must
// hold: one connection pipelining queries has at most 16 of them at the upstream at once; all
// clients together at most 64 upstream connections (past that: SERVFAIL at once; the agent's
// descriptors are sampled from /proc, the upstream counts queries it holds unanswered); a client
// trickling a query a byte at a time is closed 2 s after its first byte; the per-query log lines
// are rate limited and what they suppressed is still counted in the log; and throughout, normal
// UDP queries (an outside name and a mesh name) keep being answered by `dig`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as packet from "dns-packet";
import { makeTestPki, type FakeIstiod, type TestPki } from "../support/fake-istiod.ts";
import { describeRequiring } from "../support/requires.ts";
import { dig, startUpstream, type TestUpstream } from "../dns/helpers.ts";
import { DNS_POD_REQUIRES, MESH_IP, MESH_NAME, nameTableIstiod, privateLoopbackNet, startDnsPod, type DnsPod } from "./dns-pod.ts";

const NET = privateLoopbackNet();
const OUTSIDE_UDP = "udp-probe.outside.example";
const OUTSIDE_UDP_IP = "192.0.2.53";

let work: string;
let pki: TestPki;
let istiod: FakeIstiod;
let upstream: TestUpstream;
let dns: DnsPod;
let tcpDelayMs = 50;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-faults-dns-flood-"));
  pki = makeTestPki(join(work, "pki"));
  istiod = await nameTableIstiod(pki);
  upstream = await startUpstream({
    host: `${NET}.1`,
    port: 53,
    answers: { [OUTSIDE_UDP]: OUTSIDE_UDP_IP },
    get tcpDelayMs() {
      return tcpDelayMs;
    },
  });
  dns = await startDnsPod({ work, pki, istiod, upstreamIp: `${NET}.1`, listenIp: `${NET}.2`, env: { DNS_FORWARD_TIMEOUT: "3s" } });
}, 60_000);

afterAll(async () => {
  dns?.close();
  upstream?.close();
  await istiod?.stop();
  rmSync(work, { recursive: true, force: true });
});

function query(id: number, name: string): Buffer {
  return packet.encode({ id, type: "query", flags: packet.RECURSION_DESIRED, questions: [{ type: "A", name }] });
}

function framed(q: Buffer): Buffer {
  const f = Buffer.alloc(q.length + 2);
  f.writeUInt16BE(q.length, 0);
  q.copy(f, 2);
  return f;
}

/** A TCP client: sends `queries` at once on one connection; resolves with each reply's rcode by ID once all arrived. */
function pipelined(ids: number[], name: (id: number) => string): Promise<Map<number, number>> {
  return new Promise((resolve, reject) => {
    const rcodes = new Map<number, number>();
    let buf = Buffer.alloc(0);
    const sock: Socket = createConnection({ host: `${NET}.2`, port: dns.port }, () => {
      sock.write(Buffer.concat(ids.map((id) => framed(query(id, name(id))))));
    });
    sock.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + msg.length);
        rcodes.set(msg.readUInt16BE(0), msg[3]! & 0x0f);
      }
      if (rcodes.size === ids.length) {
        sock.destroy();
        resolve(rcodes);
      }
    });
    sock.on("error", reject);
    sock.on("close", () => rcodes.size < ids.length && reject(new Error(`connection closed after ${rcodes.size} of ${ids.length} replies`)));
  });
}

/** Normal UDP queries with dig, one after another, until `done` settles: what each got. */
async function probeUdpUntil(done: Promise<unknown>): Promise<string[]> {
  let over = false;
  void done.finally(() => (over = true)).catch(() => {});
  const got: string[] = [];
  for (let i = 0; !over || i < 2; i++) {
    const [name, want] = i % 2 === 0 ? [OUTSIDE_UDP, OUTSIDE_UDP_IP] : [MESH_NAME, MESH_IP];
    const r = await dig(dns.port, name, "A", [], `${NET}.2`);
    got.push(r.status === "NOERROR" && r.data.join(",") === want ? "ok" : `${name}: ${r.status} ${r.data.join(",")}`);
    await Bun.sleep(100);
  }
  return got;
}

/** The agent's open file descriptors (/proc), sampled every 5 ms until `done` settles: before, and the most seen. */
function sampleFds(done: Promise<unknown>): { base: number; peak: number } {
  const dir = `/proc/${dns.pod.agent.proc.pid}/fd`;
  const r = { base: readdirSync(dir).length, peak: 0 };
  r.peak = r.base;
  const iv = setInterval(() => (r.peak = Math.max(r.peak, readdirSync(dir).length)), 5);
  void done.finally(() => clearInterval(iv)).catch(() => {});
  return r;
}

/** The agent's log lines written from `from` (an offset into its output) on. */
function logSince(from: number): string[] {
  return dns.pod.agent.output().slice(from).split("\n").filter(Boolean);
}

/** Lines of `msg` written, and what their `suppressed=` fields add up to. */
function counted(lines: string[], msg: string): { written: number; suppressed: number } {
  const mine = lines.filter((l) => l.includes(msg));
  const suppressed = mine.reduce((n, l) => n + Number(/suppressed=(\d+)/.exec(l)?.[1] ?? 0), 0);
  return { written: mine.length, suppressed };
}

describeRequiring(DNS_POD_REQUIRES, "DNS over TCP floods (compiled agent)", () => {
  test("one connection pipelining 1,600 outside-name queries: at most 16 at the upstream at once, every one answered, few log lines; UDP answered throughout", async () => {
    tcpDelayMs = 50;
    const before = upstream.tcp.total;
    upstream.tcp.pendingPeak = 0;
    const logFrom = dns.pod.agent.output().length;
    const ids = Array.from({ length: 1600 }, (_, i) => i + 1);
    const flood = pipelined(ids, (id) => `q${id}.outside.example`);
    const fds = sampleFds(flood);
    const [rcodes, udp] = await Promise.all([flood, probeUdpUntil(flood)]);
    expect(rcodes.size).toBe(1600);
    expect([...new Set(rcodes.values())]).toEqual([3]); // NXDOMAIN, the upstream's answer to each
    expect(upstream.tcp.total - before).toBe(1600);
    expect(upstream.tcp.pendingPeak).toBeLessThanOrEqual(16);
    // Descriptors: the 16 upstream connections, the client's, the UDP probes' upstream socket and
    // slack for a sample taken between a close and the next open (a sample can only miss a peak).
    expect(fds.peak - fds.base).toBeLessThanOrEqual(24);
    expect(udp.filter((r) => r !== "ok")).toEqual([]);
    expect(udp.length).toBeGreaterThanOrEqual(4);
    expect(logSince(logFrom).length).toBeLessThan(20);
    expect(dns.pod.exitCode()).toBeNull();
    console.log(
      `dns tcp flood: 1,600 pipelined answered, upstream peak ${upstream.tcp.pendingPeak} queries at once, agent +${fds.peak - fds.base} descriptors at most, ${udp.length} UDP probes answered`,
    );
  }, 60_000);

  test("40 connections pipelining 40 queries each: at most 64 upstream connections, the rest SERVFAIL at once; every failure line written or counted; UDP answered throughout", async () => {
    tcpDelayMs = 300;
    upstream.tcp.pendingPeak = 0;
    const logFrom = dns.pod.agent.output().length;
    const floods = Array.from({ length: 40 }, (_, c) =>
      pipelined(
        Array.from({ length: 40 }, (_, i) => c * 40 + i + 1),
        (id) => `m${id}.outside.example`,
      ),
    );
    const all = Promise.all(floods);
    const fds = sampleFds(all);
    const [results, udp] = await Promise.all([all, probeUdpUntil(all)]);
    const rcodes = results.flatMap((m) => [...m.values()]);
    const servfail = rcodes.filter((r) => r === 2).length;
    expect(rcodes.length).toBe(1600);
    expect(rcodes.filter((r) => r !== 2 && r !== 3)).toEqual([]); // SERVFAIL (refused at the limit) or the upstream's NXDOMAIN
    expect(servfail).toBeGreaterThan(0);
    expect(upstream.tcp.pendingPeak).toBeLessThanOrEqual(64);
    expect(fds.peak - fds.base).toBeLessThanOrEqual(64 + 40 + 8); // upstream, clients, probes and slack

    expect(udp.filter((r) => r !== "ok")).toEqual([]);
    // Each SERVFAIL is one failed attempt at the one upstream: a line written, or counted in the
    // suppressed= of a later line (the window's report comes at most 10 s after its first line).
    let c = counted(logSince(logFrom), "upstream failure");
    for (let waited = 0; c.written + c.suppressed < servfail && waited < 12_000; waited += 250) {
      await Bun.sleep(250);
      c = counted(logSince(logFrom), "upstream failure");
    }
    expect(c.written + c.suppressed).toBe(servfail);
    expect(c.written).toBeLessThanOrEqual(12);
    expect(dns.pod.exitCode()).toBeNull();
    console.log(
      `dns tcp flood: 40 x 40 pipelined, ${servfail} SERVFAIL at the limit, upstream peak ${upstream.tcp.pendingPeak} queries at once, agent +${fds.peak - fds.base} descriptors at most, failure lines ${c.written} written + ${c.suppressed} counted`,
    );
  }, 60_000);

  test("20 clients trickling a long query one byte every 50 ms: each closed by the agent 2 s after its first byte, before the query is whole; UDP answered throughout", async () => {
    const q = framed(query(7, `${"slow".repeat(20)}.${"loris".repeat(20)}.outside.example`)); // 200+ bytes: 10 s at this pace
    const trickle = () =>
      new Promise<number>((resolve, reject) => {
        let sent = 0;
        let t0 = 0;
        let timer: ReturnType<typeof setInterval> | undefined;
        const sock = createConnection({ host: `${NET}.2`, port: dns.port }, () => {
          t0 = performance.now();
          timer = setInterval(() => {
            if (sent >= q.length) return reject(new Error(`the whole ${q.length}-byte query was sent and the connection is still open`));
            sock.write(q.subarray(sent, ++sent));
          }, 50);
        });
        sock.on("error", () => {});
        sock.on("close", () => {
          clearInterval(timer);
          resolve(performance.now() - t0);
        });
      });
    const all = Promise.all(Array.from({ length: 20 }, trickle));
    const [closedAfter, udp] = await Promise.all([all, probeUdpUntil(all)]);
    expect(Math.min(...closedAfter)).toBeGreaterThanOrEqual(1900);
    expect(Math.max(...closedAfter)).toBeLessThan(5000);
    expect(udp.filter((r) => r !== "ok")).toEqual([]);
    expect(dns.pod.exitCode()).toBeNull();
    console.log(`dns tcp trickle: 20 clients closed after ${Math.min(...closedAfter).toFixed(0)}-${Math.max(...closedAfter).toFixed(0)} ms`);
  }, 30_000);
});
