// The SDS responses on the wire: every resource is a google.protobuf.Any whose type_url names the
// Secret type. Envoy rejects a SotW response whose resources carry another (or no) type, so this
// reads the bytes with a bare protobuf reader, independent of the codec under test.
import { expect, test } from "bun:test";
import protobuf from "protobufjs";
import { sdsCodec } from "../../src/sds/proto.ts";

const SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/** type_url (field 1) of each Any found at `field` of the message, descending into `inner` first when given. */
function anyTypeUrls(bytes: Uint8Array, field: number, inner?: number): string[] {
  const out: string[] = [];
  const r = protobuf.Reader.create(bytes);
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag >>> 3 !== field || (tag & 7) !== 2) {
      r.skipType(tag & 7);
      continue;
    }
    let msg = r.bytes();
    if (inner !== undefined) {
      const ir = protobuf.Reader.create(msg);
      let found: Uint8Array | undefined;
      while (ir.pos < ir.len) {
        const t = ir.uint32();
        if (t >>> 3 === inner && (t & 7) === 2) found = ir.bytes();
        else ir.skipType(t & 7);
      }
      msg = found ?? new Uint8Array();
    }
    const ar = protobuf.Reader.create(msg);
    let url = "";
    while (ar.pos < ar.len) {
      const t = ar.uint32();
      if (t >>> 3 === 1 && (t & 7) === 2) url = ar.string();
      else ar.skipType(t & 7);
    }
    out.push(url);
  }
  return out;
}

const secrets = [
  { name: "default", kind: "tls" as const, certificateChain: "CHAIN", privateKey: "KEY" },
  { name: "ROOTCA", kind: "root" as const, trustedCa: "ROOT" },
];

test("SotW DiscoveryResponse resources are Anys typed as Secret", () => {
  const bytes = sdsCodec().encodeResponse({ versionInfo: "v1", nonce: "n1", resources: secrets });
  expect(anyTypeUrls(bytes, 2)).toEqual([SECRET_TYPE, SECRET_TYPE]);
});

test("Delta DeltaDiscoveryResponse Resource.resource Anys are typed as Secret", () => {
  const bytes = sdsCodec().encodeDeltaResponse({
    systemVersionInfo: "",
    nonce: "n1",
    resources: secrets.map((s) => ({ name: s.name, version: "v1", secret: s })),
    removed: [],
  });
  expect(anyTypeUrls(bytes, 2, 2)).toEqual([SECRET_TYPE, SECRET_TYPE]);
});
