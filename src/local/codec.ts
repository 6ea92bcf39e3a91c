// ADS wire messages (envoy.service.discovery.v3) for the local xDS server, at the protobuf wire
// level (src/lib/protowire.ts), so the serving process loads no schema library: requests are read
// by the SDS server's readers (src/sds/wire.ts: the same DiscoveryRequest and
// DeltaDiscoveryRequest, unknown fields skipped, malformed ones refused with a WireError) plus the
// node's id; responses are written around the resources' bytes, each a google.protobuf.Any of
// its type URL and its already-encoded message. Field numbers are Envoy's (proto/discovery.proto).

import { MessageWriter, messageField, parseFields, stringField, WireError } from "../lib/protowire.ts";
import { decodeDeltaDiscoveryRequest, decodeDiscoveryRequest } from "../sds/wire.ts";
import type { DeltaRequest, DeltaResponse } from "./delta.ts";
import type { Resource } from "./snapshot.ts";
import type { SotwRequest, SotwResponse } from "./sotw.ts";

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

// DiscoveryRequest { node = 2 }; DeltaDiscoveryRequest { node = 1 }; envoy.config.core.v3.Node { id = 1 }.
const SOTW_NODE = 2;
const DELTA_NODE = 1;
const NODE_ID = 1;
// DiscoveryResponse { version_info = 1; resources = 2 (Any); type_url = 4; nonce = 5 };
// DeltaDiscoveryResponse { system_version_info = 1; resources = 2 (Resource); type_url = 4;
// nonce = 5; removed_resources = 6 }; Resource { version = 1; resource = 2 (Any); name = 3 };
// google.protobuf.Any { type_url = 1; value = 2 }.
const RES = { versionInfo: 1, resources: 2, typeUrl: 4, nonce: 5, removed: 6 } as const;
const RESOURCE = { version: 1, resource: 2, name: 3 } as const;
const ANY = { typeUrl: 1, value: 2 } as const;

/** The id of the request's node (field `no`; occurrences merged, protobuf's rule): "" without one. */
function nodeIdOf(b: Uint8Array, no: number, what: string): string {
  const node = messageField(parseFields(b), no);
  if (!node || node.length === 0) return "";
  try {
    return stringField(parseFields(node), NODE_ID) ?? "";
  } catch (e) {
    throw new WireError(`${what}.node: ${(e as Error).message}`);
  }
}

/** The resource as google.protobuf.Any: its type URL and its encoded message, not copied until the response is finished. */
function any(typeUrl: string, r: Resource): MessageWriter {
  return new MessageWriter().bytes(ANY.typeUrl, typeUrl).bytes(ANY.value, r.body);
}

/** The codec; it holds nothing between calls. */
export function adsCodec(): AdsCodec {
  return {
    decodeRequest(b) {
      const r = decodeDiscoveryRequest(b);
      const out: DecodedSotw = {
        nodeId: nodeIdOf(b, SOTW_NODE, "DiscoveryRequest"),
        typeUrl: r.typeUrl,
        versionInfo: r.versionInfo,
        resourceNames: r.resourceNames,
        responseNonce: r.responseNonce,
      };
      if (r.errorDetail) out.errorDetail = r.errorDetail;
      return out;
    },
    encodeResponse(r) {
      const w = new MessageWriter();
      if (r.versionInfo !== "") w.bytes(RES.versionInfo, r.versionInfo);
      for (const x of r.resources) w.message(RES.resources, any(r.typeUrl, x));
      if (r.typeUrl !== "") w.bytes(RES.typeUrl, r.typeUrl);
      if (r.nonce !== "") w.bytes(RES.nonce, r.nonce);
      return w.finish();
    },
    decodeDeltaRequest(b) {
      const r = decodeDeltaDiscoveryRequest(b);
      const out: DecodedDelta = {
        nodeId: nodeIdOf(b, DELTA_NODE, "DeltaDiscoveryRequest"),
        typeUrl: r.typeUrl,
        subscribe: r.resourceNamesSubscribe,
        unsubscribe: r.resourceNamesUnsubscribe,
        initialVersions: r.initialResourceVersions,
        responseNonce: r.responseNonce,
      };
      if (r.errorDetail) out.errorDetail = r.errorDetail;
      return out;
    },
    encodeDeltaResponse(r) {
      const w = new MessageWriter();
      if (r.systemVersionInfo !== "") w.bytes(RES.versionInfo, r.systemVersionInfo);
      for (const x of r.resources) {
        const res = new MessageWriter();
        if (x.version !== "") res.bytes(RESOURCE.version, x.version);
        res.message(RESOURCE.resource, any(r.typeUrl, x));
        if (x.name !== "") res.bytes(RESOURCE.name, x.name);
        w.message(RES.resources, res);
      }
      if (r.typeUrl !== "") w.bytes(RES.typeUrl, r.typeUrl);
      if (r.nonce !== "") w.bytes(RES.nonce, r.nonce);
      for (const name of r.removed) w.bytes(RES.removed, name);
      return w.finish();
    },
  };
}
