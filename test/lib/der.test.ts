// The DER writer (src/lib/der.ts) against X.690's encodings, written out as bytes here.

import { describe, expect, test } from "bun:test";
import { bitString, boolean, DerError, octetString, oid, printableString, smallInteger, tlv, unsignedInteger } from "../../src/lib/der.ts";
import { ecdsaSigValue } from "../../src/ca/csr.ts";
import { CaError } from "../../src/ca/errors.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("lengths: short form below 128, else the fewest bytes (X.690 §8.1.3, §10.1)", () => {
  test.each([
    [0, "0400"],
    [127, "047f"],
    [128, "048180"],
    [255, "0481ff"],
    [256, "04820100"],
    [65535, "0482ffff"],
    [65536, "0483010000"],
  ])("%d", (n, header) => {
    const out = tlv(0x04, new Uint8Array(n));
    expect(hex(out.subarray(0, header.length / 2))).toBe(header);
    expect(out.length).toBe(header.length / 2 + n);
  });
});

describe("object identifiers", () => {
  test.each([
    ["2.5.4.10", "060355040a"],
    ["2.5.29.17", "0603551d11"],
    ["1.2.840.113549.1.9.14", "06092a864886f70d01090e"],
    ["1.2.840.113549.1.1.11", "06092a864886f70d01010b"],
    ["1.2.840.10045.4.3.3", "06082a8648ce3d040303"],
    ["2.999.3", "0603883703"], // X.690 §8.19.5's example: the first two arcs above 127
  ])("%s", (dotted, want) => expect(hex(oid(dotted))).toBe(want));

  test.each(["", "1", "3.1", "1.40", "1.2.x", "1..2", "1.2.-3"])("%j is refused", (dotted) => {
    expect(() => oid(dotted)).toThrow(DerError);
    expect(() => oid(dotted)).toThrow(`object identifier "${dotted}" is not valid`);
  });
});

describe("values", () => {
  test("BOOLEAN TRUE is 0xFF, FALSE 0x00", () => {
    expect(hex(boolean(true))).toBe("0101ff");
    expect(hex(boolean(false))).toBe("010100");
  });
  test("BIT STRING of whole bytes: no unused bits", () => expect(hex(bitString(Uint8Array.of(1, 2)))).toBe("0303000102"));
  test("OCTET STRING", () => expect(hex(octetString(Uint8Array.of(0xab)))).toBe("0401ab"));
  test('PrintableString, empty as Go writes Organization [""]', () => {
    expect(hex(printableString(""))).toBe("1300");
    expect(hex(printableString("O=a b"))).toBe("13054f3d612062");
    expect(() => printableString("a_b")).toThrow('"a_b" has characters a PrintableString cannot hold');
  });
  test("small INTEGERs only where one is meant", () => {
    expect(hex(smallInteger(0))).toBe("020100");
    expect(() => smallInteger(128)).toThrow(DerError);
  });
  test.each([
    ["7f", "02017f"],
    ["80", "02020080"], // high bit set: a 0x00 keeps it positive
    ["000001", "020101"], // leading zeros dropped
    ["0080", "02020080"], // ... but the one that keeps it positive
    ["0000", "020100"],
    ["", "020100"],
  ])("unsigned INTEGER %j", (bytes, want) => expect(hex(unsignedInteger(Buffer.from(bytes, "hex")))).toBe(want));
});

describe("ECDSA: WebCrypto's r||s as Ecdsa-Sig-Value", () => {
  test("r with leading zero bytes, s with its high bit set (P-256 widths)", () => {
    const r = "00007f" + "11".repeat(29);
    const s = "80" + "01".repeat(31);
    const want = "3043" + "021e7f" + "11".repeat(29) + "02210080" + "01".repeat(31);
    expect(hex(ecdsaSigValue(Buffer.from(r + s, "hex"), 32))).toBe(want);
  });
  test("P-384 widths, both plain", () => {
    const r = "7f".repeat(48);
    const s = "01".repeat(48);
    expect(hex(ecdsaSigValue(Buffer.from(r + s, "hex"), 48))).toBe("3064" + "0230" + r + "0230" + s);
  });
  test("a signature of the wrong width is refused", () => {
    expect(() => ecdsaSigValue(new Uint8Array(63), 32)).toThrow(CaError);
    expect(() => ecdsaSigValue(new Uint8Array(63), 32)).toThrow("CSR: ECDSA signature of 63 bytes, want 64");
  });
});
