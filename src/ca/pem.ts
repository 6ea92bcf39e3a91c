// PEM helpers shared by the CA client and the secret cache: split bundles, read a certificate's
// validity with node:crypto (native, fast: no ASN.1 library on the hot path).

import { X509Certificate, createPrivateKey } from "node:crypto";
import { CaError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;

/** Every PEM block of `type` (default any) in `text`, normalised to end with a newline. */
export function pemBlocks(text: string, type?: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(PEM_BLOCK)) {
    if (type === undefined || m[1] === type) out.push(m[0].trim() + "\n");
  }
  return out;
}

/** DER as one PEM block of `type` (64-character lines, ending with a newline). */
export function derToPem(type: string, der: Uint8Array): string {
  const lines =
    Buffer.from(der)
      .toString("base64")
      .match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${type}-----\n${lines.join("\n")}\n-----END ${type}-----\n`;
}

/** Concatenate PEM blocks, each ending with one newline. */
export function joinPem(blocks: readonly string[]): string {
  return blocks.map((b) => (b.endsWith("\n") ? b : b + "\n")).join("");
}

export interface CertInfo {
  notBefore: number;
  notAfter: number;
  subject: string;
  /** URI SANs, e.g. spiffe://cluster.local/ns/default/sa/default. */
  uris: string[];
  fingerprint: string;
}

export function certInfo(pem: string, what = "certificate"): CertInfo {
  let c: X509Certificate;
  try {
    c = new X509Certificate(pem);
  } catch (e) {
    throw new CaError("bad-response", `${what}: not a valid PEM certificate (${errorMessage(e)})`, undefined, { cause: e });
  }
  const uris = (c.subjectAltName ?? "")
    .split(/,\s*/)
    .filter((s) => s.startsWith("URI:"))
    .map((s) => s.slice(4));
  return { notBefore: Date.parse(c.validFrom), notAfter: Date.parse(c.validTo), subject: c.subject, uris, fingerprint: c.fingerprint256 };
}

/** True when `keyPem` is the private key of `certPem`'s public key. */
export function keyMatchesCert(keyPem: string, certPem: string): boolean {
  try {
    return new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}

/** Certificates of a bundle that parse; invalid ones are dropped and counted (Istio tolerates them in roots). */
export function validCerts(text: string): { certs: string[]; invalid: number } {
  const certs: string[] = [];
  let invalid = 0;
  for (const b of pemBlocks(text, "CERTIFICATE")) {
    try {
      new X509Certificate(b);
      certs.push(b);
    } catch {
      invalid++;
    }
  }
  return { certs, invalid };
}

/** Merge root bundles: deduplicated, sorted, so the same set always yields the same bytes. */
export function mergeRoots(...bundles: readonly (readonly string[])[]): string[] {
  const set = new Set<string>();
  for (const b of bundles) for (const c of b) set.add(c.trim() + "\n");
  return [...set].sort();
}
