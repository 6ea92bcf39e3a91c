// The SDS server's messages at the protobuf wire level (src/lib/protowire.ts), so a sidecar's SDS
// path loads no schema library: DiscoveryRequest and DeltaDiscoveryRequest read, the Secret and the
// two responses written. Field numbers are those of Envoy's API (envoy/service/discovery/v3/
// discovery.proto, envoy/extensions/transport_sockets/tls/v3/{secret,common}.proto,
// envoy/config/core/v3/base.proto, google/rpc/status.proto), as in our proto/*.proto; proto.ts
// keeps a schema-built codec of the same files for tests, an independent reading.
//
// Reading: unknown fields are skipped; a known field with the wrong wire type, a string that is not
// UTF-8, or a message cut short is refused with a WireError naming the message, the field and the
// byte. Nothing is allocated beyond the message given (every length is checked against it).

import { MessageWriter, WIRE_LEN, WIRE_VARINT, WireError, int32Of, parseFields, type WireField } from "../lib/protowire.ts";

export const SECRET_TYPE_URL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/**
 * What one SDS resource carries, before encoding. `version` (the content hash of the secret it was
 * made from; never sent) lets the codec encode a secret once and reuse the bytes for every stream.
 */
export type SecretResource = (
  { name: string; kind: "tls"; certificateChain: string; privateKey: string } | { name: string; kind: "root"; trustedCa: string; crlFilename?: string }
) & { version?: string };

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

/** What the SDS server reads and writes. */
export interface SdsServerCodec {
  encodeResponse(r: { versionInfo: string; nonce: string; resources: SecretResource[] }): Buffer;
  encodeDeltaResponse(r: { systemVersionInfo: string; nonce: string; resources: DeltaResource[]; removed: string[] }): Buffer;
  decodeRequest(b: Uint8Array): DiscoveryRequest;
  decodeDeltaRequest(b: Uint8Array): DeltaDiscoveryRequest;
}

/** Encoded secrets a codec keeps for reuse (a handful are live at a time: default, ROOTCA, file certs). */
const ENCODED_SECRETS_KEPT = 64;

// DiscoveryRequest { version_info = 1; node = 2; resource_names = 3; type_url = 4;
// response_nonce = 5; error_detail = 6 }
const REQ = { versionInfo: 1, node: 2, resourceNames: 3, typeUrl: 4, responseNonce: 5, errorDetail: 6 } as const;
// DeltaDiscoveryRequest { node = 1; type_url = 2; resource_names_subscribe = 3;
// resource_names_unsubscribe = 4; initial_resource_versions = 5 (map<string, string>: entries
// { key = 1; value = 2 }); response_nonce = 6; error_detail = 7 }
const DREQ = { node: 1, typeUrl: 2, subscribe: 3, unsubscribe: 4, initialVersions: 5, responseNonce: 6, errorDetail: 7 } as const;
// google.rpc.Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3 }
const STATUS = { code: 1, message: 2, details: 3 } as const;
// DiscoveryResponse { version_info = 1; resources = 2 (Any); type_url = 4; nonce = 5 };
// DeltaDiscoveryResponse { system_version_info = 1; resources = 2 (Resource); type_url = 4;
// nonce = 5; removed_resources = 6 }; Resource { version = 1; resource = 2 (Any); name = 3 };
// google.protobuf.Any { type_url = 1; value = 2 }.
const RES = { versionInfo: 1, resources: 2, typeUrl: 4, nonce: 5, removed: 6 } as const;
const RESOURCE = { version: 1, resource: 2, name: 3 } as const;
const ANY = { typeUrl: 1, value: 2 } as const;
// Secret { name = 1; oneof type { tls_certificate = 2; validation_context = 4 } };
// TlsCertificate { certificate_chain = 1; private_key = 2 }; CertificateValidationContext
// { trusted_ca = 1; crl = 7 }; DataSource { oneof specifier { filename = 1; inline_bytes = 2 } }.
const SECRET = { name: 1, tlsCertificate: 2, validationContext: 4 } as const;
const TLS_CERT = { certificateChain: 1, privateKey: 2 } as const;
const VALIDATION = { trustedCa: 1, crl: 7 } as const;
const DATA_SOURCE = { filename: 1, inlineBytes: 2 } as const;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The fields of `what`, its structural errors named after it. */
function fieldsOf(b: Uint8Array, what: string): WireField[] {
  try {
    return parseFields(b);
  } catch (e) {
    throw new WireError(`${what}: ${(e as Error).message}`);
  }
}

