// The local server's ADS codec reads requests that Envoy's own schema encoded. The discovery
// schema it shares with the relay keeps `node` opaque, so the node id must still come through.

import { beforeAll, expect, test } from "bun:test";
import type protobuf from "protobufjs";
import { adsCodec } from "../../src/local/codec.ts";
import { localSchema } from "../../src/local/schema.ts";
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
  const r = adsCodec(localSchema()).decodeRequest(bytes);
  expect(r.nodeId).toBe("sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local");
  expect(r.typeUrl).toBe("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  expect(r.resourceNames).toEqual(["a", "b"]);
  expect(r.responseNonce).toBe("n1");
  expect(r.errorDetail).toEqual({ code: 3, message: "bad cluster" });
});

test("a Delta request gives its node id; a request without a node gives an empty id", () => {
  const DReq = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
  const codec = adsCodec(localSchema());
  const withNode = DReq.encode(
    DReq.fromObject({ node: NODE, type_url: "type.googleapis.com/envoy.config.listener.v3.Listener", resource_names_subscribe: ["l1"] }),
  ).finish();
  expect(codec.decodeDeltaRequest(withNode).nodeId).toBe("sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local");
  expect(codec.decodeDeltaRequest(withNode).subscribe).toEqual(["l1"]);
  const without = DReq.encode(DReq.fromObject({ type_url: "type.googleapis.com/envoy.config.listener.v3.Listener" })).finish();
  expect(codec.decodeDeltaRequest(without).nodeId).toBe("");
});
