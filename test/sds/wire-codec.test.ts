// The SDS server's wire codec (src/sds/wire.ts) held to two independent readings: requests are
// encoded by protobufjs from Envoy's own API protos (node, metadata and all) and decoded both by
// the wire codec and by the schema-built codec of our protos (src/sds/proto.ts, protobufjs): both
// must give the same literal value. Every Secret and response the server writes is decoded with
// Envoy's protos to literal fields. Malformed input is refused naming the message, field and byte.
import { describe, expect, test } from "bun:test";
import { sdsCodec } from "../../src/sds/proto.ts";
import { SECRET_TYPE_URL, decodeDeltaDiscoveryRequest, decodeDiscoveryRequest, encodeSecret, sdsWireCodec, type SecretResource } from "../../src/sds/wire.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const envoy = envoyProtoRoot();
const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
const DReq = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
const Res = envoy.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
const DRes = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryResponse");
const Secret = envoy.lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");
const reference = sdsCodec();

const sotw = (o: Record<string, unknown>) => Req.encode(Req.fromObject(o)).finish();
const delta = (o: Record<string, unknown>) => DReq.encode(DReq.fromObject(o)).finish();
const cat = (...parts: Uint8Array[]) => Buffer.concat(parts);
const raw = (...b: number[]) => Uint8Array.from(b);

const NODE = {
  id: "sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local",
  cluster: "app.default",
  metadata: { fields: { ISTIO_VERSION: { string_value: "1.24.0" }, LABELS: { struct_value: { fields: { app: { string_value: "app" } } } } } },
  user_agent_name: "envoy",
};
// Fields no SDS request defines, of every wire type: varint 10, fixed64 8, fixed32 15, length-delimited 100, a group 9.
const UNKNOWN = raw(0x50, 0x96, 0x01, 0x41, 1, 2, 3, 4, 5, 6, 7, 8, 0x7d, 1, 2, 3, 4, 0xa2, 0x06, 0x02, 0x68, 0x69, 0x4b, 0x08, 0x01, 0x4c);

/** Both decoders give `want` (the wire codec and protobufjs with our protos). */
function bothSotw(bytes: Uint8Array, want: unknown): void {
  expect(decodeDiscoveryRequest(bytes)).toEqual(want as never);
  expect(reference.decodeRequest(bytes)).toEqual(want as never);
}
function bothDelta(bytes: Uint8Array, want: unknown): void {
  expect(decodeDeltaDiscoveryRequest(bytes)).toEqual(want as never);
  expect(reference.decodeDeltaRequest(bytes)).toEqual(want as never);
}

const EMPTY_SOTW = { versionInfo: "", resourceNames: [], typeUrl: "", responseNonce: "" };
const EMPTY_DELTA = { typeUrl: "", resourceNamesSubscribe: [], resourceNamesUnsubscribe: [], initialResourceVersions: {}, responseNonce: "" };

