// X.509 v3 certificates (RFC 5280) written as DER and signed with node:crypto, the two shapes the
// local CA issues: its self-signed root and the workload certificates it signs. The fields are
// those Istio's CA writes: a random positive 128-bit serial, the issuer's subject copied as its
// bytes (so name chaining compares equal), an empty subject with a critical SPIFFE URI SAN for a
// workload, digitalSignature|keyEncipherment and serverAuth|clientAuth, the authority key id.
// Why by hand: the ASN.1 library this replaced cost a local-mode pod 3.7 MiB of private memory
// (docs/memory.md), and a certificate is a handful of DER elements.

import { createHash, randomBytes, sign, type KeyObject } from "node:crypto";
import {
  bitString,
  boolean,
  contextConstructed,
  contextPrimitive,
  type Der,
  derNull,
  directoryString,
  ia5Bytes,
  namedBits,
  octetString,
  oid,
  sequence,
  setOf1,
  smallInteger,
  time,
  unsignedInteger,
} from "../lib/der.ts";
import { derToPem } from "./pem.ts";

const OID = {
  organizationName: "2.5.4.10",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  clientAuth: "1.3.6.1.5.5.7.3.2",
  sha256WithRSAEncryption: "1.2.840.113549.1.1.11",
  ecdsaWithSHA256: "1.2.840.10045.4.3.2",
  ecdsaWithSHA384: "1.2.840.10045.4.3.3",
} as const;

/** KeyUsage bits (RFC 5280 §4.2.1.3). */
const KU = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 } as const;

export interface Signer {
  key: KeyObject;
  /** node:crypto's digest name for sign(). */
  hash: "sha256" | "sha384";
  /** The AlgorithmIdentifier written into the certificate. */
  identifier: Der;
}

/** How `key` (a CA's private key) signs: ECDSA P-256 with SHA-256, P-384 with SHA-384, RSA with SHA-256. */
export function signerFor(key: KeyObject): Signer {
  const type = key.asymmetricKeyType;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (type === "rsa") return { key, hash: "sha256", identifier: sequence(oid(OID.sha256WithRSAEncryption), derNull()) };
  if (type === "ec" && (curve === "prime256v1" || curve === "P-256")) return { key, hash: "sha256", identifier: sequence(oid(OID.ecdsaWithSHA256)) };
  if (type === "ec" && (curve === "secp384r1" || curve === "P-384")) return { key, hash: "sha384", identifier: sequence(oid(OID.ecdsaWithSHA384)) };
  throw new Error(`a ${[type, curve].filter(Boolean).join(" ")} key cannot sign certificates here (want RSA, or ECDSA P-256 or P-384)`);
}

/** A Name with one attribute: O=`organization`. */
export const organizationName = (organization: string): Der => sequence(setOf1(sequence(oid(OID.organizationName), directoryString(organization))));

/** A random positive serial of 128 bits (its top bit clear, so the INTEGER needs no sign byte). */
function serial(): Der {
  const b = randomBytes(16);
  b[0]! &= 0x7f;
  if (b[0] === 0) b[0] = 1;
  return unsignedInteger(b);
}

/** RFC 5280 §4.2.1.2 method (1): SHA-1 of the subjectPublicKey BIT STRING's bytes. */
export function keyIdentifier(subjectPublicKey: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha1").update(subjectPublicKey).digest());
}

const extension = (id: string, critical: boolean, value: Der): Der =>
  critical ? sequence(oid(id), boolean(true), octetString(value)) : sequence(oid(id), octetString(value));

interface Tbs {
  issuer: Uint8Array;
  subject: Uint8Array;
  notBeforeMs: number;
  notAfterMs: number;
  spki: Uint8Array;
  extensions: Der[];
}

function signed(tbs: Tbs, signer: Signer): string {
  const info = sequence(
    contextConstructed(0, smallInteger(2)), // v3
    serial(),
    signer.identifier,
    tbs.issuer,
    sequence(time(tbs.notBeforeMs), time(tbs.notAfterMs)),
    tbs.subject,
    tbs.spki,
    contextConstructed(3, sequence(...tbs.extensions)),
  );
  const signature = new Uint8Array(sign(signer.hash, info, signer.key));
  return derToPem("CERTIFICATE", sequence(info, signer.identifier, bitString(signature)));
}

/** A self-signed CA root: O=`organization`, CA:true, keyCertSign|cRLSign, its key id. */
export function selfSignedRoot(o: {
  organization: string;
  spki: Uint8Array;
  subjectPublicKey: Uint8Array;
  signer: Signer;
  notBeforeMs: number;
  notAfterMs: number;
}): string {
  const name = organizationName(o.organization);
  return signed(
    {
      issuer: name,
      subject: name,
      notBeforeMs: o.notBeforeMs,
      notAfterMs: o.notAfterMs,
      spki: o.spki,
      extensions: [
        extension(OID.basicConstraints, true, sequence(boolean(true))),
        extension(OID.keyUsage, true, namedBits([KU.keyCertSign, KU.cRLSign])),
        extension(OID.subjectKeyIdentifier, false, octetString(keyIdentifier(o.subjectPublicKey))),
      ],
    },
    o.signer,
  );
}

/** A workload certificate: empty subject, the URIs as a critical SAN, signed by the issuer. */
export function workloadCertificate(o: {
  issuer: Uint8Array;
  authorityKeyId: Uint8Array;
  spki: Uint8Array;
  uris: readonly string[];
  signer: Signer;
  notBeforeMs: number;
  notAfterMs: number;
}): string {
  const san = sequence(...o.uris.map((u) => contextPrimitive(6, ia5Bytes(u, "SAN URI"))));
  return signed(
    {
      issuer: o.issuer,
      subject: sequence(),
      notBeforeMs: o.notBeforeMs,
      notAfterMs: o.notAfterMs,
      spki: o.spki,
      extensions: [
        extension(OID.keyUsage, true, namedBits([KU.digitalSignature, KU.keyEncipherment])),
        extension(OID.extKeyUsage, false, sequence(oid(OID.serverAuth), oid(OID.clientAuth))),
        extension(OID.basicConstraints, true, sequence()),
        extension(OID.authorityKeyIdentifier, false, sequence(contextPrimitive(0, o.authorityKeyId))),
        extension(OID.subjectAltName, true, san),
      ],
    },
    o.signer,
  );
}
