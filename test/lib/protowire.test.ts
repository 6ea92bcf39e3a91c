// The shared protobuf wire reader/writer (src/lib/protowire.ts) on its own: varint limits, field
// number range, wire types, (deprecated) groups, lengths past the end, int32 sign extension, and
// MessageWriter's length prefixes at the varint size boundaries. Expected bytes are written out by
// hand from the protobuf encoding spec or produced by protobufjs's own Writer/Reader.
import { describe, expect, test } from "bun:test";
import protobuf from "protobufjs";
import { MessageWriter, WireError, encodeFields, int32Of, parseFields, readVarint, stringField } from "../../src/lib/protowire.ts";

const bytes = (...b: number[]) => Uint8Array.from(b);
const refused = (b: Uint8Array) => {
  try {
    parseFields(b);
  } catch (e) {
    expect(e).toBeInstanceOf(WireError);
    return (e as Error).message;
  }
  throw new Error("not refused");
};

describe("varints", () => {
  test("the largest 10-byte varint (2^64 - 1) is read; its 10th byte may carry only the 64th bit", () => {
    const max = bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
    expect(readVarint(max, 0)[1]).toBe(10);
    expect(() => readVarint(bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), 0)).toThrow("varint overflows 64 bits at byte 0");
  });

  test("an 11-byte varint is refused as an overflow; a cut-off one as truncated, naming its byte", () => {
    const eleven = bytes(0x08, ...Array(10).fill(0x80), 0x01);
    expect(refused(eleven)).toBe("varint overflows 64 bits at byte 1");
    expect(refused(bytes(0x08, 0x80))).toBe("truncated varint at byte 1");
    expect(refused(bytes(0x80))).toBe("truncated varint at byte 0");
  });

  test("small values and the 7-bit boundaries", () => {
    expect(readVarint(bytes(0x7f), 0)).toEqual([127, 1]);
    expect(readVarint(bytes(0x80, 0x01), 0)).toEqual([128, 2]);
    expect(readVarint(bytes(0x00, 0xac, 0x02), 1)).toEqual([300, 3]);
  });
});

describe("field structure", () => {
  test("field numbers 1 and 2^29 - 1 are read; 0 and 2^29 are refused", () => {
    // key = (2^29 - 1) << 3 | 0 = 0xfffffff8: f8 ff ff ff 0f
    expect(parseFields(bytes(0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01)).map((f) => f.no)).toEqual([536_870_911]);
    expect(parseFields(bytes(0x08, 0x01)).map((f) => f.no)).toEqual([1]);
    expect(refused(bytes(0x00, 0x01))).toBe("field number 0 out of range at byte 0");
    // key = 2^29 << 3 = 2^32: 80 80 80 80 10
    expect(refused(bytes(0x80, 0x80, 0x80, 0x80, 0x10, 0x01))).toBe("field number 536870912 out of range at byte 0");
  });

  test("wire types 6 and 7 and a stray end-group are refused, naming field and byte", () => {
    expect(refused(bytes(0x08, 0x01, 0x0e))).toBe("field 1 has invalid wire type 6 at byte 2");
    expect(refused(bytes(0x0f))).toBe("field 1 has invalid wire type 7 at byte 0");
    expect(refused(bytes(0x0c))).toBe("field 1 has an end-group tag without its start at byte 0");
  });

  test("a length past the end is refused without allocating it, however large", () => {
    expect(refused(bytes(0x0a, 0x05, 0x61))).toBe("field 1 runs past the end of the message at byte 0");
    // A length of 2^49: read as a number, compared, never allocated.
    expect(refused(bytes(0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01))).toBe("field 2 runs past the end of the message at byte 0");
    expect(refused(bytes(0x09, 1, 2, 3))).toBe("field 1 runs past the end of the message at byte 0"); // fixed64 short
    expect(refused(bytes(0x0d, 1, 2, 3))).toBe("field 1 runs past the end of the message at byte 0"); // fixed32 short
  });

  test("a length of exactly what is left is read", () => {
    const f = parseFields(bytes(0x0a, 0x02, 0x61, 0x62));
    expect(f).toHaveLength(1);
    expect(Buffer.from(f[0]!.data).toString()).toBe("ab");
  });
});

