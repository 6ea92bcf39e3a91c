// The gRPC metadata on every CSR, as HTTP/2 headers the way grpc-go writes them: ClusterID and
// CA_HEADER_* (names lowercased, `-bin` values base64 without padding, gRPC's reserved names
// dropped) and `authorization: Bearer <token>`. A name or value HTTP/2 cannot carry is a config
// error naming the header or the token's source, never the value (it may be a secret).

import { CaError } from "./errors.ts";
import type { HeaderList } from "../xds/h2/hpack.ts";

/** Headers gRPC itself writes; grpc-go leaves them out of the metadata it sends. */
const RESERVED = new Set([
  "content-type",
  "user-agent",
  "grpc-message-type",
  "grpc-encoding",
  "grpc-message",
  "grpc-status",
  "grpc-timeout",
  "grpc-status-details-bin",
  "te",
]);
const LEGAL_NAME = /^[0-9a-z_.-]+$/;
const LEGAL_VALUE = /^[\x20-\x7e]*$/;

export function csrMetadata(headers: Record<string, string>, token: string | undefined, tokenSource: string): HeaderList {
  const out: HeaderList = [];
  for (const [k, v] of Object.entries(headers)) {
    const name = k.toLowerCase();
    if (!LEGAL_NAME.test(name)) throw new CaError("config", `gRPC metadata "${k}" for the CA: the name may hold only letters, digits, "_", "." and "-"`);
    if (RESERVED.has(name)) continue;
    if (name.endsWith("-bin")) {
      out.push([name, Buffer.from(v, "utf8").toString("base64").replace(/=+$/, "")]);
      continue;
    }
    if (!LEGAL_VALUE.test(v)) throw new CaError("config", `gRPC metadata "${k}" for the CA: the value may hold only printable ASCII characters`);
    out.push([name, v]);
  }
  if (token) {
    if (!LEGAL_VALUE.test(token)) throw new CaError("token", `the token from ${tokenSource} holds characters a gRPC header cannot carry`);
    out.push(["authorization", `Bearer ${token}`]);
  }
  return out;
}