describe("DiscoveryRequest: the wire codec reads what protobufjs reads", () => {
  test("an empty message", () => bothSotw(new Uint8Array(0), EMPTY_SOTW));

  test("Envoy's first request: node (skipped), type_url, resource_names", () =>
    bothSotw(sotw({ node: NODE, type_url: SECRET_TYPE_URL, resource_names: ["default"] }), {
      ...EMPTY_SOTW,
      typeUrl: SECRET_TYPE_URL,
      resourceNames: ["default"],
    }));

  test("an ACK: version_info, response_nonce, several names in order", () =>
    bothSotw(
      sotw({ version_info: "2026-11-24T15:00:00Z/3", response_nonce: "n-3", type_url: SECRET_TYPE_URL, resource_names: ["default", "ROOTCA", "default"] }),
      {
        versionInfo: "2026-11-24T15:00:00Z/3",
        responseNonce: "n-3",
        typeUrl: SECRET_TYPE_URL,
        resourceNames: ["default", "ROOTCA", "default"],
      },
    ));

  test("a NACK: error_detail with code, message and details (skipped)", () =>
    bothSotw(
      sotw({
        response_nonce: "n-4",
        resource_names: ["default"],
        error_detail: {
          code: 13,
          message: "bad cert: ∅",
          details: [{ type_url: "type.googleapis.com/google.protobuf.StringValue", value: raw(0x0a, 0x01, 0x78) }],
        },
      }),
      { ...EMPTY_SOTW, responseNonce: "n-4", resourceNames: ["default"], errorDetail: { code: 13, message: "bad cert: ∅" } },
    ));

  test("a negative code (a 10-byte varint) and an empty error_detail (present, all defaults)", () => {
    bothSotw(sotw({ error_detail: { code: -5, message: "m" } }), { ...EMPTY_SOTW, errorDetail: { code: -5, message: "m" } });
    bothSotw(raw(0x32, 0x00), { ...EMPTY_SOTW, errorDetail: { code: 0, message: "" } });
  });

  test("non-ASCII names, a leading byte-order mark kept", () =>
    bothSotw(sotw({ resource_names: ["file-root:/etc/ç€𝄞.pem", "\uFEFFdefault"] }), {
      ...EMPTY_SOTW,
      resourceNames: ["file-root:/etc/ç€𝄞.pem", "\uFEFFdefault"],
    }));

  test("unknown fields of every wire type, before, between and after, are skipped", () => {
    const body = sotw({ version_info: "v", resource_names: ["a", "b"] });
    bothSotw(cat(UNKNOWN, body.subarray(0, 3), UNKNOWN, body.subarray(3), UNKNOWN), { ...EMPTY_SOTW, versionInfo: "v", resourceNames: ["a", "b"] });
  });

  test("a singular field repeated: the last wins", () => {
    const twice = cat(sotw({ version_info: "first", type_url: "t1" }), sotw({ version_info: "second" }));
    bothSotw(twice, { ...EMPTY_SOTW, versionInfo: "second", typeUrl: "t1" });
  });

  test("error_detail repeated: merged, as protobuf specifies (and Go, Istio's agent, does); protobufjs keeps only the last", () => {
    const merged = cat(sotw({ error_detail: { code: 3, message: "one" } }), sotw({ error_detail: { message: "two" } }));
    expect(decodeDiscoveryRequest(merged).errorDetail).toEqual({ code: 3, message: "two" });
    expect(reference.decodeRequest(merged).errorDetail).toEqual({ code: 0, message: "two" });
    const d = cat(delta({ error_detail: { code: 3 } }), delta({ error_detail: { message: "two" } }));
    expect(decodeDeltaDiscoveryRequest(d).errorDetail).toEqual({ code: 3, message: "two" });
  });

  test("maximum sizes: a 4 MiB name, and 100,000 names", () => {
    const big = "x".repeat(4 * 1024 * 1024 - 16);
    bothSotw(sotw({ resource_names: [big] }), { ...EMPTY_SOTW, resourceNames: [big] });
    const many = Array.from({ length: 100_000 }, (_, i) => `file-root:/c/${i}`);
    bothSotw(sotw({ resource_names: many }), { ...EMPTY_SOTW, resourceNames: many });
  });
});

describe("DeltaDiscoveryRequest: the wire codec reads what protobufjs reads", () => {
  test("an empty message", () => bothDelta(new Uint8Array(0), EMPTY_DELTA));

  test("a reconnect: node, subscribe, initial_resource_versions", () =>
    bothDelta(
      delta({
        node: NODE,
        type_url: SECRET_TYPE_URL,
        resource_names_subscribe: ["default", "ROOTCA"],
        initial_resource_versions: { default: "v1", ROOTCA: "v2" },
      }),
      { ...EMPTY_DELTA, typeUrl: SECRET_TYPE_URL, resourceNamesSubscribe: ["default", "ROOTCA"], initialResourceVersions: { default: "v1", ROOTCA: "v2" } },
    ));

  test("unsubscribe, response_nonce, error_detail", () =>
    bothDelta(delta({ resource_names_unsubscribe: ["a", "b"], response_nonce: "n", error_detail: { code: 2, message: "no" } }), {
      ...EMPTY_DELTA,
      resourceNamesUnsubscribe: ["a", "b"],
      responseNonce: "n",
      errorDetail: { code: 2, message: "no" },
    }));

  test("map entries: a missing key or value is empty, a repeated key keeps the last, unknown entry fields are skipped", () => {
    // field 5 entries: {key "a", value "1"}, {value "2"} (key ""), {key "b"} (value ""), {key "a", value "3", 9: varint}
    const entries = raw(
      ...[0x2a, 0x06, 0x0a, 0x01, 0x61, 0x12, 0x01, 0x31],
      ...[0x2a, 0x03, 0x12, 0x01, 0x32],
      ...[0x2a, 0x03, 0x0a, 0x01, 0x62],
      ...[0x2a, 0x08, 0x0a, 0x01, 0x61, 0x12, 0x01, 0x33, 0x48, 0x01],
    );
    bothDelta(cat(entries, UNKNOWN), { ...EMPTY_DELTA, initialResourceVersions: { a: "3", "": "2", b: "" } });
  });

  test('a key "__proto__" is an own entry, never the map\'s prototype', () => {
    const r = decodeDeltaDiscoveryRequest(raw(0x2a, 0x0f, 0x0a, 0x09, ...Buffer.from("__proto__"), 0x12, 0x02, 0x76, 0x31));
    expect(Object.getPrototypeOf(r.initialResourceVersions)).toBe(Object.prototype);
    expect(Object.entries(r.initialResourceVersions)).toEqual([["__proto__", "v1"]]);
  });
});

