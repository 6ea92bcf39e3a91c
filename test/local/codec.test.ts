// The local server's ADS codec reads requests that Envoy's own schema encoded. The discovery
// schema it shares with the relay keeps `node` opaque, so the node id must still come through.

import { beforeAll, expect, test } from "bun:test";
import type protobuf from "protobufjs";
import { adsCodec } from "../../src/local/codec.ts";
import { envoyRoot } from "./support.ts";

let envoy: protobuf.Root;
beforeAll(async () => {
  envoy = await envoyRoot();
});

const NODE = { id: "sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local", cluster: "app.default" };

test("a SotW request encoded by Envoy's schema gives its node id, type, names, nonce and NACK detail", () => {
  const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  const bytes = Req.encode(
    Req.fromObject({
      version_info: "v1",
      node: NODE,
      resource_names: ["a", "b"],
      type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
      response_nonce: "n1",
      error_detail: { code: 3, message: "bad cluster" },
    }),
  ).finish();
  const r = adsCodec().decodeRequest(bytes);
  expect(r.nodeId).toBe("sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local");
  expect(r.typeUrl).toBe("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  expect(r.resourceNames).toEqual(["a", "b"]);
  expect(r.responseNonce).toBe("n1");
  expect(r.errorDetail).toEqual({ code: 3, message: "bad cluster" });
});

test("a Delta request gives its node id; a request without a node gives an empty id", () => {
  const DReq = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
  const codec = adsCodec();
  const withNode = DReq.encode(
    DReq.fromObject({ node: NODE, type_url: "type.googleapis.com/envoy.config.listener.v3.Listener", resource_names_subscribe: ["l1"] }),
  ).finish();
  expect(codec.decodeDeltaRequest(withNode).nodeId).toBe("sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local");
  expect(codec.decodeDeltaRequest(withNode).subscribe).toEqual(["l1"]);
  const without = DReq.encode(DReq.fromObject({ type_url: "type.googleapis.com/envoy.config.listener.v3.Listener" })).finish();
  expect(codec.decodeDeltaRequest(without).nodeId).toBe("");
});

test("responses written at the wire level read back with Envoy's schema: each resource an Any of the type URL and its bytes", () => {
  const codec = adsCodec();
  const Cluster = envoy.lookupType("envoy.config.cluster.v3.Cluster");
  const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  const body = (name: string) => Cluster.encode(Cluster.fromObject({ name, type: "EDS" })).finish();
  const a = { name: "a", version: "va", body: body("a") };
  const b = { name: "b", version: "vb", body: body("b") };
  const Res = envoy.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
  const sotw = Res.toObject(Res.decode(codec.encodeResponse({ typeUrl: CDS, versionInfo: "v7", nonce: "3", resources: [a, b] })), { enums: String }) as any;
  expect(sotw.version_info).toBe("v7");
  expect(sotw.type_url).toBe(CDS);
  expect(sotw.nonce).toBe("3");
  expect(sotw.resources.map((x: any) => [x.type_url, Cluster.toObject(Cluster.decode(x.value), { enums: String })])).toEqual([
    [CDS, { name: "a", type: "EDS" }],
    [CDS, { name: "b", type: "EDS" }],
  ]);

  const DRes = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryResponse");
  const delta = DRes.toObject(
    DRes.decode(codec.encodeDeltaResponse({ typeUrl: CDS, systemVersionInfo: "s1", nonce: "4", resources: [b], removed: ["gone", "old"] })),
    {
      enums: String,
    },
  ) as any;
  expect(delta.system_version_info).toBe("s1");
  expect(delta.type_url).toBe(CDS);
  expect(delta.nonce).toBe("4");
  expect(delta.removed_resources).toEqual(["gone", "old"]);
  expect(delta.resources.map((x: any) => [x.name, x.version, x.resource.type_url, Cluster.toObject(Cluster.decode(x.resource.value)).name])).toEqual([
    ["b", "vb", CDS, "b"],
  ]);
  // An empty set is a response with no resources (Envoy finishes initialising on it).
  expect(Res.toObject(Res.decode(codec.encodeResponse({ typeUrl: CDS, versionInfo: "v0", nonce: "5", resources: [] })))).toEqual({
    version_info: "v0",
    type_url: CDS,
    nonce: "5",
  });
});

test("a node that is not a message is refused, naming it; fields Envoy adds that we do not read are skipped", () => {
  const codec = adsCodec();
  // DiscoveryRequest { node = 2: one byte 0xff, which cannot start a field }.
  expect(() => codec.decodeRequest(Uint8Array.from([0x12, 0x01, 0xff]))).toThrow("DiscoveryRequest.node: ");
  const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  const withLocators = Req.encode(
    Req.fromObject({ node: { ...NODE, user_agent_name: "envoy" }, type_url: "t", resource_locators: [{ name: "x" }], response_nonce: "n" }),
  ).finish();
  expect(codec.decodeRequest(withLocators)).toEqual({ nodeId: NODE.id, typeUrl: "t", versionInfo: "", resourceNames: [], responseNonce: "n" });
});
