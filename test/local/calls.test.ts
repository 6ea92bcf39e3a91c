// The local xDS server's gRPC calls at their edges, against grpc-js clients (an independent
// implementation): an unknown method, a request it cannot decode, a request over the receive
// limit, a client that cancels mid-stream, shutdown with streams open (what is queued arrives
// first), and a client that stops reading.

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { memoryLogger } from "../../src/lib/log.ts";
import { createLocalXdsServer, type LocalXdsServer } from "../../src/local/index.ts";
import { H2Session } from "../../src/xds/h2/session.ts";
import { CDS, fixtureYaml } from "./fixtures.ts";
import { decodeAs, envoyRoot, RawAds, tempDir, writeText } from "./support.ts";

let envoy: protobuf.Root;
const tmp = tempDir();
const ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService";

beforeAll(async () => {
  envoy = await envoyRoot();
});
afterAll(() => tmp.cleanup());

function req(o: Record<string, unknown>): Buffer {
  const T = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  return Buffer.from(T.encode(T.fromObject({ node: { id: "calls" }, ...o })).finish());
}

function clusters(b: Uint8Array): { names: string[]; timeouts: number[] } {
  const r = decodeAs(envoy, "envoy.service.discovery.v3.DiscoveryResponse", b);
  const cs = (r.resources ?? []).map((a: { value: Uint8Array }) => decodeAs(envoy, "envoy.config.cluster.v3.Cluster", a.value));
  return {
    names: cs.map((c: { name: string }) => c.name),
    timeouts: cs.map((c: { connect_timeout?: { seconds?: number } }) => c.connect_timeout?.seconds ?? 0),
  };
}

/** `n` STATIC clusters (about 70 bytes each encoded) with the same connect timeout. */
function manyClusters(n: number, timeoutSeconds: number): string {
  const lines = ["clusters:"];
  for (let i = 0; i < n; i++)
    lines.push(`  - { name: cluster-${String(i).padStart(6, "0")}-${"x".repeat(40)}, type: STATIC, connect_timeout: ${timeoutSeconds}s }`);
  return lines.join("\n") + "\n";
}

async function until(f: () => boolean, ms: number, what: string): Promise<void> {
  for (const end = Date.now() + ms; !f(); await Bun.sleep(10)) if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

/** A server on a fresh file; stopped by the returned function. */
async function serve(yaml: string, listen = "127.0.0.1:0") {
  const file = join(tmp.dir, `xds-${Math.random().toString(36).slice(2)}.yaml`);
  writeText(file, yaml);
  const log = memoryLogger("all:debug");
  const server = createLocalXdsServer({ path: file, listen, log: log.log, pollMs: 0 });
  const ctl = new AbortController();
  await server.start(ctl.signal);
  await server.loaded();
  return { server, file, log, stop: async () => (ctl.abort(), await server.stopped()) };
}

/** A bidi call by path with grpc-js: messages as they come, and its final status. */
function rawCall(address: string, path: string) {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    path,
    (b: Buffer) => b,
    (b: Buffer) => b,
  );
  const messages: Buffer[] = [];
  call.on("data", (b: Buffer) => messages.push(b));
  call.on("error", () => {});
  const status = new Promise<grpc.StatusObject>((r) => call.on("status", r));
  return { call, messages, status, close: () => client.close() };
}

test("an unknown method, on the ADS service or another, is answered UNIMPLEMENTED with grpc-js's message", async () => {
  const s = await serve(fixtureYaml());
  try {
    for (const path of [`${ADS}/StreamAggregatedResourcesX`, "/grpc.health.v1.Health/Watch"]) {
      const c = rawCall(s.server.address(), path);
      c.call.write(req({ type_url: CDS }));
      const st = await c.status;
      c.close();
      expect([st.code, st.details]).toEqual([grpc.status.UNIMPLEMENTED, `The server does not implement the method ${path}`]);
    }
  } finally {
    await s.stop();
  }
});