function wantWire(f: WireField, wire: number, what: string): void {
  if (f.wire !== wire) throw new WireError(`${what} has wire type ${f.wire}, want ${wire === WIRE_LEN ? "length-delimited (2)" : "varint (0)"}`);
}

function str(f: WireField, what: string): string {
  wantWire(f, WIRE_LEN, what);
  try {
    return utf8.decode(f.data);
  } catch {
    throw new WireError(`${what} is not valid UTF-8`);
  }
}

/** An embedded message's bytes (checked to be length-delimited). */
function embedded(f: WireField, what: string): Uint8Array {
  wantWire(f, WIRE_LEN, what);
  return f.data;
}

/** google.rpc.Status from each occurrence of the field, merged in order (protobuf's rule for a repeated singular message). */
function status(parts: Uint8Array[], what: string): { code: number; message: string } {
  const out = { code: 0, message: "" };
  for (const part of parts) {
    for (const f of fieldsOf(part, what)) {
      if (f.no === STATUS.code) {
        wantWire(f, WIRE_VARINT, `${what}.code`);
        out.code = int32Of(f); // a negative code is sign-extended to 10 bytes; int32 is its low 32 bits
      } else if (f.no === STATUS.message) out.message = str(f, `${what}.message`);
      else if (f.no === STATUS.details) fieldsOf(embedded(f, `${what}.details`), `${what}.details`);
    }
  }
  return out;
}

/** envoy.service.discovery.v3.DiscoveryRequest */
export function decodeDiscoveryRequest(b: Uint8Array): DiscoveryRequest {
  const r: DiscoveryRequest = { versionInfo: "", resourceNames: [], typeUrl: "", responseNonce: "" };
  let errorDetail: Uint8Array[] | undefined;
  for (const f of fieldsOf(b, "DiscoveryRequest")) {
    switch (f.no) {
      case REQ.versionInfo:
        r.versionInfo = str(f, "DiscoveryRequest.version_info");
        break;
      case REQ.node:
        embedded(f, "DiscoveryRequest.node"); // not read by the SDS server
        break;
      case REQ.resourceNames:
        r.resourceNames.push(str(f, "DiscoveryRequest.resource_names"));
        break;
      case REQ.typeUrl:
        r.typeUrl = str(f, "DiscoveryRequest.type_url");
        break;
      case REQ.responseNonce:
        r.responseNonce = str(f, "DiscoveryRequest.response_nonce");
        break;
      case REQ.errorDetail:
        (errorDetail ??= []).push(embedded(f, "DiscoveryRequest.error_detail"));
        break;
    }
  }
  if (errorDetail) r.errorDetail = status(errorDetail, "DiscoveryRequest.error_detail");
  return r;
}

/** envoy.service.discovery.v3.DeltaDiscoveryRequest */
export function decodeDeltaDiscoveryRequest(b: Uint8Array): DeltaDiscoveryRequest {
  const r: DeltaDiscoveryRequest = { typeUrl: "", resourceNamesSubscribe: [], resourceNamesUnsubscribe: [], initialResourceVersions: {}, responseNonce: "" };
  let errorDetail: Uint8Array[] | undefined;
  for (const f of fieldsOf(b, "DeltaDiscoveryRequest")) {
    switch (f.no) {
      case DREQ.node:
        embedded(f, "DeltaDiscoveryRequest.node");
        break;
      case DREQ.typeUrl:
        r.typeUrl = str(f, "DeltaDiscoveryRequest.type_url");
        break;
      case DREQ.subscribe:
        r.resourceNamesSubscribe.push(str(f, "DeltaDiscoveryRequest.resource_names_subscribe"));
        break;
      case DREQ.unsubscribe:
        r.resourceNamesUnsubscribe.push(str(f, "DeltaDiscoveryRequest.resource_names_unsubscribe"));
        break;
      case DREQ.initialVersions:
        mapEntry(embedded(f, "DeltaDiscoveryRequest.initial_resource_versions"), r.initialResourceVersions);
        break;
      case DREQ.responseNonce:
        r.responseNonce = str(f, "DeltaDiscoveryRequest.response_nonce");
        break;
      case DREQ.errorDetail:
        (errorDetail ??= []).push(embedded(f, "DeltaDiscoveryRequest.error_detail"));
        break;
    }
  }
  if (errorDetail) r.errorDetail = status(errorDetail, "DeltaDiscoveryRequest.error_detail");
  return r;
}

