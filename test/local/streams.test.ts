// The per-stream SotW and Delta state machines, driven directly with snapshots (no sockets).

import { describe, expect, test } from "bun:test";
import { DeltaStream, type DeltaRequest } from "../../src/local/delta.ts";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE } from "../../src/local/schema.ts";
import { makeResource, makeSnapshot, type Snapshot } from "../../src/local/snapshot.ts";
import { SotwStream, type SotwRequest } from "../../src/local/sotw.ts";

/** A snapshot from `{typeUrl: {name: content}}`; content stands in for encoded bytes. */
function snap(spec: Record<string, Record<string, string>>): Snapshot {
  return makeSnapshot(new Map(Object.entries(spec).map(([t, rs]) => [t, Object.entries(rs).map(([n, c]) => makeResource(n, Buffer.from(c)))])));
}

function counter() {
  let n = 0;
  return () => `n${++n}`;
}

const S1 = snap({ [CLUSTER_TYPE]: { a: "a1", b: "b1" }, [ENDPOINT_TYPE]: { a: "ea1" }, [LISTENER_TYPE]: {} });
const S2 = snap({ [CLUSTER_TYPE]: { a: "a1", b: "b2" }, [ENDPOINT_TYPE]: { a: "ea1" }, [LISTENER_TYPE]: {} });
const S3 = snap({ [CLUSTER_TYPE]: { a: "a1", b: "b2" }, [ENDPOINT_TYPE]: { a: "ea2" }, [LISTENER_TYPE]: {} });

const sreq = (typeUrl: string, o: Partial<SotwRequest> = {}): SotwRequest => ({ typeUrl, versionInfo: "", resourceNames: [], responseNonce: "", ...o });

describe("SotW", () => {
  test("first request answered even when empty; ACK quiet; names change answered; stale ignored", () => {
    const s = new SotwStream(counter());
    const lds = s.onRequest(sreq(LISTENER_TYPE), S1);
    expect(lds.responses).toMatchObject([{ typeUrl: LISTENER_TYPE, nonce: "n1", resources: [] }]);
    const r1 = s.onRequest(sreq(CLUSTER_TYPE), S1).responses[0]!;
    expect(r1.resources.map((r) => r.name)).toEqual(["a", "b"]);
    expect(s.onRequest(sreq(CLUSTER_TYPE, { versionInfo: r1.versionInfo, responseNonce: r1.nonce }), S1)).toEqual({
      responses: [],
      events: [{ kind: "ack", typeUrl: CLUSTER_TYPE, version: r1.versionInfo, nonce: "n2" }],
    });
    expect(s.acked(CLUSTER_TYPE)).toBe(r1.versionInfo);
    expect(s.onRequest(sreq(CLUSTER_TYPE, { responseNonce: "old" }), S1)).toEqual({
      responses: [],
      events: [{ kind: "stale", typeUrl: CLUSTER_TYPE, nonce: "old" }],
    });
    // Named subscription replaces the legacy wildcard.
    const named = s.onRequest(sreq(CLUSTER_TYPE, { responseNonce: "n2", resourceNames: ["b"] }), S1).responses[0]!;
    expect(named.resources.map((r) => r.name)).toEqual(["b"]);
    // Now an empty list unsubscribes (no longer wildcard).
    expect(s.onRequest(sreq(CLUSTER_TYPE, { responseNonce: named.nonce }), S1)).toMatchObject({
      responses: [],
      events: [{ kind: "ack" }, { kind: "unsubscribed" }],
    });
    expect(s.onSnapshot(S2)).toEqual([]);
  });

  test("snapshots push only types whose subscribed set changed, with the full set", () => {
    const s = new SotwStream(counter());
    const c = s.onRequest(sreq(CLUSTER_TYPE), S1).responses[0]!;
    const e = s.onRequest(sreq(ENDPOINT_TYPE, { resourceNames: ["a"] }), S1).responses[0]!;
    const p2 = s.onSnapshot(S2);
    expect(p2.map((r) => [r.typeUrl, r.resources.map((x) => x.name)])).toEqual([[CLUSTER_TYPE, ["a", "b"]]]);
    expect(p2[0]!.versionInfo).not.toBe(c.versionInfo);
    const p3 = s.onSnapshot(S3);
    expect(p3.map((r) => r.typeUrl)).toEqual([ENDPOINT_TYPE]);
    expect(p3[0]!.versionInfo).not.toBe(e.versionInfo);
    expect(s.onSnapshot(S3)).toEqual([]);
  });

  test("a NACK is reported and answers nothing; `*` is wildcard for any type", () => {
    const s = new SotwStream(counter());
    const r = s.onRequest(sreq(ROUTE_TYPE, { resourceNames: ["*"] }), S1).responses[0]!;
    const nack = s.onRequest(sreq(ROUTE_TYPE, { responseNonce: r.nonce, resourceNames: ["*"], errorDetail: { code: 13, message: "bad" } }), S1);
    expect(nack).toEqual({ responses: [], events: [{ kind: "nack", typeUrl: ROUTE_TYPE, version: "", nonce: r.nonce, message: "bad" }] });
  });

  test("empty names for a non-wildcard type subscribe to nothing", () => {
    const s = new SotwStream(counter());
    expect(s.onRequest(sreq(ENDPOINT_TYPE), S1).responses).toEqual([]);
  });
});