describe("malformed requests are refused, naming what is wrong", () => {
  const refusal = (decode: (b: Uint8Array) => unknown, b: Uint8Array): string => {
    try {
      decode(b);
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error("accepted");
  };
  test.each([
    ["a truncated varint", raw(0x0a, 0x80), "DiscoveryRequest: truncated varint at byte 1"],
    ["a length past the end", raw(0x1a, 0x7f, 0x41), "DiscoveryRequest: field 3 runs past the end of the message at byte 0"],
    [
      "a 10-byte varint overflowing 64 bits",
      raw(0x38, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
      "DiscoveryRequest: varint overflows 64 bits at byte 1",
    ],
    ["resource_names as a varint", raw(0x18, 0x01), "DiscoveryRequest.resource_names has wire type 0, want length-delimited (2)"],
    ["node as a fixed32", raw(0x15, 1, 2, 3, 4), "DiscoveryRequest.node has wire type 5, want length-delimited (2)"],
    ["error_detail.code as a string", raw(0x32, 0x03, 0x0a, 0x01, 0x41), "DiscoveryRequest.error_detail.code has wire type 2, want varint (0)"],
    ["error_detail cut short inside", raw(0x32, 0x02, 0x12, 0x05), "DiscoveryRequest.error_detail: field 2 runs past the end of the message at byte 0"],
    [
      "error_detail.details malformed",
      raw(0x32, 0x04, 0x1a, 0x02, 0x0a, 0x09),
      "DiscoveryRequest.error_detail.details: field 1 runs past the end of the message at byte 0",
    ],
    ["a name that is not UTF-8", raw(0x1a, 0x02, 0xc3, 0x28), "DiscoveryRequest.resource_names is not valid UTF-8"],
    ["field number 0", raw(0x02, 0x00), "DiscoveryRequest: field number 0 out of range at byte 0"],
  ])("SotW: %s", (_what, bytes, message) => {
    expect(refusal(decodeDiscoveryRequest, bytes)).toBe(message);
  });

  test.each([
    ["a truncated varint", raw(0x12, 0xff), "DeltaDiscoveryRequest: truncated varint at byte 1"],
    ["subscribe as a varint", raw(0x18, 0x01), "DeltaDiscoveryRequest.resource_names_subscribe has wire type 0, want length-delimited (2)"],
    [
      "a map entry cut short",
      raw(0x2a, 0x02, 0x0a, 0x05),
      "DeltaDiscoveryRequest.initial_resource_versions: field 1 runs past the end of the message at byte 0",
    ],
    [
      "a map value as a varint",
      raw(0x2a, 0x02, 0x10, 0x01),
      "DeltaDiscoveryRequest.initial_resource_versions value has wire type 0, want length-delimited (2)",
    ],
    ["a map entry as a varint", raw(0x28, 0x01), "DeltaDiscoveryRequest.initial_resource_versions has wire type 0, want length-delimited (2)"],
    ["error_detail as a varint", raw(0x38, 0x01), "DeltaDiscoveryRequest.error_detail has wire type 0, want length-delimited (2)"],
  ])("Delta: %s", (_what, bytes, message) => {
    expect(refusal(decodeDeltaDiscoveryRequest, bytes)).toBe(message);
  });
});

describe("what the server writes, read with Envoy's protos", () => {
  const tls: SecretResource = { name: "default", kind: "tls", certificateChain: "-----CHAIN-----\n", privateKey: "-----KEY-----\n" };
  const decodeSecret = (b: Uint8Array) => Secret.toObject(Secret.decode(b), { bytes: String, defaults: false }) as Record<string, any>;

  test("a tiny Secret, byte for byte (worked out by hand from the field numbers)", () => {
    // 0a 01 'a' | 12 0a [ 0a 03 [12 01 'C'] 12 03 [12 01 'K'] ]
    expect([...encodeSecret({ name: "a", kind: "tls", certificateChain: "C", privateKey: "K" })]).toEqual([
      0x0a, 0x01, 0x61, 0x12, 0x0a, 0x0a, 0x03, 0x12, 0x01, 0x43, 0x12, 0x03, 0x12, 0x01, 0x4b,
    ]);
    // 0a 01 'R' | 22 0b [ 0a 03 [12 01 'X'] 3a 04 [0a 02 '/c'] ]
    expect([...encodeSecret({ name: "R", kind: "root", trustedCa: "X", crlFilename: "/c" })]).toEqual([
      0x0a, 0x01, 0x52, 0x22, 0x0b, 0x0a, 0x03, 0x12, 0x01, 0x58, 0x3a, 0x04, 0x0a, 0x02, 0x2f, 0x63,
    ]);
  });

  test("certificate and key, root with and without a CRL, an empty certificate (the oneof member still present)", () => {
    expect(decodeSecret(encodeSecret(tls))).toEqual({
      name: "default",
      tls_certificate: {
        certificate_chain: { inline_bytes: Buffer.from("-----CHAIN-----\n").toString("base64") },
        private_key: { inline_bytes: Buffer.from("-----KEY-----\n").toString("base64") },
      },
    });
    expect(decodeSecret(encodeSecret({ name: "ROOTCA", kind: "root", trustedCa: "CA", crlFilename: "/var/run/secrets/istio/crl/ca-crl.pem" }))).toEqual({
      name: "ROOTCA",
      validation_context: { trusted_ca: { inline_bytes: "Q0E=" }, crl: { filename: "/var/run/secrets/istio/crl/ca-crl.pem" } },
    });
    expect(decodeSecret(encodeSecret({ name: "file-root:/r.pem", kind: "root", trustedCa: "CA" }))).toEqual({
      name: "file-root:/r.pem",
      validation_context: { trusted_ca: { inline_bytes: "Q0E=" } },
    });
    expect(decodeSecret(encodeSecret({ name: "e", kind: "tls", certificateChain: "", privateKey: "" }))).toEqual({
      name: "e",
      tls_certificate: { certificate_chain: { inline_bytes: "" }, private_key: { inline_bytes: "" } },
    });
  });

  test("a 1 MiB chain (3-byte lengths at every level) reads back whole", () => {
    const chain = "A".repeat(1024 * 1024);
    const s = Secret.toObject(Secret.decode(encodeSecret({ ...tls, certificateChain: chain }))) as any;
    expect(Buffer.from(s.tls_certificate.certificate_chain.inline_bytes).toString()).toBe(chain);
  });

  test("a SotW response: version, Anys typed Secret in order, type_url, nonce; empty version and nonce left out", () => {
    const c = sdsWireCodec();
    const o = Res.toObject(
      Res.decode(c.encodeResponse({ versionInfo: "v9", nonce: "n9", resources: [tls, { name: "ROOTCA", kind: "root", trustedCa: "CA" }] })),
      { defaults: true },
    ) as any;
    expect([o.version_info, o.type_url, o.nonce]).toEqual(["v9", SECRET_TYPE_URL, "n9"]);
    expect(o.resources.map((a: any) => [a.type_url, (Secret.decode(a.value) as any).name])).toEqual([
      [SECRET_TYPE_URL, "default"],
      [SECRET_TYPE_URL, "ROOTCA"],
    ]);
    // Only type_url (field 4) when there is nothing else: 22 <len> url.
    const bare = c.encodeResponse({ versionInfo: "", nonce: "", resources: [] });
    expect([...bare.subarray(0, 2)]).toEqual([0x22, SECRET_TYPE_URL.length]);
    expect(bare.length).toBe(2 + SECRET_TYPE_URL.length);
  });

  test("a Delta response: resources with name and version, removed names", () => {
    const o = DRes.toObject(
      DRes.decode(
        sdsWireCodec().encodeDeltaResponse({
          systemVersionInfo: "s1",
          nonce: "n1",
          resources: [{ name: "default", version: "h1", secret: tls }],
          removed: ["x", "y"],
        }),
      ),
      { defaults: true },
    ) as any;
    expect([o.system_version_info, o.nonce, o.type_url, o.removed_resources]).toEqual(["s1", "n1", SECRET_TYPE_URL, ["x", "y"]]);
    expect(o.resources.map((r: any) => [r.name, r.version, r.resource.type_url, (Secret.decode(r.resource.value) as any).name])).toEqual([
      ["default", "h1", SECRET_TYPE_URL, "default"],
    ]);
  });
});