/** One map<string, string> entry { key = 1; value = 2 } into `into` (a later entry for a key wins). */
function mapEntry(entry: Uint8Array, into: Record<string, string>): void {
  const what = "DeltaDiscoveryRequest.initial_resource_versions";
  let key = "";
  let value = "";
  for (const f of fieldsOf(entry, what)) {
    if (f.no === 1) key = str(f, `${what} key`);
    else if (f.no === 2) value = str(f, `${what} value`);
  }
  // An own data property even for a key like "__proto__" (never the object's prototype).
  Object.defineProperty(into, key, { value, enumerable: true, writable: true, configurable: true });
}

function inlineBytes(text: string): MessageWriter {
  return new MessageWriter().bytes(DATA_SOURCE.inlineBytes, text);
}

/** envoy.extensions.transport_sockets.tls.v3.Secret, fields in number order (as protobuf writes them). */
export function encodeSecret(s: SecretResource): Buffer {
  const w = new MessageWriter();
  if (s.name !== "") w.bytes(SECRET.name, s.name);
  if (s.kind === "tls") {
    const cert = new MessageWriter()
      .message(TLS_CERT.certificateChain, inlineBytes(s.certificateChain))
      .message(TLS_CERT.privateKey, inlineBytes(s.privateKey));
    w.message(SECRET.tlsCertificate, cert);
  } else {
    const vc = new MessageWriter().message(VALIDATION.trustedCa, inlineBytes(s.trustedCa));
    if (s.crlFilename) vc.message(VALIDATION.crl, new MessageWriter().bytes(DATA_SOURCE.filename, s.crlFilename));
    w.message(SECRET.validationContext, vc);
  }
  return w.finish();
}

/** The server's codec; each keeps its own encoded secrets. */
export function sdsWireCodec(): SdsServerCodec {
  // The Any bytes of each secret version, encoded once and reused for every stream that is sent it
  // (a burst of 200 Envoy streams otherwise encodes the same certificate 200 times). Insertion
  // order is age: the oldest goes when the map is full.
  const encodedAnys = new Map<string, Uint8Array>();
  const anyBytes = (s: SecretResource): Uint8Array => {
    const key = s.version === undefined ? undefined : `${s.kind}\0${s.name}\0${s.version}\0${s.kind === "root" ? (s.crlFilename ?? "") : ""}`;
    const kept = key === undefined ? undefined : encodedAnys.get(key);
    if (kept) return kept;
    const b = new MessageWriter().bytes(ANY.typeUrl, SECRET_TYPE_URL).bytes(ANY.value, encodeSecret(s)).finish();
    if (key !== undefined) {
      if (encodedAnys.size >= ENCODED_SECRETS_KEPT) encodedAnys.delete(encodedAnys.keys().next().value!);
      encodedAnys.set(key, b);
    }
    return b;
  };
  return {
    encodeResponse(r) {
      const w = new MessageWriter();
      if (r.versionInfo !== "") w.bytes(RES.versionInfo, r.versionInfo);
      for (const s of r.resources) w.bytes(RES.resources, anyBytes(s));
      w.bytes(RES.typeUrl, SECRET_TYPE_URL);
      if (r.nonce !== "") w.bytes(RES.nonce, r.nonce);
      return w.finish();
    },
    encodeDeltaResponse(r) {
      const w = new MessageWriter();
      if (r.systemVersionInfo !== "") w.bytes(RES.versionInfo, r.systemVersionInfo);
      for (const x of r.resources) {
        const res = new MessageWriter();
        if (x.version !== "") res.bytes(RESOURCE.version, x.version);
        res.bytes(RESOURCE.resource, anyBytes(x.secret));
        if (x.name !== "") res.bytes(RESOURCE.name, x.name);
        w.message(RES.resources, res);
      }
      w.bytes(RES.typeUrl, SECRET_TYPE_URL);
      if (r.nonce !== "") w.bytes(RES.nonce, r.nonce);
      for (const name of r.removed) w.bytes(RES.removed, name);
      return w.finish();
    },
    decodeRequest: decodeDiscoveryRequest,
    decodeDeltaRequest: decodeDeltaDiscoveryRequest,
  };
}