describe("groups (deprecated, skipped like any unknown field)", () => {
  // Field 9 as a group: start 0x4b (9 << 3 | 3), end 0x4c (9 << 3 | 4).
  test("a group, nested groups included, is one field; what follows it is read", () => {
    const msg = bytes(0x4b, 0x08, 0x01, 0x53, 0x10, 0x02, 0x54, 0x4c, 0x0a, 0x01, 0x7a); // 9{1:1, 10{2:2}} then 1:"z"
    const f = parseFields(msg);
    expect(f.map((x) => [x.no, x.wire])).toEqual([
      [9, 3],
      [1, 2],
    ]);
    expect([...f[0]!.data]).toEqual([0x08, 0x01, 0x53, 0x10, 0x02, 0x54]);
    expect(Buffer.from(f[1]!.data).toString()).toBe("z");
    // protobufjs's reader skips the same group and lands on the same next field.
    const r = protobuf.Reader.create(msg);
    r.skipType(r.uint32() & 7);
    expect(r.pos).toBe(8);
  });

  test("a group is written back byte for byte", () => {
    const msg = bytes(0x4b, 0x08, 0x01, 0x4c, 0x10, 0x05);
    expect([...encodeFields(parseFields(msg))]).toEqual([...msg]);
  });

  test("an unclosed group, a mismatched end, or groups nested past 100 are refused", () => {
    expect(refused(bytes(0x4b, 0x08, 0x01))).toBe("group 9 is not closed before the end of the message");
    expect(refused(bytes(0x4b, 0x54))).toBe("end of group 10 does not match its start at byte 1");
    const deep = (n: number) => bytes(...Array(n).fill(0x4b), ...Array(n).fill(0x4c));
    expect(parseFields(deep(100))).toHaveLength(1);
    expect(refused(deep(101))).toBe("groups nested deeper than 100 at byte 100");
  });
});

test("a string keeps a leading byte-order mark (it is part of the value, as protobufjs and Go read it)", () => {
  const f = parseFields(bytes(0x0a, 0x04, 0xef, 0xbb, 0xbf, 0x61));
  expect(stringField(f, 1)).toBe("\uFEFFa");
  expect(protobuf.Reader.create(bytes(0x04, 0xef, 0xbb, 0xbf, 0x61)).string()).toBe("\uFEFFa");
  expect(() => stringField(parseFields(bytes(0x0a, 0x01, 0xff)), 1)).toThrow("field 1 is not valid UTF-8");
});

describe("int32Of", () => {
  const field = (...b: number[]) => parseFields(bytes(0x08, ...b))[0]!;
  test("a negative int32 is its 10-byte sign extension; the low 32 bits are the value", () => {
    expect(int32Of(field(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))).toBe(-1);
    expect(int32Of(field(0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))).toBe(-5);
    expect(int32Of(field(0x80, 0x80, 0x80, 0x80, 0x08))).toBe(-2147483648); // 2^31 wraps
    expect(int32Of(field(0xff, 0xff, 0xff, 0xff, 0x07))).toBe(2147483647);
    expect(int32Of(field(0x0d))).toBe(13);
    // protobufjs agrees on the negative one.
    expect(protobuf.Reader.create(bytes(0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)).int32()).toBe(-5);
  });

  test("a length-delimited field is not an int32", () => {
    expect(() => int32Of(parseFields(bytes(0x0a, 0x00))[0]!)).toThrow("field 1 should be a varint");
  });
});

describe("MessageWriter", () => {
  // Lengths whose prefix is 1, 2 and 3 bytes, at each boundary.
  for (const n of [0, 1, 127, 128, 16_383, 16_384]) {
    test(`a ${n}-byte field is written as protobufjs's Writer writes it`, () => {
      const data = Buffer.alloc(n, 0x61);
      const ours = new MessageWriter().bytes(2, data).bytes(3, "é").finish();
      const theirs = protobuf.Writer.create().uint32(0x12).bytes(data).uint32(0x1a).string("é").finish();
      expect(Buffer.compare(ours, Buffer.from(theirs))).toBe(0);
      expect(ours.length).toBe(n + (n < 128 ? 1 : n < 16_384 ? 2 : 3) + 1 + 1 + 2 + 1);
    });
  }

  test("nested messages carry their own length, an empty one included", () => {
    const inner = new MessageWriter().bytes(1, "ab");
    const out = new MessageWriter().message(2, inner).message(4, new MessageWriter()).finish();
    expect([...out]).toEqual([0x12, 0x04, 0x0a, 0x02, 0x61, 0x62, 0x22, 0x00]);
  });

  test("a nested writer changed after it was added is caught at finish, never written short", () => {
    const inner = new MessageWriter();
    const outer = new MessageWriter().message(1, inner);
    inner.bytes(1, "late");
    expect(() => outer.finish()).toThrow("message writer miscounted");
  });
});
