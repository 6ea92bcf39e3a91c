// The relay's cut-through path without copies: a response whose route is decided in its first
// chunk goes to Envoy as views of that chunk (its gRPC prefix and body, nothing concatenated),
// the deframer's prefix stays valid after the call, and a forwarded message split at every
// boundary still reaches Envoy byte for byte.

import { expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import type { DownstreamCall } from "../../src/xds/downstream.ts";
import { GrpcDeframer, grpcFrame } from "../../src/xds/grpcframe.ts";
import { xdsCodec } from "../../src/xds/messages.ts";
import { xdsMetrics } from "../../src/xds/metrics.ts";
import { StreamRelay } from "../../src/xds/relay.ts";
import { SOTW_PATH } from "../../src/xds/types.ts";
import type { Upstream, UpstreamHandlers } from "../../src/xds/upstream.ts";
import { TYPES } from "./harness.ts";

const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const codec = xdsCodec();
const metrics = xdsMetrics(newRegistry());

function cdsResponse(size: number, nonce: string): Buffer {
  const value = Buffer.alloc(size, 0x5a);
  return Buffer.from(TYPES.Res.encode(TYPES.Res.create({ typeUrl: CDS, versionInfo: "1", nonce, resources: [{ typeUrl: CDS, value }] })).finish());
}

/** A relay whose downstream records each write call with the objects it was given. */
function relay() {
  const calls: Uint8Array[][] = [];
  let uh!: UpstreamHandlers;
  const call: DownstreamCall = {
    delta: false,
    path: SOTW_PATH,
    finished: false,
    write: (b) => (calls.push([b]), true),
    writev: (a, b) => (calls.push([a, b]), true),
    pause() {},
    resume() {},
    finish() {},
  };
  const upstream: Upstream = { describe: "views", open: (_m, h) => ((uh = h), { write: () => true, pause() {}, resume() {}, close() {} }) };
  const r = new StreamRelay(call, {
    codec,
    internal: new Map(),
    initialRequests: [],
    lastHealth: () => undefined,
    maxRequestBytes: 1 << 20,
    log: silentLogger(),
    logLimit: new LogLimiter({ burst: 10, windowMs: 1000, now: () => 0 }),
    metrics,
    onUpstreamConnected() {},
  });
  r.start(upstream).onData(grpcFrame(TYPES.Req.encode(TYPES.Req.create({ typeUrl: CDS })).finish()));
  uh.onConnected();
  /** Bytes Envoy got, copied only now (after every push), so a reused buffer would show. */
  const received = () => Buffer.concat(calls.flat().map((v) => Buffer.from(v.buffer, v.byteOffset, v.length)));
  return { calls, received, push: (b: Uint8Array) => uh.onData(b) };
}

const sameMemory = (a: Uint8Array, b: Uint8Array, offset: number) => a.buffer === b.buffer && a.byteOffset === b.byteOffset + offset;

test("a response decided in its first chunk goes to Envoy as views of that chunk: prefix and body, no copy", () => {
  const r = relay();
  const frame = grpcFrame(cdsResponse(3000, "n1"));
  const first = frame.subarray(0, 1000);
  r.push(first);
  r.push(frame.subarray(1000));
  expect(r.calls.length).toBe(2);
  const [prefix, body] = r.calls[0]!;
  expect([prefix!.length, body!.length]).toEqual([5, 995]);
  expect(sameMemory(prefix!, first, 0)).toBe(true);
  expect(sameMemory(body!, first, 5)).toBe(true);
  expect(sameMemory(r.calls[1]![0]!, frame, 1000)).toBe(true);
  expect(r.received().equals(frame)).toBe(true);
});

test("three small responses in one chunk: each goes out as views of it, in order", () => {
  const r = relay();
  const frames = [grpcFrame(cdsResponse(10, "a")), grpcFrame(cdsResponse(20, "b")), grpcFrame(cdsResponse(30, "c"))];
  const chunk = Buffer.concat(frames);
  r.push(chunk);
  expect(r.calls.map((c) => c.map((v) => v.length))).toEqual(frames.map((f) => [5, f.length - 5]));
  expect(r.calls.every((c) => c.every((v) => v.buffer === chunk.buffer))).toBe(true);
  expect(r.received().equals(chunk)).toBe(true);
});

test("a forwarded response split at every boundary (and byte by byte) reaches Envoy byte for byte", () => {
  const frames = [grpcFrame(cdsResponse(200, "x")), grpcFrame(cdsResponse(1, "y"))];
  const wire = Buffer.concat(frames);
  const splits: number[][] = [];
  for (let i = 1; i < wire.length; i++) splits.push([i]);
  for (let i = 1; i < wire.length; i++) for (const j of [i + 1, i + 7, i + 150]) if (j < wire.length) splits.push([i, j]);
  splits.push(Array.from({ length: wire.length - 1 }, (_, i) => i + 1));
  for (const cuts of splits) {
    const r = relay();
    let from = 0;
    // A fresh buffer per chunk, and the previous one scribbled over afterwards: the relay may keep
    // views of the chunks it forwards (they are the socket's, never reused) but nothing it read.
    for (const c of [...cuts, wire.length]) {
      r.push(Uint8Array.prototype.slice.call(wire, from, c));
      from = c;
    }
    const where = `cuts at ${cuts.length > 2 ? "every byte" : cuts.join(",")} of ${wire.length}`;
    expect({ where, down: r.received().toString("hex") }).toEqual({ where, down: wire.toString("hex") });
  }
});

test("deframer: a prefix inside one chunk is a view of it; a prefix split over chunks is its own copy, stable afterwards", () => {
  const headers: Uint8Array[] = [];
  const d = new GrpcDeframer({ onHeader: (_c, _l, h) => headers.push(h), onBody() {}, onEnd() {} });
  const a = grpcFrame(Buffer.alloc(3, 1));
  d.push(a);
  expect(sameMemory(headers[0]!, a, 0)).toBe(true);
  const b = grpcFrame(Buffer.alloc(4, 2));
  d.push(b.subarray(0, 2));
  d.push(b.subarray(2, 9));
  const c = grpcFrame(Buffer.alloc(5, 3));
  d.push(c.subarray(0, 3));
  d.push(c.subarray(3));
  expect(headers.map((h) => Buffer.from(h).toString("hex"))).toEqual(["0000000003", "0000000004", "0000000005"]);
  expect(headers[1]!.buffer === b.buffer).toBe(false);
});
