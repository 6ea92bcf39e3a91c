// The SDS messages read with a schema (protobufjs, from our own minimal .proto files), for tests and
// benchmarks only: they play Envoy (requests encoded, responses decoded) with an independent reading
// of the same protos, and the differential tests hold the server's wire codec (wire.ts) to it. The
// agent itself never loads this module. encodeSecret, encodeResponse and encodeDeltaResponse are
// the server's own (wire.ts), so tests that check what the server sends check those; the request
// decoders here are protobufjs's, the reference the wire decoders are compared with.

import protobuf from "protobufjs";
import secretProto from "../../proto/secret.proto" with { type: "text" };
import coreProto from "../../proto/sds-core.proto" with { type: "text" };
import statusProto from "../../proto/xds-rpc-status.proto" with { type: "text" };
// The same discovery schema the xDS relay uses.
import sdsProto from "../../proto/discovery.proto" with { type: "text" };
import { checkedInput } from "../lib/protobuf-input.ts";
import {
  encodeSecret,
  sdsWireCodec,
  type DeltaDiscoveryRequest,
  type DeltaResource,
  type DiscoveryRequest,
  type SdsServerCodec,
  type SecretResource,
} from "./wire.ts";

export { SECRET_TYPE_URL, type DeltaDiscoveryRequest, type DeltaResource, type DiscoveryRequest, type SecretResource } from "./wire.ts";

export interface SdsCodec extends SdsServerCodec {
  encodeSecret(s: SecretResource): Uint8Array;
  decodeSecret(b: Uint8Array): SecretResource;
  decodeResponse(b: Uint8Array): { versionInfo: string; nonce: string; typeUrl: string; resources: SecretResource[] };
  encodeRequest(r: Partial<DiscoveryRequest>): Buffer;
  decodeDeltaResponse(b: Uint8Array): { nonce: string; typeUrl: string; resources: DeltaResource[]; removed: string[] };
  encodeDeltaRequest(r: Partial<DeltaDiscoveryRequest>): Buffer;
}

function plain(o: protobuf.Message, t: protobuf.Type): Record<string, any> {
  return t.toObject(o, { defaults: true, bytes: Buffer as unknown as StringConstructor, longs: Number, arrays: true, objects: true });
}

/** Parse the schemas (once per caller; keep the result). */
export function sdsCodec(): SdsCodec {
  const root = new protobuf.Root();
  for (const f of ["google/protobuf/any.proto", "google/protobuf/duration.proto"]) root.addJSON(protobuf.common.get(f)!.nested!);
  for (const text of [coreProto, statusProto, secretProto, sdsProto]) protobuf.parse(text as string, root, { keepCase: false });
  root.resolveAll();
  const Secret = root.lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");
  const Req = root.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  const Res = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
  const DReq = root.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
  const DRes = root.lookupType("envoy.service.discovery.v3.DeltaDiscoveryResponse");

  const decodeSecret = (b: Uint8Array): SecretResource => {
    const o = plain(Secret.decode(b), Secret);
    if (o.tlsCertificate)
      return {
        name: o.name,
        kind: "tls",
        certificateChain: Buffer.from(o.tlsCertificate.certificateChain?.inlineBytes ?? []).toString(),
        privateKey: Buffer.from(o.tlsCertificate.privateKey?.inlineBytes ?? []).toString(),
      };
    const vc = o.validationContext ?? {};
    const r: SecretResource = { name: o.name, kind: "root", trustedCa: Buffer.from(vc.trustedCa?.inlineBytes ?? []).toString() };
    if (vc.crl?.filename) r.crlFilename = vc.crl.filename;
    return r;
  };
  const status = (o: Record<string, any>) => (o.errorDetail ? { code: o.errorDetail.code ?? 0, message: o.errorDetail.message ?? "" } : undefined);

  const wire = sdsWireCodec();
  return {
    decodeSecret,
    encodeSecret,
    encodeResponse: wire.encodeResponse,
    encodeDeltaResponse: wire.encodeDeltaResponse,
    decodeResponse(b) {
      const o = plain(Res.decode(checkedInput(b)), Res);
      return {
        versionInfo: o.versionInfo,
        nonce: o.nonce,
        typeUrl: o.typeUrl,
        resources: o.resources.map((a: { value: Uint8Array }) => decodeSecret(a.value)),
      };
    },
    encodeRequest: (r) => Buffer.from(Req.encode(Req.fromObject(r)).finish()),
    decodeRequest(b) {
      const o = plain(Req.decode(checkedInput(b)), Req);
      const r: DiscoveryRequest = { versionInfo: o.versionInfo, resourceNames: o.resourceNames, typeUrl: o.typeUrl, responseNonce: o.responseNonce };
      const e = status(o);
      if (e) r.errorDetail = e;
      return r;
    },
    decodeDeltaResponse(b) {
      const o = plain(DRes.decode(checkedInput(b)), DRes);
      return {
        nonce: o.nonce,
        typeUrl: o.typeUrl,
        removed: o.removedResources,
        resources: o.resources.map((x: { name: string; version: string; resource: { value: Uint8Array } }) => ({
          name: x.name,
          version: x.version,
          secret: decodeSecret(x.resource.value),
        })),
      };
    },
    encodeDeltaRequest: (r) => Buffer.from(DReq.encode(DReq.fromObject(r)).finish()),
    decodeDeltaRequest(b) {
      const o = plain(DReq.decode(checkedInput(b)), DReq);
      const r: DeltaDiscoveryRequest = {
        typeUrl: o.typeUrl,
        resourceNamesSubscribe: o.resourceNamesSubscribe,
        resourceNamesUnsubscribe: o.resourceNamesUnsubscribe,
        initialResourceVersions: o.initialResourceVersions ?? {},
        responseNonce: o.responseNonce,
      };
      const e = status(o);
      if (e) r.errorDetail = e;
      return r;
    },
  };
}
