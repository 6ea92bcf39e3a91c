// The relay's read-only snapshot for the operator's view (/debug/config_dump): per type URL, what
// Envoy last answered (version, nonce, ACK or NACK with its reason) read from Envoy's own
// requests, message and byte counts, the agent's own answers for internal types, and the upstream
// connection's state. Requests are encoded by protobufjs from Envoy's protos (test/support), not
// by the code under test.

import { afterEach, describe, expect, test } from "bun:test";
import { CDS, LDS, harnessScope, startHarness } from "./harness.ts";
import { NAME_TABLE_TYPE } from "../../src/xds/types.ts";
import { StreamStats, MAX_TYPES } from "../../src/xds/streamstats.ts";
import { discoveryTypes } from "../support/fake-istiod.ts";

const scope = harnessScope(afterEach);
const cluster = (n: string) => ({ typeUrl: CDS, value: Buffer.from(`cluster-${n}`) });

/** Poll the snapshot until `pred` holds (the relay handles the request on its own loop turn). */
async function snapshotWhen<T>(read: () => T, pred: (s: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 100; i++) {
    const s = read();
    if (pred(s)) return s;
    await Bun.sleep(20);
  }
  throw new Error(`snapshot: ${what} not seen within 2s: ${JSON.stringify(read())}`);
}

describe("xDS snapshot through the relay", () => {
  test("SotW: Envoy's NACK with its reason, then an ACK of the next version; counts; upstream state", async () => {
    scope.h = await startHarness();
    expect(scope.h.proxy.snapshot().upstream.state).toBe("idle");
    const envoy = scope.client();
    envoy.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest((r) => r.typeUrl === CDS);
    const r1 = up.encode({ typeUrl: CDS, versionInfo: "v1", nonce: "a1", resources: [cluster("x")] });
    up.sendRaw(r1);
    await envoy.waitFor(1);
    envoy.send({ typeUrl: CDS, versionInfo: "", responseNonce: "a1", errorDetail: { code: 3, message: "cluster x: bad <lb_policy>" } });
    await up.nextRequest((r) => r.responseNonce === "a1");
    const nacked = scope.h.proxy.snapshot();
    expect(nacked.upstream).toMatchObject({ state: "connected", address: scope.h.istiod.address });
    const t1 = nacked.stream!.types.find((t) => t.typeUrl === CDS)!;
    expect(t1).toMatchObject({ requests: 2, responses: 1, responseBytes: r1.length, lastVersion: "", lastNonce: "a1", lastAck: "NACK" });
    expect(t1.lastNack).toMatchObject({ nonce: "a1", reason: "cluster x: bad <lb_policy>", code: 3 });

    up.send({ typeUrl: CDS, versionInfo: "v2", nonce: "a2", resources: [cluster("y")] });
    await envoy.waitFor(2);
    envoy.send({ typeUrl: CDS, versionInfo: "v2", responseNonce: "a2" });
    await up.nextRequest((r) => r.responseNonce === "a2");
    const t2 = scope.h.proxy.snapshot().stream!.types.find((t) => t.typeUrl === CDS)!;
    expect(t2).toMatchObject({ requests: 3, responses: 2, lastVersion: "v2", lastNonce: "a2", lastAck: "ACK" });
    // The last NACK stays on record after the ACK that followed it.
    expect(t2.lastNack?.nonce).toBe("a1");
    expect(scope.h.proxy.snapshot().stream!.active).toBe(true);

    up.end(14, "istiod going away");
    const after = await snapshotWhen(
      () => scope.h.proxy.snapshot(),
      (s) => s.upstream.state === "disconnected",
      "disconnected",
    );
    expect(after.upstream.lastError).toMatchObject({ message: "istiod going away", code: 14 });
    expect(after.stream!.active).toBe(false);
    expect(after.streamsOpened).toBe(1);
  });

  test("the agent's own NACK of a name table it cannot use is recorded with its reason", async () => {
    scope.h = await startHarness();
    const envoy = scope.client();
    envoy.send({ typeUrl: LDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE);
    scope.h.sinks.rejectNext = true;
    up.send({ typeUrl: NAME_TABLE_TYPE, versionInfo: "8", nonce: "nt1", resources: [{ typeUrl: NAME_TABLE_TYPE, value: Buffer.from("t") }] });
    await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE && r.responseNonce === "nt1");
    const t = scope.h.proxy.snapshot().stream!.types.find((x) => x.typeUrl === NAME_TABLE_TYPE)!;
    expect(t).toMatchObject({ lastNonce: "nt1", lastAck: "NACK", lastVersion: "" });
    expect(t.lastNack?.reason).toContain("bad name table");
  });

  test("Delta: nonce and NACK come from fields 6 and 7; no version", async () => {
    scope.h = await startHarness();
    const envoy = scope.client(true);
    envoy.send({ typeUrl: CDS, resourceNamesSubscribe: ["*"] });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest((r) => r.typeUrl === CDS);
    envoy.send({ typeUrl: CDS, responseNonce: "d1", errorDetail: { code: 13, message: "rejected" } });
    await up.nextRequest((r) => r.responseNonce === "d1");
    const s = scope.h.proxy.snapshot().stream!;
    expect(s.delta).toBe(true);
    const t = s.types.find((x) => x.typeUrl === CDS)!;
    expect(t).toMatchObject({ requests: 2, lastNonce: "d1", lastAck: "NACK", lastNack: { reason: "rejected", code: 13 } });
    expect(t.lastVersion).toBeUndefined();
  });
});

describe("StreamStats", () => {
  const T = discoveryTypes();
  const req = (m: Record<string, unknown>) => new Uint8Array(T.Req.encode(T.Req.create(m)).finish());

  test("a subscription (no nonce) is counted but is neither ACK nor NACK", () => {
    const s = new StreamStats(false, () => 1000);
    s.request(CDS, req({ typeUrl: CDS, resourceNames: ["a"] }));
    expect(s.snapshot().types).toEqual([
      {
        typeUrl: CDS,
        requests: 1,
        requestBytes: req({ typeUrl: CDS, resourceNames: ["a"] }).length,
        responses: 0,
        responseBytes: 0,
        lastVersion: "",
        lastRequestMs: 1000,
      },
    ]);
  });

  test("at most MAX_TYPES type URLs are kept; the rest are counted", () => {
    const s = new StreamStats(false, () => 0);
    for (let i = 0; i < MAX_TYPES + 5; i++) s.response(`type.example/t${i}`, 10);
    const snap = s.snapshot();
    expect(snap.types.length).toBe(MAX_TYPES);
    expect(snap.otherTypes).toBe(5);
  });

  test("an unreadable request is counted without details; a long NACK reason is cut", () => {
    const s = new StreamStats(false, () => 0);
    s.request(CDS, new Uint8Array([0x0a, 0x05, 0x61])); // field 1 claims 5 bytes, has 1
    expect(s.snapshot().types[0]).toMatchObject({ requests: 1 });
    expect(s.snapshot().types[0]!.lastAck).toBeUndefined();
    s.request(CDS, req({ typeUrl: CDS, responseNonce: "n", errorDetail: { code: 3, message: "x".repeat(5000) } }));
    expect(s.snapshot().types[0]!.lastNack!.reason.length).toBe(1024);
  });
});
