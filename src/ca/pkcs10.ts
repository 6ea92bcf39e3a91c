// A PKCS#10 certificate request (RFC 2986) as the local CA reads it: the signature is checked
// against the request's own key (node:crypto), then only two things are taken: the
// SubjectPublicKeyInfo, as its bytes, and the URIs of the subjectAltName in the extensionRequest
// attribute. Everything else the request asks for (subject, other extensions) is ignored, as
// Istio's CA ignores it. A request that cannot be read is a CaError naming what was wrong.

import { createPublicKey, verify } from "node:crypto";
import { CaError } from "./errors.ts";
import { children, contentOf, expectChildren, rawOf, readElement, readOid, type DerElement } from "../lib/derread.ts";
import { errorMessage } from "../lib/errors.ts";

const OID = {
  extensionRequest: "1.2.840.113549.1.9.14",
  subjectAltName: "2.5.29.17",
} as const;

/** The signature algorithms a request may be signed with, and the hash each uses. */
const SIGNATURE_HASH: Record<string, string> = {
  "1.2.840.113549.1.1.11": "sha256", // sha256WithRSAEncryption
  "1.2.840.113549.1.1.12": "sha384",
  "1.2.840.113549.1.1.13": "sha512",
  "1.2.840.10045.4.3.2": "sha256", // ecdsa-with-SHA256
  "1.2.840.10045.4.3.3": "sha384",
  "1.2.840.10045.4.3.4": "sha512",
};

const SEQUENCE = 0x30;
const SET = 0x31;
const BIT_STRING = 0x03;
const OCTET_STRING = 0x04;
const BOOLEAN = 0x01;
const ATTRIBUTES = 0xa0; // [0] IMPLICIT SET OF Attribute
const SAN_URI = 0x86; // GeneralName uniformResourceIdentifier [6] IMPLICIT IA5String

/** Decoded PEM `CERTIFICATE REQUEST` (or `NEW CERTIFICATE REQUEST`), or a CaError. */
export function csrDer(pem: string): Uint8Array {
  const m = /-----BEGIN (NEW )?CERTIFICATE REQUEST-----([\s\S]*?)-----END (NEW )?CERTIFICATE REQUEST-----/.exec(pem);
  if (!m) throw new CaError("signing", "CSR is not a valid PEM certificate request: no CERTIFICATE REQUEST block");
  const body = m[2]!.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body)) throw new CaError("signing", "CSR is not a valid PEM certificate request: its body is not base64");
  return new Uint8Array(Buffer.from(body, "base64"));
}

export interface ParsedCsr {
  /** The requester's SubjectPublicKeyInfo, as it is in the request. */
  spki: Uint8Array;
  /** URIs of the requested subjectAltName, in order. */
  uris: string[];
}

/** Parse a request, check its signature, and return its key and SAN URIs. */
export function readCsr(pem: string): ParsedCsr {
  const der = csrDer(pem);
  let parsed: { info: DerElement; spki: Uint8Array; uris: string[]; hash: string; signature: Uint8Array };
  try {
    parsed = parse(der);
  } catch (e) {
    if (e instanceof CaError) throw e;
    throw new CaError("signing", `CSR is not a valid PEM certificate request: ${errorMessage(e)}`, undefined, { cause: e });
  }
  let ok: boolean;
  try {
    const key = createPublicKey({ key: Buffer.from(parsed.spki), format: "der", type: "spki" });
    ok = verify(parsed.hash, rawOf(der, parsed.info), key, parsed.signature);
  } catch (e) {
    throw new CaError("signing", `CSR signature cannot be checked: ${errorMessage(e)}`, undefined, { cause: e });
  }
  if (!ok) throw new CaError("signing", "CSR signature does not verify");
  return { spki: parsed.spki, uris: parsed.uris };
}

function parse(der: Uint8Array) {
  const top = readElement(der, 0, der.length, "CertificationRequest");
  if (top.end !== der.length) throw new CaError("signing", `CSR is not a valid PEM certificate request: ${der.length - top.end} bytes after it`);
  const [info, sigAlg, sig] = expectChildren(der, top, SEQUENCE, "CertificationRequest", 3);
  const [, , spki, attrs] = expectChildren(der, info, SEQUENCE, "CertificationRequestInfo", 3);
  if (!spki || spki.tag !== SEQUENCE) throw new CaError("signing", "CSR is not a valid PEM certificate request: no subjectPKInfo");
  const algOid = readOid(der, expectChildren(der, sigAlg, SEQUENCE, "signatureAlgorithm", 1)[0]!, "signatureAlgorithm");
  const hash = SIGNATURE_HASH[algOid];
  if (!hash) throw new CaError("signing", `CSR signature algorithm ${algOid} is not one the local CA accepts (RSA PKCS#1 v1.5 or ECDSA with SHA-256/384/512)`);
  if (!sig || sig.tag !== BIT_STRING || sig.end === sig.content || der[sig.content] !== 0)
    throw new CaError("signing", "CSR is not a valid PEM certificate request: its signature is not a whole-byte BIT STRING");
  return {
    info,
    spki: rawOf(der, spki),
    uris: attrs && attrs.tag === ATTRIBUTES ? sanUris(der, attrs) : [],
    hash,
    signature: der.subarray(sig.content + 1, sig.end),
  };
}

/** The URIs of the subjectAltName extension inside the extensionRequest attribute, if any. */
function sanUris(der: Uint8Array, attrs: DerElement): string[] {
  for (const attr of children(der, attrs, "attribute")) {
    const [type, values] = expectChildren(der, attr, SEQUENCE, "attribute", 2);
    if (readOid(der, type!, "attribute type") !== OID.extensionRequest) continue;
    for (const exts of expectChildren(der, values, SET, "extensionRequest values")) {
      for (const ext of expectChildren(der, exts, SEQUENCE, "extensions")) {
        const parts = expectChildren(der, ext, SEQUENCE, "extension", 2);
        if (readOid(der, parts[0]!, "extension id") !== OID.subjectAltName) continue;
        const value = parts[parts.length - 1]!;
        if (value.tag !== OCTET_STRING || (parts.length === 3 && parts[1]!.tag !== BOOLEAN))
          throw new CaError("signing", "CSR subjectAltName extension is malformed");
        const inner = contentOf(der, value);
        const names = readElement(inner, 0, inner.length, "subjectAltName");
        return expectChildren(inner, names, SEQUENCE, "subjectAltName")
          .filter((n) => n.tag === SAN_URI)
          .map((n) => new TextDecoder().decode(contentOf(inner, n)));
      }
    }
  }
  return [];
}
