// The SDS codec encodes each secret version once and reuses the bytes for every stream it is sent
// to (src/sds/proto.ts): a resource's `version` (the content hash of the secret it was made from)
// keys what is kept, a new version is encoded afresh, and what is kept is bounded (64 versions,
// oldest out first). Reuse is made visible by handing the codec two resources that claim the same
// version with different content (which the cache never does): the first content comes back.
// Decoded with Envoy's own protos, not the codec under test.
import { expect, test } from "bun:test";
import { sdsCodec, type SecretResource } from "../../src/sds/proto.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const root = envoyProtoRoot();
const Res = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
const DRes = root.lookupType("envoy.service.discovery.v3.DeltaDiscoveryResponse");
const Secret = root.lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");

const tls = (chain: string, version?: string): SecretResource => ({
  name: "default",
  kind: "tls",
  certificateChain: chain,
  privateKey: "KEY",
  ...(version === undefined ? {} : { version }),
});

/** The certificate chain of each resource of a SotW response. */
function chains(frame: Uint8Array): string[] {
  const o = Res.toObject(Res.decode(frame)) as { resources?: { value: Uint8Array }[] };
  return (o.resources ?? []).map((a) => {
    const s = Secret.toObject(Secret.decode(a.value)) as { tls_certificate?: { certificate_chain?: { inline_bytes?: Uint8Array } } };
    return Buffer.from(s.tls_certificate?.certificate_chain?.inline_bytes ?? []).toString();
  });
}

test("one version is encoded once: a second resource claiming it gets the first one's bytes", () => {
  const c = sdsCodec();
  expect(chains(c.encodeResponse({ versionInfo: "1", nonce: "n1", resources: [tls("CHAIN-A", "v1")] }))).toEqual(["CHAIN-A"]);
  expect(chains(c.encodeResponse({ versionInfo: "2", nonce: "n2", resources: [tls("CHAIN-B", "v1")] }))).toEqual(["CHAIN-A"]);
  expect(chains(c.encodeResponse({ versionInfo: "3", nonce: "n3", resources: [tls("CHAIN-B", "v2")] }))).toEqual(["CHAIN-B"]);
  // Without a version nothing is kept or reused.
  expect(chains(c.encodeResponse({ versionInfo: "4", nonce: "n4", resources: [tls("CHAIN-C")] }))).toEqual(["CHAIN-C"]);
  expect(chains(c.encodeResponse({ versionInfo: "5", nonce: "n5", resources: [tls("CHAIN-D")] }))).toEqual(["CHAIN-D"]);
  // Each codec keeps its own.
  expect(chains(sdsCodec().encodeResponse({ versionInfo: "1", nonce: "n", resources: [tls("CHAIN-E", "v1")] }))).toEqual(["CHAIN-E"]);
});

test("a root's CRL file is part of what is kept: the same bundle with another CRL is encoded again", () => {
  const c = sdsCodec();
  const rootRes = (crl?: string): SecretResource => ({ name: "ROOTCA", kind: "root", trustedCa: "CA", version: "r1", ...(crl ? { crlFilename: crl } : {}) });
  const crlOf = (frame: Uint8Array) => {
    const o = Res.toObject(Res.decode(frame)) as { resources: { value: Uint8Array }[] };
    const s = Secret.toObject(Secret.decode(o.resources[0]!.value)) as { validation_context?: { crl?: { filename?: string } } };
    return s.validation_context?.crl?.filename ?? "none";
  };
  expect(crlOf(c.encodeResponse({ versionInfo: "1", nonce: "n", resources: [rootRes()] }))).toBe("none");
  expect(crlOf(c.encodeResponse({ versionInfo: "2", nonce: "n", resources: [rootRes("/crl/a.pem")] }))).toBe("/crl/a.pem");
  expect(crlOf(c.encodeResponse({ versionInfo: "3", nonce: "n", resources: [rootRes("/crl/b.pem")] }))).toBe("/crl/b.pem");
});

test("at most 64 versions are kept, the oldest going first", () => {
  const c = sdsCodec();
  const send = (chain: string, version: string) => chains(c.encodeResponse({ versionInfo: "x", nonce: "n", resources: [tls(chain, version)] }))[0];
  expect(send("FIRST", "v0")).toBe("FIRST");
  for (let i = 1; i < 64; i++) send(`C${i}`, `v${i}`); // 64 kept: v0..v63
  expect(send("CHANGED", "v0")).toBe("FIRST"); // still kept
  send("C64", "v64"); // the 65th: v0, the oldest, goes
  expect(send("CHANGED", "v0")).toBe("CHANGED");
  expect(send("OTHER", "v2")).toBe("C2"); // a later one is still there
});

test("Delta responses reuse the same bytes, and carry each resource's name, version and the removed names", () => {
  const c = sdsCodec();
  c.encodeResponse({ versionInfo: "1", nonce: "n", resources: [tls("CHAIN-A", "v1")] });
  const frame = c.encodeDeltaResponse({
    systemVersionInfo: "sys-7",
    nonce: "nonce-7",
    resources: [{ name: "default", version: "v1", secret: tls("CHAIN-B", "v1") }],
    removed: ["file-root:/gone", "file-cert:/a~/b"],
  });
  const o = DRes.toObject(DRes.decode(frame), { defaults: true }) as Record<string, any>;
  expect(o.system_version_info).toBe("sys-7");
  expect(o.nonce).toBe("nonce-7");
  expect(o.type_url).toBe("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret");
  expect(o.removed_resources).toEqual(["file-root:/gone", "file-cert:/a~/b"]);
  expect(o.resources.length).toBe(1);
  expect([o.resources[0].name, o.resources[0].version, o.resources[0].resource.type_url]).toEqual([
    "default",
    "v1",
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
  ]);
  const s = Secret.toObject(Secret.decode(o.resources[0].resource.value)) as Record<string, any>;
  expect(Buffer.from(s.tls_certificate.certificate_chain.inline_bytes).toString()).toBe("CHAIN-A");
});
