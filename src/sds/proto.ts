// SDS wire messages: envoy.extensions.transport_sockets.tls.v3.Secret and the discovery
// request/response messages (shared with the xDS relay), from our own minimal .proto files embedded at bundle time, parsed
// once into this module's own protobufjs Root (independent of the xDS relay's schemas).

import protobuf from "protobufjs";
import secretProto from "../../proto/secret.proto" with { type: "text" };
import coreProto from "../../proto/sds-core.proto" with { type: "text" };
import statusProto from "../../proto/xds-rpc-status.proto" with { type: "text" };
// The same discovery schema the xDS relay uses.
import sdsProto from "../../proto/discovery.proto" with { type: "text" };
import { checkedInput } from "../lib/protobuf-input.ts";

export const SECRET_TYPE_URL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/** What one SDS resource carries, before encoding. */
export type SecretResource =
  { name: string; kind: "tls"; certificateChain: string; privateKey: string } | { name: string; kind: "root"; trustedCa: string; crlFilename?: string };

export interface DiscoveryRequest {
  versionInfo: string;
  resourceNames: string[];
  typeUrl: string;
  responseNonce: string;
  errorDetail?: { code: number; message: string };
}

export interface DeltaDiscoveryRequest {
  typeUrl: string;
  resourceNamesSubscribe: string[];
  resourceNamesUnsubscribe: string[];
  initialResourceVersions: Record<string, string>;
  responseNonce: string;
  errorDetail?: { code: number; message: string };
}

export interface DeltaResource {
  name: string;
  version: string;
  secret: SecretResource;
}

export interface SdsCodec {
  encodeSecret(s: SecretResource): Uint8Array;
  decodeSecret(b: Uint8Array): SecretResource;
  encodeResponse(r: { versionInfo: string; nonce: string; resources: SecretResource[] }): Buffer;
  decodeResponse(b: Uint8Array): { versionInfo: string; nonce: string; typeUrl: string; resources: SecretResource[] };
  encodeRequest(r: Partial<DiscoveryRequest>): Buffer;
  decodeRequest(b: Uint8Array): DiscoveryRequest;
  encodeDeltaResponse(r: { systemVersionInfo: string; nonce: string; resources: DeltaResource[]; removed: string[] }): Buffer;
  decodeDeltaResponse(b: Uint8Array): { nonce: string; typeUrl: string; resources: DeltaResource[]; removed: string[] };
  encodeDeltaRequest(r: Partial<DeltaDiscoveryRequest>): Buffer;
  decodeDeltaRequest(b: Uint8Array): DeltaDiscoveryRequest;
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

  const secretObject = (s: SecretResource) =>
    s.kind === "tls"
      ? {
          name: s.name,
          tlsCertificate: { certificateChain: { inlineBytes: Buffer.from(s.certificateChain) }, privateKey: { inlineBytes: Buffer.from(s.privateKey) } },
        }
      : {
          name: s.name,
          validationContext: { trustedCa: { inlineBytes: Buffer.from(s.trustedCa) }, ...(s.crlFilename ? { crl: { filename: s.crlFilename } } : {}) },
        };
  const encodeSecret = (s: SecretResource) => Secret.encode(Secret.fromObject(secretObject(s))).finish();
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
  // protobufjs' built-in google.protobuf.Any keeps the proto field name: `type_url`, not `typeUrl`
  // (an unknown key is silently dropped, leaving Envoy an Any with no type).
  const any = (s: SecretResource) => ({ type_url: SECRET_TYPE_URL, value: encodeSecret(s) });
  const status = (o: Record<string, any>) => (o.errorDetail ? { code: o.errorDetail.code ?? 0, message: o.errorDetail.message ?? "" } : undefined);

  return {
    encodeSecret,
    decodeSecret,
    encodeResponse: (r) =>
      Buffer.from(
        Res.encode(Res.fromObject({ versionInfo: r.versionInfo, nonce: r.nonce, typeUrl: SECRET_TYPE_URL, resources: r.resources.map(any) })).finish(),
      ),
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
    encodeDeltaResponse: (r) =>
      Buffer.from(
        DRes.encode(
          DRes.fromObject({
            systemVersionInfo: r.systemVersionInfo,
            nonce: r.nonce,
            typeUrl: SECRET_TYPE_URL,
            resources: r.resources.map((x) => ({ name: x.name, version: x.version, resource: any(x.secret) })),
            removedResources: r.removed,
          }),
        ).finish(),
      ),
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
