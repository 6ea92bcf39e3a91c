// The workload's PKCS#10 certificate request (RFC 2986), written as DER by hand and signed with
// WebCrypto, in the shape Istio's GenCSRTemplate gives it: subject O="" (Go encodes Organization
// [""] as an empty PrintableString), the key's SubjectPublicKeyInfo as WebCrypto exports it, and
// one extensionRequest attribute holding a critical subjectAltName with the SPIFFE URI.
// Signature: sha256WithRSAEncryption (PKCS#1 v1.5) for RSA, ecdsa-with-SHA256/-SHA384 for P-256/P-384.
// Why by hand: an ASN.1 library (@peculiar/x509 and what it pulls in) cost 3.7 MiB of every pod's
// private memory for this one message (docs/memory.md). The local CA writes its certificates by
// hand too (certwrite.ts).

import { CaError } from "./errors.ts";
import {
  bitString,
  boolean,
  contextConstructed,
  contextPrimitive,
  type Der,
  derNull,
  ia5Bytes,
  octetString,
  oid,
  printableString,
  sequence,
  setOf1,
  smallInteger,
  unsignedInteger,
} from "../lib/der.ts";
import { errorMessage } from "../lib/errors.ts";
import { derToPem } from "./pem.ts";

const OID = {
  organizationName: "2.5.4.10",
  extensionRequest: "1.2.840.113549.1.9.14",
  subjectAltName: "2.5.29.17",
  sha256WithRSAEncryption: "1.2.840.113549.1.1.11",
  ecdsaWithSHA256: "1.2.840.10045.4.3.2",
  ecdsaWithSHA384: "1.2.840.10045.4.3.3",
} as const;

/** GeneralName's uniformResourceIdentifier: [6] IMPLICIT IA5String. */
const SAN_URI_TAG = 6;

interface Signing {
  /** WebCrypto's sign() parameters. */
  params: { name: string; hash?: string };
  /** The AlgorithmIdentifier written into the request. */
  identifier: Uint8Array;
  /** ECDSA: the byte length of r and s in WebCrypto's raw r||s signature. */
  ecdsaScalarBytes?: number;
}

/** The signature that goes with `key` (as generateKeyAndCsr makes them), or an error naming the key. */
function signingFor(key: CryptoKey): Signing {
  const alg = key.algorithm as { name: string; namedCurve?: string; hash?: { name: string } };
  if (alg.name === "RSASSA-PKCS1-v1_5" && alg.hash?.name === "SHA-256")
    return { params: { name: alg.name }, identifier: sequence(oid(OID.sha256WithRSAEncryption), derNull()) };
  if (alg.name === "ECDSA" && alg.namedCurve === "P-256")
    return { params: { name: "ECDSA", hash: "SHA-256" }, identifier: sequence(oid(OID.ecdsaWithSHA256)), ecdsaScalarBytes: 32 };
  if (alg.name === "ECDSA" && alg.namedCurve === "P-384")
    return { params: { name: "ECDSA", hash: "SHA-384" }, identifier: sequence(oid(OID.ecdsaWithSHA384)), ecdsaScalarBytes: 48 };
  const desc = [alg.name, alg.namedCurve, alg.hash?.name].filter(Boolean).join(" ");
  throw new CaError("keygen", `CSR: a ${desc} key cannot sign a certificate request (want RSASSA-PKCS1-v1_5 SHA-256, or ECDSA P-256 or P-384)`);
}

/** WebCrypto's ECDSA signature (r||s, fixed width) as X.509 wants it: SEQUENCE { r INTEGER, s INTEGER }. */
export function ecdsaSigValue(raw: Uint8Array, scalarBytes: number): Uint8Array {
  if (raw.length !== 2 * scalarBytes) throw new CaError("keygen", `CSR: ECDSA signature of ${raw.length} bytes, want ${2 * scalarBytes}`);
  return sequence(unsignedInteger(raw.subarray(0, scalarBytes)), unsignedInteger(raw.subarray(scalarBytes)));
}

/** CertificationRequestInfo: version 0, subject O="", the public key, the extensionRequest attribute. */
function requestInfo(spki: Uint8Array, spiffe: string): Der {
  const subject = sequence(setOf1(sequence(oid(OID.organizationName), printableString(""))));
  const san = sequence(contextPrimitive(SAN_URI_TAG, ia5Bytes(spiffe, "CSR: SAN URI")));
  const extensions = sequence(sequence(oid(OID.subjectAltName), boolean(true), octetString(san)));
  const attributes = contextConstructed(0, sequence(oid(OID.extensionRequest), setOf1(extensions)));
  return sequence(smallInteger(0), subject, spki, attributes);
}

/** A signed CSR (PEM `CERTIFICATE REQUEST`) for `keys` with `spiffe` as its critical URI SAN. */
export async function buildCsr(keys: CryptoKeyPair, spiffe: string): Promise<string> {
  const signing = signingFor(keys.privateKey);
  const webcrypto = async <T>(what: string, op: () => Promise<T>): Promise<T> => {
    try {
      return await op();
    } catch (e) {
      throw new CaError("keygen", `CSR: WebCrypto refused to ${what} the ${signing.params.name} key: ${errorMessage(e)}`, undefined, { cause: e });
    }
  };
  const spki = new Uint8Array(await webcrypto("export", () => crypto.subtle.exportKey("spki", keys.publicKey)));
  let info: Der;
  try {
    info = requestInfo(spki, spiffe);
  } catch (e) {
    throw new CaError("keygen", errorMessage(e), undefined, { cause: e });
  }
  const raw = new Uint8Array(await webcrypto("sign with", () => crypto.subtle.sign(signing.params, keys.privateKey, info)));
  const signature = signing.ecdsaScalarBytes === undefined ? raw : ecdsaSigValue(raw, signing.ecdsaScalarBytes);
  return derToPem("CERTIFICATE REQUEST", sequence(info, signing.identifier, bitString(signature)));
}
