// Fuzz: random and mutated frames through the scanner and through in-process relays (fake
// downstream call and upstream). Nothing may throw out of the relay or crash; a frame the relay
// cannot route ends the stream with a gRPC status naming the problem; valid frames pass unchanged.

import { expect, test } from "bun:test";
import { FrameError, peekResponseType, requestTypeUrl } from "../../src/xds/frame.ts";
import { grpcFrame } from "../../src/xds/grpcframe.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { xdsCodec } from "../../src/xds/messages.ts";
import { xdsMetrics } from "../../src/xds/metrics.ts";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import { StreamRelay } from "../../src/xds/relay.ts";
import { Code, NAME_TABLE_TYPE, SOTW_PATH, DELTA_PATH, type GrpcStatus } from "../../src/xds/types.ts";
import type { DownstreamCall } from "../../src/xds/downstream.ts";
import type { Upstream, UpstreamHandlers } from "../../src/xds/upstream.ts";
import { TYPES } from "./harness.ts";

// Deterministic PRNG (mulberry32) so a failure reproduces.
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(1337);
const ri = (n: number) => Math.floor(rand() * n);

const TYPE_URLS = [
  "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  "type.googleapis.com/envoy.config.listener.v3.Listener",
  NAME_TABLE_TYPE,
  "type.googleapis.com/other.Thing",
  "",
];
function seedResponse(isDelta: boolean): Buffer {
  return seedResponseOf(isDelta, TYPE_URLS[ri(TYPE_URLS.length)]!);
}
function seedResponseOf(isDelta: boolean, t: string): Buffer {
  const resources = Array.from({ length: ri(3) }, () => ({ typeUrl: t, value: Buffer.alloc(ri(300), ri(256)) }));
  if (isDelta)
    return Buffer.from(
      TYPES.DeltaRes.encode(TYPES.DeltaRes.create({ typeUrl: t, nonce: "n", resources: resources.map((r, i) => ({ name: `r${i}`, resource: r })) })).finish(),
    );
  return Buffer.from(TYPES.Res.encode(TYPES.Res.create({ typeUrl: t, versionInfo: "1", nonce: "n", resources })).finish());
}
function seedRequest(isDelta: boolean): Buffer {
  const t = TYPE_URLS[ri(TYPE_URLS.length)]!;
  if (isDelta) return Buffer.from(TYPES.DeltaReq.encode(TYPES.DeltaReq.create({ typeUrl: t, resourceNamesSubscribe: ["a", "b"] })).finish());
  return Buffer.from(TYPES.Req.encode(TYPES.Req.create({ typeUrl: t, versionInfo: "1", resourceNames: ["a"] })).finish());
}
/** A mutated copy; `valid` when the bytes are the seed's, unchanged. */
function mutateTagged(b: Buffer): { msg: Buffer; valid: boolean } {
  const kind = ri(5);
  return { msg: mutateAs(kind, b), valid: kind === 4 };
}
function mutate(b: Buffer): Buffer {
  return mutateAs(ri(5), b);
}
function mutateAs(kind: number, b: Buffer): Buffer {
  const out = Buffer.from(b);
  switch (kind) {
    case 0: // random bytes
      return Buffer.from(Array.from({ length: ri(64) }, () => ri(256)));
    case 1: // flip bytes
      for (let i = 0, n = 1 + ri(4); i < n && out.length; i++) out[ri(out.length)] = ri(256);
      return out;
    case 2: // truncate
      return out.subarray(0, ri(out.length + 1));
    case 3: // insert garbage
      return Buffer.concat([out.subarray(0, ri(out.length + 1)), Buffer.from([ri(256), ri(256)]), out.subarray(ri(out.length + 1))]);
    default: // unchanged (valid)
      return out;
  }
}

