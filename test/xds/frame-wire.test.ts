// Wire-format edge cases of the scanner and the gRPC deframer, with hand-made bytes: every wire
// type, every truncation, the 10-byte varint limits, nested messages that end inside a field, and
// the exact error text and offset (operators read these in logs).

import { describe, expect, test } from "bun:test";
import { FrameError, checkMessage, peekResponseType, readVarint, repeatedStrings, requestTypeUrl } from "../../src/xds/frame.ts";
import { GrpcDeframer, grpcHeader } from "../../src/xds/grpcframe.ts";

const b = (...xs: (number | string)[]) => new Uint8Array(xs.flatMap((x) => (typeof x === "string" ? [...Buffer.from(x)] : [x])));
const str = (no: number, s: string) => [no * 8 + 2, s.length, s] as const;

function frameError(fn: () => unknown): { name: string; message: string; offset: number } {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof FrameError)) throw e;
    return { name: e.name, message: e.message, offset: e.offset };
  }
  throw new Error("no FrameError");
}

describe("whole messages: every wire type is skipped by its own length", () => {
  test("varint, fixed64, fixed32 and strings in one message", () => {
    const msg = b(0x08, 0x96, 0x01, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1d, 1, 2, 3, 4, ...str(4, "ab"), ...str(4, "cd"));
    expect(() => checkMessage(msg)).not.toThrow();
    expect(repeatedStrings(msg, 4)).toEqual(["ab", "cd"]);
    expect(requestTypeUrl(msg, false)).toBe("cd"); // the last occurrence, as protobuf merges
  });
  test("a request without a type_url has the empty type", () => {
    expect(requestTypeUrl(b(...str(3, "name")), false)).toBe("");
    expect(requestTypeUrl(b(), true)).toBe("");
  });
  test("a fixed field that ends exactly at the message end is whole", () => {
    expect(() => checkMessage(b(0x0d, 1, 2, 3, 4))).not.toThrow();
    expect(() => checkMessage(b(0x09, 1, 2, 3, 4, 5, 6, 7, 8))).not.toThrow();
  });
  test.each([
    ["fixed32 past the end", b(0x0d, 1, 2, 3), "fixed field 1 runs past the message end at byte 1", 1],
    ["fixed64 past the end", b(0x11, 1, 2, 3, 4, 5, 6, 7), "fixed field 2 runs past the message end at byte 1", 1],
    ["varint value cut off", b(0x08, 0x80), "truncated varint in field 1 at byte 1", 1],
    ["length cut off", b(0x12, 0x80), "truncated length of field 2 at byte 1", 1],
    ["tag cut off", b(0x08, 0x01, 0x80), "truncated field tag at byte 2", 2],
    ["field number 0", b(0x02, 0x00), "field number 0 at byte 0", 0],
    ["wire type 3 (group)", b(0x13), "field 2 has unsupported wire type 3 at byte 0", 0],
    ["string longer than the message", b(0x22, 0x05, 0x61), "field 4 length 5 runs past the message end at byte 1", 1],
  ])("%s", (_name, msg, message, offset) => {
    expect(frameError(() => checkMessage(msg))).toEqual({ name: "FrameError", message, offset });
  });
  test("a type_url that is not length-delimited is an error naming the field", () => {
    expect(frameError(() => requestTypeUrl(b(0x20, 0x01), false))).toEqual({ name: "FrameError", message: "field 4 should be a string at byte 1", offset: 1 });
  });
});

