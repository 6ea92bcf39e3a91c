// The DER reader (src/lib/derread.ts) and the writers the local CA's certificates added to der.ts
// (names, times, named bits), on literal encodings from X.690 and RFC 5280.

import { describe, expect, test } from "bun:test";
import { children, readElement, readOid, DerReadError } from "../../src/lib/derread.ts";
import { directoryString, namedBits, oid, time } from "../../src/lib/der.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const bytes = (h: string) => new Uint8Array(Buffer.from(h.replace(/\s/g, ""), "hex"));

describe("reading", () => {
  test("object identifiers, first arcs 0/1/2 and multi-byte arcs", () => {
    for (const [h, dotted] of [
      ["0603551d11", "2.5.29.17"],
      ["06092a864886f70d01090e", "1.2.840.113549.1.9.14"],
      ["06082a8648ce3d040302", "1.2.840.10045.4.3.2"],
      ["0603883703", "2.999.3"],
      ["0603000102", "0.0.1.2"],
    ] as const) {
      const b = bytes(h);
      expect(readOid(b, readElement(b, 0))).toBe(dotted);
    }
  });

  test("elements and children: short and long lengths; the reader never runs past a parent", () => {
    const b = bytes("3081 05 0201 07 0500");
    const top = readElement(b, 0);
    expect(top).toEqual({ tag: 0x30, start: 0, content: 3, end: 8 });
    expect(children(b, top).map((e) => e.tag)).toEqual([0x02, 0x05]);
    for (const [h, msg] of [
      ["30", "truncated header at byte 0"],
      ["3080 0000", "indefinite length is not DER"],
      ["3085 0000000001 00", "length of 5 bytes"],
      ["3005 020100", "5 content bytes at byte 0 run past the end (5)"],
      ["3082 00", "truncated length"],
      ["1f01 00", "multi-byte tags"],
    ] as const) {
      expect(() => readElement(bytes(h), 0)).toThrow(DerReadError);
      expect(() => readElement(bytes(h), 0)).toThrow(msg);
    }
    // A child that would end past its parent's end, though within the buffer.
    const nested = bytes("3003 0203 010203");
    expect(() => children(nested, readElement(nested, 0, 5))).toThrow("run past the end (5)");
  });

  test("object identifiers that are not: empty, truncated arc, wrong tag", () => {
    for (const h of ["0600", "0602 2a86", "0201 00"]) {
      const b = bytes(h);
      expect(() => readOid(b, readElement(b, 0))).toThrow(DerReadError);
    }
  });

  test("what the writer writes, the reader reads back", () => {
    const b = oid("1.3.6.1.5.5.7.3.2");
    expect(readOid(b, readElement(b, 0))).toBe("1.3.6.1.5.5.7.3.2");
  });
});

describe("writing (certificate pieces)", () => {
  test("KeyUsage bits: trailing zero bits are unused bits (X.690 §11.2.2)", () => {
    expect(hex(namedBits([5, 6]))).toBe("03020106"); // keyCertSign | cRLSign
    expect(hex(namedBits([0, 2]))).toBe("030205a0"); // digitalSignature | keyEncipherment
    expect(hex(namedBits([8]))).toBe("0303070080"); // decipherOnly
    expect(hex(namedBits([]))).toBe("030100");
  });

  test("Time: UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 §4.1.2.5), whole seconds", () => {
    expect(Buffer.from(time(Date.UTC(2026, 10, 27, 21, 3, 40, 999))).toString("latin1")).toBe("\x17\x0d261127210340Z");
    expect(Buffer.from(time(Date.UTC(1950, 0, 1))).toString("latin1")).toBe("\x17\x0d500101000000Z");
    expect(Buffer.from(time(Date.UTC(2049, 11, 31, 23, 59, 59))).toString("latin1")).toBe("\x17\x0d491231235959Z");
    expect(Buffer.from(time(Date.UTC(2050, 0, 1))).toString("latin1")).toBe("\x18\x0f20500101000000Z");
    expect(() => time(NaN)).toThrow("out of range");
  });

  test("DirectoryString: PrintableString when printable, else UTF8String (as Go writes names)", () => {
    expect(hex(directoryString("cluster.local"))).toBe("130d" + Buffer.from("cluster.local").toString("hex"));
    expect(hex(directoryString("my_domain"))).toBe("0c09" + Buffer.from("my_domain").toString("hex"));
  });
});
