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

// Wire tags (field number << 3 | 2, length-delimited) of what the response encoders write by hand:
// google.protobuf.Any { type_url = 1; value = 2 }, DiscoveryResponse { version_info = 1;
// resources = 2; type_url = 4; nonce = 5 }, DeltaDiscoveryResponse { system_version_info = 1;
// resources = 2; type_url = 4; nonce = 5; removed_resources = 6 } and its Resource { version = 1;
// resource = 2; name = 3 } (proto/discovery.proto).
const ANY_TYPE_URL = (1 << 3) | 2;
const ANY_VALUE = (2 << 3) | 2;
const RES_VERSION_INFO = (1 << 3) | 2;
const RES_RESOURCES = (2 << 3) | 2;
const RES_TYPE_URL = (4 << 3) | 2;
const RES_NONCE = (5 << 3) | 2;
const DELTA_REMOVED = (6 << 3) | 2;
const RESOURCE_VERSION = (1 << 3) | 2;
const RESOURCE_RESOURCE = (2 << 3) | 2;
const RESOURCE_NAME = (3 << 3) | 2;

/**
 * What one SDS resource carries, before encoding. `version` (the content hash of the secret it was
 * made from; never sent) lets the codec encode a secret once and reuse the bytes for every stream.
 */
export type SecretResource = (
  { name: string; kind: "tls"; certificateChain: string; privateKey: string } | { name: string; kind: "root"; trustedCa: string; crlFilename?: string }
) & { version?: string };

/** Encoded secrets a codec keeps for reuse (a handful are live at a time: default, ROOTCA, file certs). */
const ENCODED_SECRETS_KEPT = 64;

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
  // The Any bytes of each secret version, encoded once and reused for every stream that is sent it
  // (a burst of 200 Envoy streams otherwise encodes the same certificate 200 times). Insertion
  // order is age: the oldest goes when the map is full.
  const encodedAnys = new Map<string, Uint8Array>();
  const anyBytes = (s: SecretResource): Uint8Array => {
    const key = s.version === undefined ? undefined : `${s.kind}\0${s.name}\0${s.version}\0${s.kind === "root" ? (s.crlFilename ?? "") : ""}`;
    const kept = key === undefined ? undefined : encodedAnys.get(key);
    if (kept) return kept;
    const value = encodeSecret(s);
    const b = protobuf.Writer.create().uint32(ANY_TYPE_URL).string(SECRET_TYPE_URL).uint32(ANY_VALUE).bytes(value).finish();
    if (key !== undefined) {
      if (encodedAnys.size >= ENCODED_SECRETS_KEPT) encodedAnys.delete(encodedAnys.keys().next().value!);
      encodedAnys.set(key, b);
    }
    return b;
  };
  const status = (o: Record<string, any>) => (o.errorDetail ? { code: o.errorDetail.code ?? 0, message: o.errorDetail.message ?? "" } : undefined);

  return {
    encodeSecret,
    decodeSecret,
    // DiscoveryResponse written field by field around the kept Any bytes (fields in number order).
    encodeResponse(r) {
      const w = protobuf.Writer.create();
      if (r.versionInfo !== "") w.uint32(RES_VERSION_INFO).string(r.versionInfo);
      for (const s of r.resources) w.uint32(RES_RESOURCES).bytes(anyBytes(s));
      w.uint32(RES_TYPE_URL).string(SECRET_TYPE_URL);
      if (r.nonce !== "") w.uint32(RES_NONCE).string(r.nonce);
      return Buffer.from(w.finish());
    },
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
    // DeltaDiscoveryResponse, likewise; each Resource is { version = 1; resource = 2; name = 3 }.
    encodeDeltaResponse(r) {
      const w = protobuf.Writer.create();
      if (r.systemVersionInfo !== "") w.uint32(RES_VERSION_INFO).string(r.systemVersionInfo);
      for (const x of r.resources) {
        w.uint32(RES_RESOURCES).fork();
        if (x.version !== "") w.uint32(RESOURCE_VERSION).string(x.version);
        w.uint32(RESOURCE_RESOURCE).bytes(anyBytes(x.secret));
        if (x.name !== "") w.uint32(RESOURCE_NAME).string(x.name);
        w.ldelim();
      }
      w.uint32(RES_TYPE_URL).string(SECRET_TYPE_URL);
      if (r.nonce !== "") w.uint32(RES_NONCE).string(r.nonce);
      for (const name of r.removed) w.uint32(DELTA_REMOVED).string(name);
      return Buffer.from(w.finish());
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
