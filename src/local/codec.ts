// ADS wire messages (envoy.service.discovery.v3) for the local xDS server: decode what clients
// send, encode what we answer. Resources travel as google.protobuf.Any with their type URL.

import type protobuf from "protobufjs";
import type { DeltaRequest, DeltaResponse } from "./delta.ts";
import type { SotwRequest, SotwResponse } from "./sotw.ts";
import { checkedInput } from "../lib/protobuf-input.ts";

export interface DecodedSotw extends SotwRequest {
  nodeId: string;
}

export interface DecodedDelta extends DeltaRequest {
  nodeId: string;
}

export interface AdsCodec {
  decodeRequest(b: Uint8Array): DecodedSotw;
  encodeResponse(r: SotwResponse): Buffer;
  decodeDeltaRequest(b: Uint8Array): DecodedDelta;
  encodeDeltaResponse(r: DeltaResponse): Buffer;
}

type Plain = Record<string, any>;

function errorDetail(o: Plain): { code: number; message: string } | undefined {
  return o.error_detail ? { code: o.error_detail.code ?? 0, message: o.error_detail.message ?? "" } : undefined;
}

export function adsCodec(root: protobuf.Root): AdsCodec {
  const Req = root.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  const Res = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
  const DReq = root.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
  const DRes = root.lookupType("envoy.service.discovery.v3.DeltaDiscoveryResponse");
  const Node = root.lookupType("envoy.config.core.v3.Node");
  const plain = (t: protobuf.Type, b: Uint8Array): Plain =>
    t.toObject(t.decode(checkedInput(b)), { defaults: true, arrays: true, objects: true, longs: Number });
  // The discovery schema (shared with the relay) keeps `node` as opaque bytes; local mode reads its id.
  const nodeId = (node: Uint8Array | undefined): string =>
    node && node.length ? String((Node.decode(checkedInput(node)) as unknown as { id?: string }).id ?? "") : "";
  return {
    decodeRequest(b) {
      const o = plain(Req, b);
      const r: DecodedSotw = {
        nodeId: nodeId(o.node),
        typeUrl: o.type_url,
        versionInfo: o.version_info,
        resourceNames: o.resource_names,
        responseNonce: o.response_nonce,
      };
      const e = errorDetail(o);
      if (e) r.errorDetail = e;
      return r;
    },
    encodeResponse(r) {
      const msg = {
        version_info: r.versionInfo,
        type_url: r.typeUrl,
        nonce: r.nonce,
        resources: r.resources.map((x) => ({ type_url: r.typeUrl, value: x.body })),
      };
      return Buffer.from(Res.encode(msg).finish());
    },
    decodeDeltaRequest(b) {
      const o = plain(DReq, b);
      const r: DecodedDelta = {
        nodeId: nodeId(o.node),
        typeUrl: o.type_url,
        subscribe: o.resource_names_subscribe,
        unsubscribe: o.resource_names_unsubscribe,
        initialVersions: o.initial_resource_versions ?? {},
        responseNonce: o.response_nonce,
      };
      const e = errorDetail(o);
      if (e) r.errorDetail = e;
      return r;
    },
    encodeDeltaResponse(r) {
      const msg = {
        system_version_info: r.systemVersionInfo,
        type_url: r.typeUrl,
        nonce: r.nonce,
        resources: r.resources.map((x) => ({ name: x.name, version: x.version, resource: { type_url: r.typeUrl, value: x.body } })),
        removed_resources: r.removed,
      };
      return Buffer.from(DRes.encode(msg).finish());
    },
  };
}
