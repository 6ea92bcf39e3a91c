// The CA client's own protobuf reading and writing, checked against protobufjs built from
// proto/ca.proto (an independent implementation) and against hand-assembled bytes.

import { describe, expect, test } from "bun:test";
import { caCodec } from "../../src/ca/proto.ts";
import { CREATE_CERTIFICATE_PATH, decodeCertificateResponse, encodeCertificateRequest, type CertificateRequest } from "../../src/ca/wire.ts";

const codec = caCodec();

test("the method's path: package istio.v1.auth, service IstioCertificateService (proto/ca.proto)", () => {
  expect(CREATE_CERTIFICATE_PATH).toBe("/istio.v1.auth.IstioCertificateService/CreateCertificate");
});

describe("IstioCertificateRequest", () => {
  test("what protobufjs reads back: CSR, validity, CertSigner metadata", () => {
    const req = {
      csr: "-----BEGIN CERTIFICATE REQUEST-----\nx\n-----END CERTIFICATE REQUEST-----\n",
      validityDuration: 86400,
      metadata: { CertSigner: "signer-é", Other: "" },
    };
    expect(codec.decodeRequest(Buffer.from(encodeCertificateRequest(req)))).toEqual(req);
  });

  test("byte for byte as protobufjs writes it", () => {
    const reqs: CertificateRequest[] = [
      { csr: "c", validityDuration: 1 },
      { csr: "csr", validityDuration: 2 ** 40, metadata: { CertSigner: "s" } },
      { csr: "a".repeat(300), validityDuration: 127, metadata: {} },
    ];
    for (const req of reqs) {
      expect(Buffer.from(encodeCertificateRequest(req)).toString("hex")).toBe(codec.encodeRequest(req).toString("hex"));
    }
  });

  test("proto3 defaults are left out (protobufjs writes them; both read the same)", () => {
    expect(encodeCertificateRequest({ csr: "", validityDuration: 0 }).length).toBe(0);
    expect(codec.decodeRequest(Buffer.alloc(0))).toEqual({ csr: "", validityDuration: 0, metadata: {} });
  });

  test("hand-assembled: field 1 csr, field 3 varint, field 4 Struct{fields{key, Value{string_value}}}", () => {
    const got = Buffer.from(encodeCertificateRequest({ csr: "ab", validityDuration: 300, metadata: { k: "v" } })).toString("hex");
    // 0a 02 'a' 'b' | 18 ac 02 | 22 0a (0a 08 (0a 01 'k' 12 03 (1a 01 'v')))
    expect(got).toBe("0a026162" + "18ac02" + "220a" + "0a08" + "0a016b" + "1203" + "1a0176");
  });

  test("a negative or fractional validity is refused, naming the field", () => {
    expect(() => encodeCertificateRequest({ csr: "c", validityDuration: -1 })).toThrow("validity_duration -1 is not a whole number of seconds ≥ 0");
    expect(() => encodeCertificateRequest({ csr: "c", validityDuration: 1.5 })).toThrow("validity_duration 1.5");
  });
});

describe("IstioCertificateResponse", () => {
  test("the chain protobufjs wrote, in order", () => {
    const certChain = ["leaf\n", "intermediate\n", "root ✓\n"];
    expect(decodeCertificateResponse(codec.encodeResponse({ certChain }))).toEqual({ certChain });
  });

  test("empty message: empty chain; unknown fields of every wire type are skipped", () => {
    expect(decodeCertificateResponse(new Uint8Array(0))).toEqual({ certChain: [] });
    // field 2 varint 5, field 3 fixed64, field 1 "x", field 4 fixed32, field 5 bytes
    const b = Buffer.from("1005" + "190102030405060708" + "0a0178" + "2501020304" + "2a00", "hex");
    expect(decodeCertificateResponse(b)).toEqual({ certChain: ["x"] });
  });

  test("cert_chain with the wrong wire type, bad UTF-8 or a truncated field is an error", () => {
    expect(() => decodeCertificateResponse(Buffer.from("0801", "hex"))).toThrow("cert_chain has wire type 0, want length-delimited");
    expect(() => decodeCertificateResponse(Buffer.from("0a01ff", "hex"))).toThrow();
    expect(() => decodeCertificateResponse(Buffer.from("0a0561", "hex"))).toThrow("runs past the end");
  });
});