describe("varints at the 10-byte limit", () => {
  const ff9 = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
  test("a 10-byte varint ending in 1 is the largest valid one", () => {
    expect(() => checkMessage(b(0x08, ...ff9, 0x01))).not.toThrow();
  });
  test("a 10-byte varint ending in 2 overflows 64 bits", () => {
    expect(frameError(() => checkMessage(b(0x08, ...ff9, 0x02)))).toEqual({ name: "FrameError", message: "varint overflows 64 bits at byte 1", offset: 1 });
  });
  test("an 11th byte is never read", () => {
    const tenContinuations = Array(10).fill(0x80);
    expect(frameError(() => checkMessage(b(0x08, ...tenContinuations, 0x00)))).toEqual({
      name: "FrameError",
      message: "varint longer than 10 bytes at byte 1",
      offset: 1,
    });
  });
  test("values keep the first 56 bits (8 groups of 7)", () => {
    expect(readVarint(b(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 0, 9)).toEqual([2 ** 56 - 1, 9]);
  });
});

describe("peekResponseType on hand-made responses", () => {
  const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  const any = (...fields: (number | string)[]) => {
    const inner = b(...fields);
    return [0x12, inner.length, ...inner];
  };
  test("the Any's type_url is found after its value", () => {
    const msg = b(...any(...str(2, "x"), ...str(1, "a/b")), ...str(4, CDS));
    expect(peekResponseType(msg, msg.length, msg.length, false)).toBe("a/b");
  });
  test("an untyped first resource falls back to field 4, even when a later resource is typed", () => {
    const msg = b(...any(...str(2, "x")), ...any(...str(1, "a/second")), ...str(4, CDS));
    expect(peekResponseType(msg, msg.length, msg.length, false)).toBe(CDS);
  });
  test("Delta: a Resource without its Any falls back to field 4", () => {
    const resource = b(...str(3, "name-only"));
    const msg = b(0x12, resource.length, ...resource, ...str(4, CDS));
    expect(peekResponseType(msg, msg.length, msg.length, true)).toBe(CDS);
  });
  test("Delta: Resource.resource that is not a message is an error", () => {
    const resource = b(0x10, 0x01);
    const msg = b(0x12, resource.length, ...resource);
    expect(frameError(() => peekResponseType(msg, msg.length, msg.length, true))).toEqual({
      name: "FrameError",
      message: "Resource.resource should be a message at byte 3",
      offset: 3,
    });
  });
  test("resources that are not messages are an error", () => {
    const msg = b(0x10, 0x01);
    expect(frameError(() => peekResponseType(msg, msg.length, msg.length, false))).toEqual({
      name: "FrameError",
      message: "resources should be messages at byte 1",
      offset: 1,
    });
  });
  test.each([
    ["a tag", [0x80], "truncated field tag at byte 2"],
    ["a varint value", [0x08, 0x80], "truncated varint in field 1 at byte 3"],
    ["a length", [0x0a, 0x80], "truncated length of field 1 at byte 3"],
  ])("a nested message that ends inside %s is an error, not a read into the next field", (_n, inner, message) => {
    const msg = b(0x12, inner.length, ...inner, ...str(4, CDS));
    expect(frameError(() => peekResponseType(msg, msg.length, msg.length, false)).message).toBe(message);
  });
  test("a prefix that ends inside a two-byte tag or a varint value needs more bytes", () => {
    const msg = b(0x80, 0x01, 0x05, 0x08, 0x96, 0x01, ...str(4, CDS)); // field 16 varint, field 1 varint, type_url
    for (const n of [1, 4, 5]) expect(peekResponseType(msg.subarray(0, n), n, msg.length, false)).toBeNull();
    expect(peekResponseType(msg, msg.length, msg.length, false)).toBe(CDS);
  });
});

describe("gRPC deframer state", () => {
  function recorder() {
    const events: string[] = [];
    const d = new GrpcDeframer({
      onHeader: (c, len) => events.push(`header ${c ? "compressed" : "plain"} ${len}`),
      onBody: (x) => events.push(`body ${Buffer.from(x).toString()}`),
      onEnd: () => events.push("end"),
    });
    return { d, events };
  }
  test("idle only between messages", () => {
    const { d, events } = recorder();
    expect(d.idle).toBe(true);
    d.push(b(0, 0, 0));
    expect(d.idle).toBe(false); // inside a header
    d.push(b(0, 3, "a"));
    expect(d.idle).toBe(false); // inside a body
    d.push(b("bc"));
    expect(d.idle).toBe(true);
    expect(events).toEqual(["header plain 3", "body a", "body bc", "end"]);
  });
  test("an empty message ends at once, also as the last bytes pushed; only bit 0 means compressed", () => {
    const { d, events } = recorder();
    d.push(b(1, 0, 0, 0, 0));
    expect(events).toEqual(["header compressed 0", "end"]);
    expect(d.idle).toBe(true);
    d.push(b(2, 0, 0, 0, 1, "z"));
    expect(events.slice(2)).toEqual(["header plain 1", "body z", "end"]);
  });
  test("grpcHeader is flag 0 and a big-endian length", () => {
    expect([...grpcHeader(300)]).toEqual([0, 0, 0, 1, 44]);
    expect([...grpcHeader(0x01020304)]).toEqual([0, 1, 2, 3, 4]);
  });
});
