// An in-process CA (CA_PROVIDER=local, beyond Istio): signs workload CSRs with a root held in
// memory, either generated at start (ECDSA P-256, self-signed, 10 years) or loaded from
// LOCAL_CA_DIR (root-cert.pem + root-key.pem). Used for local mode without istiod, and by the
// test CA. The CSR's signature is verified and only its SAN URIs are copied into the certificate.
// Certificates are written as DER by hand (certwrite.ts) and requests read by hand (pkcs10.ts):
// no ASN.1 library is loaded (docs/memory.md).

import { createPrivateKey, generateKeyPairSync, X509Certificate } from "node:crypto";
import { join } from "node:path";
import { CaError } from "./errors.ts";
import { keyIdentifier, selfSignedRoot, signerFor, workloadCertificate, type Signer } from "./certwrite.ts";
import { readCsr } from "./pkcs10.ts";
import type { CertificateSigner } from "./signer.ts";
import { FILE_LIMITS, readBoundedText } from "../lib/boundedfile.ts";
import { contentOf, expectChildren, rawOf, readElement, readOid, type DerElement } from "../lib/derread.ts";
import { errorMessage } from "../lib/errors.ts";

const ROOT_LIFETIME_MS = 10 * 365 * 86_400_000;
/** Certificates start a minute in the past, for clocks a little behind the CA's. */
const BACKDATE_MS = 60_000;
const SUBJECT_KEY_IDENTIFIER = "2.5.29.14";

export interface LocalCaRoot {
  certPem: string;
  /** PKCS#8 (or PKCS#1/SEC1: converted) private key PEM of the root. */
  keyPem: string;
}

export interface IssuedCsr {
  /** SAN URIs requested by the CSR. */
  uris: string[];
}

/** What signing needs of the root: its subject as bytes, its key id, its expiry. */
interface RootFields {
  subject: Uint8Array;
  keyId: Uint8Array;
  notAfterMs: number;
}

export class LocalCa implements CertificateSigner {
  readonly name = "local";

  private constructor(
    private readonly root: RootFields,
    private readonly signer: Signer,
    readonly rootPem: string,
    private readonly now: () => number,
  ) {}

  /** A fresh self-signed ECDSA P-256 root. */
  static async generate(opts: { trustDomain?: string; now?: () => number } = {}): Promise<LocalCa> {
    const now = opts.now ?? Date.now;
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const spki = new Uint8Array(publicKey.export({ type: "spki", format: "der" }));
    const t = now();
    const certPem = selfSignedRoot({
      organization: opts.trustDomain ?? "cluster.local",
      spki,
      subjectPublicKey: subjectPublicKeyOf(spki),
      signer: signerFor(privateKey),
      notBeforeMs: t - BACKDATE_MS,
      notAfterMs: t + ROOT_LIFETIME_MS,
    });
    return new LocalCa(rootFields(certPem), signerFor(privateKey), certPem, now);
  }

  /** Root from PEM strings (key in PKCS#8, PKCS#1 or SEC1). */
  static async fromPem(root: LocalCaRoot, now: () => number = Date.now): Promise<LocalCa> {
    const key = createPrivateKey(root.keyPem);
    const fields = rootFields(root.certPem);
    const cert = new X509Certificate(root.certPem);
    if (!cert.checkPrivateKey(key)) throw new Error("root-key.pem is not the key of root-cert.pem");
    return new LocalCa(fields, signerFor(key), cert.toString().trim() + "\n", now);
  }

  /** LOCAL_CA_DIR: root-cert.pem and root-key.pem. */
  static async fromDir(dir: string, now: () => number = Date.now): Promise<LocalCa> {
    const read = async (name: string) => {
      try {
        return await readBoundedText(join(dir, name), { maxBytes: FILE_LIMITS.certificate });
      } catch (e) {
        throw new CaError("config", `LOCAL_CA_DIR: reading ${join(dir, name)}: ${errorMessage(e)}`, undefined, { cause: e });
      }
    };
    try {
      return await LocalCa.fromPem({ certPem: await read("root-cert.pem"), keyPem: await read("root-key.pem") }, now);
    } catch (e) {
      if (e instanceof CaError) throw e;
      throw new CaError("config", `LOCAL_CA_DIR ${dir}: root-cert.pem/root-key.pem unusable: ${errorMessage(e)}`, undefined, { cause: e });
    }
  }

  /** Parse and verify a CSR; returns what it asks for. */
  async inspectCsr(csrPem: string): Promise<IssuedCsr> {
    return { uris: readCsr(csrPem).uris };
  }

  async sign(csrPem: string, ttlSeconds: number): Promise<string[]> {
    const { spki, uris } = readCsr(csrPem);
    if (uris.length === 0) throw new CaError("signing", "CSR has no URI SAN (want spiffe://<trust domain>/ns/<ns>/sa/<sa>)");
    const now = this.now();
    const leaf = workloadCertificate({
      issuer: this.root.subject,
      authorityKeyId: this.root.keyId,
      spki,
      uris,
      signer: this.signer,
      notBeforeMs: now - BACKDATE_MS,
      notAfterMs: Math.min(now + ttlSeconds * 1000, this.root.notAfterMs),
    });
    return [leaf, this.rootPem];
  }
}

/** The subjectPublicKey BIT STRING's bytes (unused-bits byte dropped) of a SubjectPublicKeyInfo. */
function subjectPublicKeyOf(spki: Uint8Array): Uint8Array {
  const [, bits] = expectChildren(spki, readElement(spki, 0, spki.length, "SubjectPublicKeyInfo"), 0x30, "SubjectPublicKeyInfo", 2);
  if (bits!.tag !== 0x03) throw new Error("SubjectPublicKeyInfo: no subjectPublicKey BIT STRING");
  return contentOf(spki, bits!).subarray(1);
}

/** The root's subject (as bytes), key id (its subjectKeyIdentifier, else computed) and expiry. */
function rootFields(certPem: string): RootFields {
  const cert = new X509Certificate(certPem);
  if (!cert.ca) throw new Error("root-cert.pem is not a CA certificate (basicConstraints CA:TRUE)");
  const der = new Uint8Array(cert.raw);
  const [tbs] = expectChildren(der, readElement(der, 0, der.length, "certificate"), 0x30, "certificate", 3);
  const fields = expectChildren(der, tbs, 0x30, "tbsCertificate", 6);
  const at = fields[0]!.tag === 0xa0 ? 1 : 0; // [0] version is present in v3 certificates
  const subject = fields[at + 4]!;
  const spki = fields[at + 5]!;
  const keyId =
    subjectKeyId(
      der,
      fields.find((f) => f.tag === 0xa3),
    ) ?? keyIdentifier(subjectPublicKeyOf(rawOf(der, spki)));
  return { subject: rawOf(der, subject).slice(), keyId, notAfterMs: Date.parse(cert.validTo) };
}

function subjectKeyId(der: Uint8Array, extensions: DerElement | undefined): Uint8Array | undefined {
  if (!extensions) return undefined;
  const [list] = expectChildren(der, extensions, 0xa3, "extensions", 1);
  for (const ext of expectChildren(der, list, 0x30, "extensions")) {
    const parts = expectChildren(der, ext, 0x30, "extension", 2);
    if (readOid(der, parts[0]!) !== SUBJECT_KEY_IDENTIFIER) continue;
    const value = contentOf(der, parts[parts.length - 1]!);
    return contentOf(value, readElement(value, 0, value.length, "subjectKeyIdentifier")).slice();
  }
  return undefined;
}
