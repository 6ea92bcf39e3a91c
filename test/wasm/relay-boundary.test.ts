// The relay's ECDS queue at chunk boundaries: a converted ECDS response that is ready while
// another response is being cut through to Envoy waits for that message's last byte, so Envoy
// never sees one gRPC message inside another. Driven chunk by chunk with fake streams.

import { expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { DEFAULT_LOG_LIMIT, LogLimiter } from "../../src/lib/loglimit.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import type { EcdsHook, EcdsResult } from "../../src/wasm/ecds.ts";
import type { DownstreamCall } from "../../src/xds/downstream.ts";
import { grpcFrame } from "../../src/xds/grpcframe.ts";
import { lazyXdsCodec } from "../../src/xds/messages.ts";
import { xdsMetrics } from "../../src/xds/metrics.ts";
import { StreamRelay } from "../../src/xds/relay.ts";
import type { UpstreamHandlers } from "../../src/xds/upstream.ts";
import { TYPES } from "../xds/harness.ts";

const ECDS = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig";
const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";

function response(typeUrl: string, nonce: string, size: number): Buffer {
  const m = TYPES.Res.create({ typeUrl, nonce, versionInfo: "v", resources: [{ typeUrl, value: Buffer.alloc(size, 7) }] });
  return grpcFrame(TYPES.Res.encode(m).finish());
}

test("a converted ECDS response waits for the end of a response being cut through, then follows it", async () => {
  const written: Buffer[] = [];
  const down: DownstreamCall = {
    delta: false,
    path: "/x",
    write: (b) => (written.push(Buffer.from(b)), true),
    pause() {},
    resume() {},
    finish() {},
    finished: false,
  };
  let up!: UpstreamHandlers;
  let resolveEcds!: (r: EcdsResult) => void;
  const converted = Buffer.from(TYPES.Res.encode(TYPES.Res.create({ typeUrl: ECDS, nonce: "e1", versionInfo: "converted" })).finish());
  const hook: EcdsHook = {
    typeUrl: ECDS,
    observeRequest() {},
    convert: () => new Promise((r) => (resolveEcds = r)),
  };
  const relay = new StreamRelay(down, {
    codec: lazyXdsCodec(),
    internal: new Map(),
    initialRequests: [],
    lastHealth: () => undefined,
    maxRequestBytes: 1 << 20,
    log: silentLogger(),
    logLimit: new LogLimiter({ ...DEFAULT_LOG_LIMIT, now: () => 0 }),
    metrics: xdsMetrics(newRegistry()),
    onUpstreamConnected() {},
    ecds: hook,
  });
  const fromEnvoy = relay.start({ describe: "fake", open: (_m, h) => ((up = h), { write: () => true, pause() {}, resume() {}, close() {} }) });
  fromEnvoy.onData(grpcFrame(TYPES.Req.encode(TYPES.Req.create({ typeUrl: LDS })).finish())); // the upstream is dialled on Envoy's first request
  up.onConnected();

  up.onData(response(ECDS, "e1", 10)); // gathered, handed to the hook
  const lds = response(LDS, "l1", 4000);
  up.onData(lds.subarray(0, 1000)); // LDS is now being cut through
  expect(Buffer.concat(written).equals(lds.subarray(0, 1000))).toBe(true);

  resolveEcds({ kind: "forward", message: converted });
  await Bun.sleep(0);
  await Bun.sleep(0);
  expect(Buffer.concat(written).equals(lds.subarray(0, 1000))).toBe(true); // not inside the LDS message

  up.onData(lds.subarray(1000));
  expect(Buffer.concat(written).equals(Buffer.concat([lds, grpcFrame(converted)]))).toBe(true);
  relay.close({ code: 0, message: "" });
});
