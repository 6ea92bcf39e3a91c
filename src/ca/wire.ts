// The CA call's two messages at the protobuf wire level, for the agent's own client (so it loads
// no schema library): IstioCertificateRequest {csr = 1, validity_duration = 3 (int64), metadata = 4
// (google.protobuf.Struct of string values)} written, IstioCertificateResponse {repeated
// cert_chain = 1} read, unknown fields skipped. proto.ts keeps the schema-built codec (tests'
// fake CAs, the local server), an independent reading of the same proto/ca.proto.

import { WIRE_LEN, WireError, encodeFields, lenField, parseFields, varintField, type WireField } from "../lib/protowire.ts";

export const CREATE_CERTIFICATE_PATH = "/istio.v1.auth.IstioCertificateService/CreateCertificate";

export interface CertificateRequest {
  csr: string;
  validityDuration: number;
  metadata?: Record<string, string>;
}

export interface CertificateResponse {
  certChain: string[];
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** google.protobuf.Struct {fields = 1: map<string, Value>} with Value.string_value = 3. */
function struct(values: Record<string, string>): Uint8Array {
  const entries: WireField[] = Object.entries(values).map(([k, v]) => lenField(1, encodeFields([lenField(1, k), lenField(2, encodeFields([lenField(3, v)]))])));
  return encodeFields(entries);
}

export function encodeCertificateRequest(r: CertificateRequest): Uint8Array {
  if (!Number.isSafeInteger(r.validityDuration) || r.validityDuration < 0) {
    throw new WireError(`validity_duration ${r.validityDuration} is not a whole number of seconds ≥ 0`);
  }
  const fields: WireField[] = [];
  if (r.csr !== "") fields.push(lenField(1, r.csr));
  if (r.validityDuration !== 0) fields.push(varintField(3, r.validityDuration));
  if (r.metadata) fields.push(lenField(4, struct(r.metadata)));
  return encodeFields(fields);
}

export function decodeCertificateResponse(b: Uint8Array): CertificateResponse {
  const certChain: string[] = [];
  for (const f of parseFields(b)) {
    if (f.no !== 1) continue;
    if (f.wire !== WIRE_LEN) throw new WireError(`cert_chain has wire type ${f.wire}, want length-delimited`);
    certChain.push(utf8.decode(f.data));
  }
  return { certChain };
}