test("scanner: 100k random and mutated messages, only FrameError or an answer", () => {
  let errors = 0;
  for (let i = 0; i < 100_000; i++) {
    const isDelta = rand() < 0.5;
    const req = i % 2 === 0;
    const msg = mutate(req ? seedRequest(isDelta) : seedResponse(isDelta));
    try {
      if (req) expect(typeof requestTypeUrl(msg, isDelta)).toBe("string");
      else {
        const avail = ri(msg.length + 1);
        // Only the bytes that have arrived, so an over-read cannot see the rest.
        const t = peekResponseType(msg.subarray(0, avail), avail, msg.length, isDelta);
        expect(t === null || typeof t === "string").toBe(true);
      }
    } catch (e) {
      if (!(e instanceof FrameError)) throw e;
      errors++;
    }
  }
  expect(errors).toBeGreaterThan(1000); // the mutations do produce bad frames
}, 60_000); // ~5 s on an idle machine: the default timeout failed it under load

test("relay: 100k random and mutated frames, statuses for bad ones, valid ones pass unchanged", () => {
  const codec = xdsCodec();
  const metrics = xdsMetrics(newRegistry());
  let frames = 0;
  let rejected = 0;
  let forwarded = 0;
  let validForwarded = 0;
  while (frames < 100_000) {
    const isDelta = rand() < 0.5;
    let status: GrpcStatus | undefined;
    const down: Buffer[] = [];
    const up: Buffer[] = [];
    let uh!: UpstreamHandlers;
    const call: DownstreamCall = {
      delta: isDelta,
      path: isDelta ? DELTA_PATH : SOTW_PATH,
      finished: false,
      write: (b) => (down.push(Buffer.from(b)), true),
      pause() {},
      resume() {},
      finish: (s) => (status ??= s),
    };
    const upstream: Upstream = {
      describe: "fuzz",
      open: (_m, h) => ((uh = h), { write: (b) => (up.push(Buffer.from(b)), true), pause() {}, resume() {}, close() {} }),
    };
    const relay = new StreamRelay(call, {
      codec,
      internal: new Map([[NAME_TABLE_TYPE, () => {}]]),
      initialRequests: [],
      lastHealth: () => undefined,
      maxRequestBytes: 1 << 20,
      log: silentLogger(),
      logLimit: new LogLimiter({ burst: 10, windowMs: 1000, now: () => 0 }),
      metrics,
      onUpstreamConnected() {},
    });
    const dh = relay.start(upstream);
    dh.onData(grpcFrame(seedRequest(isDelta))); // the upstream is dialed on the first request
    uh.onConnected();
    up.length = 0;
    for (let k = 0; k < 50 && !status; k++) {
      frames++;
      const toUpstream = rand() < 0.5;
      const seedType = TYPE_URLS[ri(TYPE_URLS.length)]!;
      const { msg, valid } = mutateTagged(toUpstream ? seedRequest(isDelta) : seedResponseOf(isDelta, seedType));
      const frame = grpcFrame(msg);
      const compressed = rand() < 0.05;
      if (compressed) frame[0] = 1; // compressed flag
      // deliver in random chunks
      const before = toUpstream ? up.length : down.length;
      for (let i = 0; i < frame.length;) {
        const n = 1 + ri(frame.length);
        (toUpstream ? dh.onData : uh.onData)(frame.subarray(i, i + n));
        i += n;
      }
      if (valid && !compressed) {
        // A valid message never ends the stream, and its route is known from its seed type:
        // Envoy types reach Envoy byte for byte, internal and unknown types never do.
        expect(status).toBeUndefined();
        if (toUpstream) expect(up[before]!.equals(frame)).toBe(true);
        else if (seedType.startsWith("type.googleapis.com/envoy.")) {
          expect(Buffer.concat(down.slice(before)).equals(frame)).toBe(true);
          validForwarded++;
        } else expect(down.length).toBe(before);
      }
      if (!status && !toUpstream && down.length > before) {
        expect(Buffer.concat(down.slice(before)).equals(frame)).toBe(true);
        forwarded++;
      }
      if (!status && toUpstream) expect(up[before]!.equals(frame)).toBe(true);
    }
    if (status) {
      rejected++;
      expect([Code.INVALID_ARGUMENT, Code.INTERNAL, Code.RESOURCE_EXHAUSTED] as number[]).toContain(status.code);
      expect(status.message.length).toBeGreaterThan(10);
    } else relay.close({ code: Code.OK, message: "" });
  }
  expect(rejected).toBeGreaterThan(100);
  expect(forwarded).toBeGreaterThan(1000);
  expect(validForwarded).toBeGreaterThan(1000);
}, 60_000);
