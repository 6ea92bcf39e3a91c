// The CA service's messages, parsed once from proto/ca.proto embedded at bundle time, and a
// grpc-js ServiceDefinition for istio.v1.auth.IstioCertificateService built on them: the tests'
// fake CAs and benchmarks use it; the agent's CA client reads and writes the wire itself (wire.ts).

import protobuf from "protobufjs";
import type { ServiceDefinition } from "@grpc/grpc-js";
import caProtoText from "../../proto/ca.proto" with { type: "text" };
import { checkedInput } from "../lib/protobuf-input.ts";
import { CREATE_CERTIFICATE_PATH, type CertificateRequest, type CertificateResponse } from "./wire.ts";

export { CREATE_CERTIFICATE_PATH, type CertificateRequest, type CertificateResponse } from "./wire.ts";

export interface CaCodec {
  encodeRequest(r: CertificateRequest): Buffer;
  decodeRequest(b: Buffer): CertificateRequest;
  encodeResponse(r: CertificateResponse): Buffer;
  decodeResponse(b: Buffer): CertificateResponse;
}

/** Build the codec (parses the schema); callers keep the result instead of calling this per request. */
export function caCodec(): CaCodec {
  const root = new protobuf.Root();
  root.addJSON(protobuf.common.get("google/protobuf/struct.proto")!.nested!);
  protobuf.parse(caProtoText as string, root, { keepCase: false });
  const Req = root.lookupType("istio.v1.auth.IstioCertificateRequest");
  const Res = root.lookupType("istio.v1.auth.IstioCertificateResponse");
  return {
    encodeRequest(r) {
      const msg: Record<string, unknown> = { csr: r.csr, validityDuration: r.validityDuration };
      if (r.metadata) {
        const fields: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(r.metadata)) fields[k] = { stringValue: v };
        msg.metadata = { fields };
      }
      return Buffer.from(Req.encode(Req.fromObject(msg)).finish());
    },
    decodeRequest(b) {
      const o = Req.toObject(Req.decode(checkedInput(b)), { longs: Number, defaults: true }) as {
        csr: string;
        validityDuration: number;
        metadata?: { fields?: Record<string, { stringValue?: string }> };
      };
      const metadata: Record<string, string> = {};
      for (const [k, v] of Object.entries(o.metadata?.fields ?? {})) metadata[k] = v.stringValue ?? "";
      return { csr: o.csr, validityDuration: o.validityDuration, metadata };
    },
    encodeResponse(r) {
      return Buffer.from(Res.encode(Res.fromObject(r)).finish());
    },
    decodeResponse(b) {
      const o = Res.toObject(Res.decode(checkedInput(b)), { defaults: true }) as CertificateResponse;
      return { certChain: o.certChain ?? [] };
    },
  };
}

export function caServiceDefinition(codec: CaCodec): ServiceDefinition {
  return {
    CreateCertificate: {
      path: CREATE_CERTIFICATE_PATH,
      requestStream: false,
      responseStream: false,
      requestSerialize: (r: CertificateRequest) => codec.encodeRequest(r),
      requestDeserialize: (b: Buffer) => codec.decodeRequest(b),
      responseSerialize: (r: CertificateResponse) => codec.encodeResponse(r),
      responseDeserialize: (b: Buffer) => codec.decodeResponse(b),
      originalName: "createCertificate",
    },
  };
}