const dreq = (typeUrl: string, o: Partial<DeltaRequest> = {}): DeltaRequest => ({
  typeUrl,
  subscribe: [],
  unsubscribe: [],
  initialVersions: {},
  responseNonce: "",
  ...o,
});

describe("Delta", () => {
  test("wildcard first request gets everything, then only differences", () => {
    const d = new DeltaStream(counter());
    const first = d.onRequest(dreq(CLUSTER_TYPE), S1).responses;
    expect(first.map((r) => [r.resources.map((x) => x.name), r.removed, r.systemVersionInfo])).toEqual([[["a", "b"], [], S1.version]]);
    expect(d.onRequest(dreq(CLUSTER_TYPE, { responseNonce: "n1" }), S1)).toEqual({
      responses: [],
      events: [{ kind: "ack", typeUrl: CLUSTER_TYPE, nonce: "n1" }],
    });
    expect(d.onSnapshot(S2).map((r) => r.resources.map((x) => x.name))).toEqual([["b"]]);
    expect(d.onSnapshot(S2)).toEqual([]);
    const gone = snap({ [CLUSTER_TYPE]: { b: "b2" } });
    expect(d.onSnapshot(gone).map((r) => [r.resources.length, r.removed])).toEqual([[0, ["a"]]]);
  });

  test("an empty wildcard type is still answered once; named types are not", () => {
    const d = new DeltaStream(counter());
    expect(d.onRequest(dreq(LISTENER_TYPE), S1).responses).toMatchObject([{ resources: [], removed: [] }]);
    expect(d.onRequest(dreq(ENDPOINT_TYPE), S1).responses).toEqual([]);
  });

  test("named subscription: missing names reported removed once; appear later when defined", () => {
    const d = new DeltaStream(counter());
    const r = d.onRequest(dreq(ENDPOINT_TYPE, { subscribe: ["a", "x"] }), S1).responses[0]!;
    expect([r.resources.map((x) => x.name), r.removed]).toEqual([["a"], ["x"]]);
    expect(d.onSnapshot(S2)).toEqual([]);
    const withX = snap({ [ENDPOINT_TYPE]: { a: "ea1", x: "ex" } });
    expect(d.onSnapshot(withX).map((p) => p.resources.map((x) => x.name))).toEqual([["x"]]);
  });

  test("initial_resource_versions: known versions not resent, vanished ones removed", () => {
    const d = new DeltaStream(counter());
    const known = S1.types.get(CLUSTER_TYPE)!.get("a")!.version;
    const r = d.onRequest(dreq(CLUSTER_TYPE, { initialVersions: { a: known, b: "old", z: "v" } }), S1).responses[0]!;
    expect([r.resources.map((x) => x.name), r.removed]).toEqual([["b"], ["z"]]);
  });

  test("unsubscribe stops pushes; resubscribing resends; NACK is reported", () => {
    const d = new DeltaStream(counter());
    d.onRequest(dreq(ENDPOINT_TYPE, { subscribe: ["a"] }), S1);
    expect(d.onRequest(dreq(ENDPOINT_TYPE, { unsubscribe: ["a"] }), S1).responses).toEqual([]);
    expect(d.onSnapshot(S3)).toEqual([]);
    const again = d.onRequest(dreq(ENDPOINT_TYPE, { subscribe: ["a"], responseNonce: "n1", errorDetail: { code: 13, message: "no" } }), S3);
    expect(again.events).toEqual([{ kind: "nack", typeUrl: ENDPOINT_TYPE, nonce: "n1", message: "no" }]);
    expect(again.responses.map((r) => r.resources.map((x) => x.name))).toEqual([["a"]]);
  });

  test("`*` unsubscribed ends wildcard and forgets unnamed resources", () => {
    const d = new DeltaStream(counter());
    d.onRequest(dreq(CLUSTER_TYPE, { subscribe: ["*"] }), S1);
    d.onRequest(dreq(CLUSTER_TYPE, { unsubscribe: ["*"], subscribe: ["a"] }), S1);
    expect(d.onSnapshot(S2)).toEqual([]); // b changed but is no longer subscribed
  });
});
