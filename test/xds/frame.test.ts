import { describe, expect, test } from "bun:test";
import { FrameError, checkMessage, peekResponseType, readVarint, repeatedStrings, requestTypeUrl } from "../../src/xds/frame.ts";
import { GrpcDeframer, MessageBuffer, grpcFrame } from "../../src/xds/grpcframe.ts";
import { TYPES } from "./harness.ts";

const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";

function sotw(r: { typeUrl: string; versionInfo?: string; resources: { typeUrl: string; value: Uint8Array }[] }): Buffer {
  return Buffer.from(TYPES.Res.encode(TYPES.Res.create({ ...r, nonce: "n" })).finish());
}
function delta(r: { typeUrl: string; resources: { typeUrl: string; value: Uint8Array }[] }): Buffer {
  return Buffer.from(
    TYPES.DeltaRes.encode(
      TYPES.DeltaRes.create({ typeUrl: r.typeUrl, nonce: "n", resources: r.resources.map((a, i) => ({ version: "1", name: `r${i}`, resource: a })) }),
    ).finish(),
  );
}

describe("readVarint", () => {
  test.each([
    [[0x00], 0, 1],
    [[0x7f], 127, 1],
    [[0x80, 0x01], 128, 2],
    [[0xac, 0x02], 300, 2],
    [[0xff, 0xff, 0xff, 0xff, 0x0f], 0xffffffff, 5],
  ])("%p -> %p", (bytes, value, next) => {
    expect(readVarint(new Uint8Array(bytes), 0, bytes.length)).toEqual([value, next]);
  });
  test("incomplete -> null; too long -> FrameError", () => {
    expect(readVarint(new Uint8Array([0x80]), 0, 1)).toBeNull();
    expect(() => readVarint(new Uint8Array(11).fill(0x80), 0, 11)).toThrow(FrameError);
  });
});

describe("peekResponseType", () => {
  const big = new Uint8Array(100_000).fill(3);
  const cases: [string, Buffer, boolean, string][] = [
    ["SotW: first resource's type", sotw({ typeUrl: CDS, versionInfo: "v", resources: [{ typeUrl: CDS, value: big }] }), false, CDS],
    ["SotW: first resource wins over field 4", sotw({ typeUrl: "x", resources: [{ typeUrl: LDS, value: big }] }), false, LDS],
    ["SotW: no resources -> field 4", sotw({ typeUrl: CDS, resources: [] }), false, CDS],
    ["Delta: Resource.resource type", delta({ typeUrl: CDS, resources: [{ typeUrl: CDS, value: big }] }), true, CDS],
    ["Delta: removals only -> field 4", delta({ typeUrl: LDS, resources: [] }), true, LDS],
    ["empty message -> no type", Buffer.alloc(0), false, ""],
  ];
  test.each(cases)("%s", (_n, msg, isDelta, want) => {
    expect(peekResponseType(msg, msg.length, msg.length, isDelta)).toBe(want);
  });
  // The scanner gets only the bytes that have arrived: a buffer cut at `avail`, so reading past it
  // is visible (undefined bytes) instead of silently seeing the rest of the message.
  test("decides early on a large message: within the first 200 bytes", () => {
    const msg = sotw({ typeUrl: CDS, versionInfo: "v1", resources: [{ typeUrl: CDS, value: big }] });
    let decidedAt = -1;
    for (let n = 0; n <= msg.length && decidedAt < 0; n++) if (peekResponseType(msg.subarray(0, n), n, msg.length, false) !== null) decidedAt = n;
    expect(decidedAt).toBeGreaterThan(0);
    expect(decidedAt).toBeLessThan(200);
  });
  test("every prefix of a message says 'need more' or the final answer, never something else", () => {
    for (const [, msg, isDelta, want] of cases) {
      for (let n = 0; n <= Math.min(msg.length, 400); n++) {
        const t = peekResponseType(Uint8Array.prototype.slice.call(msg, 0, n), n, msg.length, isDelta);
        if (t !== null) expect(t).toBe(want);
      }
    }
  });
  test("a prefix that ends inside a type_url string needs more bytes", () => {
    const msg = sotw({ typeUrl: CDS, resources: [{ typeUrl: CDS, value: new Uint8Array(10) }] });
    const at = msg.indexOf(Buffer.from(CDS)); // first type_url: the resource's
    for (const n of [at, at + 1, at + CDS.length - 1]) expect(peekResponseType(msg.subarray(0, n), n, msg.length, false)).toBeNull();
    expect(peekResponseType(msg.subarray(0, at + CDS.length), at + CDS.length, msg.length, false)).toBe(CDS);
  });
  test.each([
    ["field number 0", [0x02, 0x00]],
    ["length past the end", [0x12, 0x10, 0x0a]],
    ["group wire type", [0x13]],
    ["truncated tag at the end", [0x80]],
  ])("malformed: %s", (_n, bytes) => {
    const b = new Uint8Array(bytes);
    expect(() => peekResponseType(b, b.length, b.length, false)).toThrow(FrameError);
  });
});

describe("requests and whole-message helpers", () => {
  test("requestTypeUrl for SotW (field 4) and Delta (field 2)", () => {
    expect(requestTypeUrl(TYPES.Req.encode(TYPES.Req.create({ typeUrl: CDS, versionInfo: "1", resourceNames: ["a"] })).finish(), false)).toBe(CDS);
    expect(requestTypeUrl(TYPES.DeltaReq.encode(TYPES.DeltaReq.create({ typeUrl: LDS, resourceNamesSubscribe: ["*"] })).finish(), true)).toBe(LDS);
    expect(() => requestTypeUrl(new Uint8Array([0x22, 0x05, 0x61]), false)).toThrow(/field 4 length 5 runs past the message end/);
  });
  test("repeatedStrings and checkMessage", () => {
    const m = Buffer.from([0x92, 0x02, 0x01, 0x61, 0x08, 0x01, 0x92, 0x02, 0x02, 0x62, 0x63]);
    expect(repeatedStrings(m, 34)).toEqual(["a", "bc"]);
    expect(() => checkMessage(m)).not.toThrow();
    expect(() => checkMessage(m.subarray(0, 10))).toThrow(FrameError);
  });
});

describe("gRPC framing", () => {
  test("deframer splits messages across arbitrary chunk boundaries without copying", () => {
    const msgs = [Buffer.from("hello"), Buffer.alloc(0), Buffer.alloc(70_000, 9), Buffer.from("x")];
    const wire = Buffer.concat(msgs.map((m) => grpcFrame(m)));
    for (const step of [1, 3, 5, 7, 1000, wire.length]) {
      const out: Buffer[] = [];
      let cur: MessageBuffer | undefined;
      const d = new GrpcDeframer({
        onHeader: (c, len) => (expect(c).toBe(false), (cur = new MessageBuffer(len))),
        onBody: (b) => cur!.append(b),
        onEnd: () => out.push(Buffer.from(cur!.view())),
      });
      for (let i = 0; i < wire.length; i += step) d.push(wire.subarray(i, i + step));
      expect(d.idle).toBe(true);
      expect(out.map((b) => b.toString("hex"))).toEqual(msgs.map((b) => b.toString("hex")));
    }
  });
});
