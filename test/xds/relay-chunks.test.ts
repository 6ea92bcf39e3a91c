// Internal xDS types (consumed by the agent, never forwarded) and the Envoy response after them,
// delivered split at every chunk boundary: the handler gets the resource bytes exactly once, the
// ACK goes upstream, and Envoy gets the following response byte for byte and nothing else.

import { expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { grpcFrame } from "../../src/xds/grpcframe.ts";
import { xdsCodec } from "../../src/xds/messages.ts";
import { xdsMetrics } from "../../src/xds/metrics.ts";
import { StreamRelay } from "../../src/xds/relay.ts";
import { DELTA_PATH, NAME_TABLE_TYPE, PROXY_CONFIG_TYPE, SOTW_PATH } from "../../src/xds/types.ts";
import type { DownstreamCall } from "../../src/xds/downstream.ts";
import type { Upstream, UpstreamHandlers } from "../../src/xds/upstream.ts";
import { TYPES } from "./harness.ts";

const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const codec = xdsCodec();
const metrics = xdsMetrics(newRegistry());

function response(isDelta: boolean, typeUrl: string, value: Buffer, nonce: string): Buffer {
  const any = { typeUrl, value };
  if (isDelta)
    return Buffer.from(
      TYPES.DeltaRes.encode(
        TYPES.DeltaRes.create({ typeUrl, nonce, systemVersionInfo: "7", resources: [{ name: "r0", version: "7", resource: any }] }),
      ).finish(),
    );
  return Buffer.from(TYPES.Res.encode(TYPES.Res.create({ typeUrl, versionInfo: "7", nonce, resources: [any] })).finish());
}

function relay(isDelta: boolean) {
  const down: Buffer[] = [];
  const up: Buffer[] = [];
  const handled: { type: string; bytes: string }[] = [];
  const finished: unknown[] = [];
  let uh!: UpstreamHandlers;
  const call: DownstreamCall = {
    delta: isDelta,
    path: isDelta ? DELTA_PATH : SOTW_PATH,
    finished: false,
    write: (b) => (down.push(Buffer.from(b)), true),
    pause() {},
    resume() {},
    finish: (s) => finished.push(s),
  };
  const upstream: Upstream = {
    describe: "chunks",
    open: (_m, h) => ((uh = h), { write: (b) => (up.push(Buffer.from(b)), true), pause() {}, resume() {}, close() {} }),
  };
  const internal = new Map([
    [NAME_TABLE_TYPE, (r: Uint8Array) => handled.push({ type: NAME_TABLE_TYPE, bytes: Buffer.from(r).toString("hex") })],
    [PROXY_CONFIG_TYPE, (r: Uint8Array) => handled.push({ type: PROXY_CONFIG_TYPE, bytes: Buffer.from(r).toString("hex") })],
  ]);
  const r = new StreamRelay(call, {
    codec,
    internal,
    initialRequests: [],
    lastHealth: () => undefined,
    maxRequestBytes: 1 << 20,
    log: silentLogger(),
    logLimit: new LogLimiter({ burst: 10, windowMs: 1000, now: () => 0 }),
    metrics,
    onUpstreamConnected() {},
  });
  const dh = r.start(upstream);
  // The upstream is dialed on Envoy's first request.
  const first = isDelta
    ? TYPES.DeltaReq.encode(TYPES.DeltaReq.create({ typeUrl: CDS })).finish()
    : TYPES.Req.encode(TYPES.Req.create({ typeUrl: CDS })).finish();
  dh.onData(grpcFrame(first));
  uh.onConnected();
  up.length = 0;
  return { down, up, handled, finished, push: (b: Uint8Array) => uh.onData(b) };
}

/** Upstream requests (ACKs) written by the relay, decoded with Envoy's own schema. */
function acks(up: Buffer[], isDelta: boolean): { typeUrl: string; nonce: string; error: boolean }[] {
  const wire = Buffer.concat(up);
  const out: { typeUrl: string; nonce: string; error: boolean }[] = [];
  for (let i = 0; i < wire.length;) {
    const len = wire.readUInt32BE(i + 1);
    const body = wire.subarray(i + 5, i + 5 + len);
    const m = (isDelta ? TYPES.DeltaReq : TYPES.Req).decode(body).toJSON() as { typeUrl?: string; responseNonce?: string; errorDetail?: unknown };
    out.push({ typeUrl: m.typeUrl ?? "", nonce: m.responseNonce ?? "", error: m.errorDetail !== undefined });
    i += 5 + len;
  }
  return out;
}

for (const isDelta of [false, true]) {
  for (const internalType of [NAME_TABLE_TYPE, PROXY_CONFIG_TYPE]) {
    const kind = `${isDelta ? "Delta" : "SotW"} ${internalType.split(".").at(-1)}`;
    test(`${kind}: split at every boundary, in two chunks and byte by byte`, () => {
      const payload = Buffer.from(Array.from({ length: 90 }, (_, i) => (i * 37 + 11) & 0xff));
      const internalFrame = grpcFrame(response(isDelta, internalType, payload, "int-1"));
      const envoyFrame = grpcFrame(response(isDelta, CDS, Buffer.from("cluster-bytes"), "cds-1"));
      const wire = Buffer.concat([internalFrame, envoyFrame]);
      const splits: number[][] = [];
      for (let i = 1; i < wire.length; i++) splits.push([i]);
      splits.push(Array.from({ length: wire.length - 1 }, (_, i) => i + 1)); // byte by byte
      for (const cuts of splits) {
        const r = relay(isDelta);
        let from = 0;
        for (const c of [...cuts, wire.length]) {
          // A fresh copy per chunk: the relay must not keep views into buffers it was handed.
          r.push(Uint8Array.prototype.slice.call(wire, from, c));
          from = c;
        }
        const where = `cuts at ${cuts.length === 1 ? cuts[0] : "every byte"} of ${wire.length}`;
        expect({ where, handled: r.handled }).toEqual({ where, handled: [{ type: internalType, bytes: payload.toString("hex") }] });
        expect({ where, down: Buffer.concat(r.down).toString("hex") }).toEqual({ where, down: envoyFrame.toString("hex") });
        expect({ where, acks: acks(r.up, isDelta) }).toEqual({ where, acks: [{ typeUrl: internalType, nonce: "int-1", error: false }] });
        expect(r.finished).toEqual([]);
      }
    });
  }
}