test("a request that cannot be decoded ends its stream INVALID_ARGUMENT, logged; other streams go on", async () => {
  const s = await serve(fixtureYaml());
  try {
    const c = rawCall(s.server.address(), `${ADS}/DeltaAggregatedResources`);
    c.call.write(Buffer.from([0x0a, 0xff, 0xff, 0xff])); // a length-delimited field longer than the message
    const st = await c.status;
    c.close();
    expect(st.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(st.details).toStartWith("local xDS: cannot decode request: ");
    expect(s.log.lines.some((l) => l.includes("local xDS: Delta stream 1: bad request: "))).toBe(true);
    const ads = new RawAds(s.server.address(), "StreamAggregatedResources");
    ads.send(req({ type_url: CDS }));
    expect(clusters(await ads.next()).names).toEqual(["a", "b"]);
    ads.close();
  } finally {
    await s.stop();
  }
});

test("a request over 4 MiB ends its stream RESOURCE_EXHAUSTED (grpc's receive limit); one of exactly 4 MiB does not", async () => {
  const s = await serve(fixtureYaml());
  try {
    const at = rawCall(s.server.address(), `${ADS}/StreamAggregatedResources`);
    // A DiscoveryRequest of exactly 4 MiB: the type URL, then version_info padded to the limit.
    const base = req({ type_url: CDS });
    const pad = 4 * 1024 * 1024 - base.length - 1 - 4; // field 1 tag + a 4-byte varint length
    const version = Buffer.concat([
      Buffer.from([0x0a, 0x80 | (pad & 0x7f), 0x80 | ((pad >> 7) & 0x7f), 0x80 | ((pad >> 14) & 0x7f), pad >> 21]),
      Buffer.alloc(pad, 0x76),
    ]);
    const exact = Buffer.concat([version, base]);
    expect(exact.length).toBe(4 * 1024 * 1024);
    at.call.write(exact);
    await until(() => at.messages.length > 0, 10_000, "the answer to a 4 MiB request");
    expect(clusters(at.messages[0]!).names).toEqual(["a", "b"]);
    at.call.end();
    expect((await at.status).code).toBe(grpc.status.OK);
    at.close();

    const over = rawCall(s.server.address(), `${ADS}/StreamAggregatedResources`);
    over.call.write(Buffer.alloc(4 * 1024 * 1024 + 1));
    const st = await over.status;
    over.close();
    expect([st.code, st.details]).toEqual([grpc.status.RESOURCE_EXHAUSTED, "Received message larger than max (4194305 vs 4194304)"]);
  } finally {
    await s.stop();
  }
}, 30_000);

test("a client that cancels mid-stream: its stream is closed and forgotten; later pushes reach the others", async () => {
  const s = await serve(fixtureYaml());
  try {
    const gone = rawCall(s.server.address(), `${ADS}/StreamAggregatedResources`);
    gone.call.write(req({ type_url: CDS }));
    const stays = new RawAds(s.server.address(), "StreamAggregatedResources");
    stays.send(req({ type_url: CDS }));
    const first = clusters(await stays.next());
    expect(first.names).toEqual(["a", "b"]);
    await until(() => gone.messages.length === 1, 5000, "the first response");
    expect(s.server.connections()).toBe(2);

    gone.call.cancel();
    expect((await gone.status).code).toBe(grpc.status.CANCELLED);
    await until(() => s.server.connections() === 1, 5000, "the cancelled stream to be forgotten");
    expect(s.log.lines.some((l) => l.includes("local xDS: SotW stream 1 closed"))).toBe(true);

    writeText(s.file, fixtureYaml({ bTimeout: "7s" }));
    expect((await s.server.reload()).ok).toBe(true);
    expect(clusters(await stays.next()).timeouts).toEqual([0, 7]); // a has no connect_timeout
    expect(gone.messages.length).toBe(1);
    expect(s.log.lines.filter((l) => /\bERROR\b|\berror\b/.test(l))).toEqual([]);
    gone.close();
    stays.close();
  } finally {
    await s.stop();
  }
});

test("shutdown with open streams: what is queued (a large push) arrives whole, then each stream ends OK; the socket file goes", async () => {
  const sock = join(tmp.dir, "shutdown.sock");
  const s = await serve(fixtureYaml(), `unix://${sock}`);
  const sotw = rawCall(s.server.address(), `${ADS}/StreamAggregatedResources`);
  const delta = rawCall(s.server.address(), `${ADS}/DeltaAggregatedResources`);
  try {
    sotw.call.write(req({ type_url: CDS }));
    const D = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
    delta.call.write(Buffer.from(D.encode(D.fromObject({ node: { id: "d" }, type_url: CDS })).finish()));
    await until(() => sotw.messages.length === 1 && delta.messages.length === 1, 5000, "first responses");
    expect(existsSync(sock)).toBe(true);

    // 6,000 clusters: a push of about 500 KiB is queued to each stream, and shutdown starts at once.
    writeText(s.file, manyClusters(6_000, 3));
    expect((await s.server.reload()).ok).toBe(true);
    const stopped = s.stop();
    const [a, b] = await Promise.all([sotw.status, delta.status]);
    expect([a.code, b.code]).toEqual([grpc.status.OK, grpc.status.OK]);
    expect(sotw.messages.length).toBe(2);
    const last = clusters(sotw.messages[1]!);
    expect(last.names.length).toBe(6_000);
    expect(last.timeouts.every((t) => t === 3)).toBe(true);
    const d = decodeAs(envoy, "envoy.service.discovery.v3.DeltaDiscoveryResponse", delta.messages[1]!);
    expect([d.resources.length, d.removed_resources]).toEqual([6_000, ["a", "b"]]);
    await stopped;
    expect(existsSync(sock)).toBe(false);
  } finally {
    sotw.close();
    delta.close();
  }
}, 30_000);

test("a client that stops reading: pushes are not queued behind what it has not read; once it reads, the latest set", async () => {
  const s = await serve(fixtureYaml());
  const [host, port] = s.server.address().split(":") as [string, string];
  const sock = connect({ host, port: Number(port) });
  await new Promise<void>((r, j) => sock.once("connect", r).once("error", j));
  // Our HTTP/2 client stands in for a slow reader: a 64 KiB window, credited only when resumed.
  const session = new H2Session(sock, { role: "client", streamWindow: 65_535 });
  try {
    const st = session.request([
      [":method", "POST"],
      [":scheme", "http"],
      [":path", `${ADS}/StreamAggregatedResources`],
      [":authority", "local"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
    ]);
    let bytes = Buffer.alloc(0);
    st.handlers = { onData: (c) => (bytes = Buffer.concat([bytes, c])) };
    const messages = () => {
      const out: Buffer[] = [];
      for (let at = 0; at + 5 <= bytes.length;) {
        const len = bytes.readUInt32BE(at + 1);
        if (at + 5 + len > bytes.length) break;
        out.push(bytes.subarray(at + 5, at + 5 + len));
        at += 5 + len;
      }
      return out;
    };
    const r = req({ type_url: CDS });
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), r]);
    framed.writeUInt32BE(r.length, 1);
    st.write(framed);
    await until(() => messages().length === 1, 5000, "the first response");
    st.pause();

    // Five pushes of about 500 KiB each (the server's queue limit per stream is 256 KiB) while the client reads nothing.
    for (const t of [2, 3, 4, 5, 6]) {
      writeText(s.file, manyClusters(6_000, t));
      expect((await s.server.reload()).ok).toBe(true);
    }
    st.resume();
    await until(() => messages().length >= 3 && clusters(messages().at(-1)!).timeouts[0] === 6, 20_000, "the latest set");
    // The fixture's set, the push queued when the client stopped reading (timeout 2), then straight to the latest.
    expect(messages().map((m) => clusters(m).timeouts[0])).toEqual([0, 2, 6]);
  } finally {
    session.destroy();
    await s.stop();
  }
}, 60_000);
