// An in-process CA (CA_PROVIDER=local, beyond Istio): signs workload CSRs with a root held in
// memory, either generated at start (ECDSA P-256, self-signed, 10 years) or loaded from
// LOCAL_CA_DIR (root-cert.pem + root-key.pem). Used for local mode without istiod, and by the
// test CA. The CSR's signature is verified and only its SAN URIs are copied into the certificate.

import { createPrivateKey, randomBytes } from "node:crypto";
import { join } from "node:path";
import { CaError } from "./errors.ts";
import { loadX509 } from "./x509.ts";
import type { CertificateSigner } from "./signer.ts";
import { FILE_LIMITS, readBoundedText } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

const SAN_OID = "2.5.29.17";

type X509 = Awaited<ReturnType<typeof loadX509>>;

export interface LocalCaRoot {
  certPem: string;
  /** PKCS#8 (or PKCS#1/SEC1: converted) private key PEM of the root. */
  keyPem: string;
}

export interface IssuedCsr {
  /** SAN URIs requested by the CSR. */
  uris: string[];
}

export class LocalCa implements CertificateSigner {
  readonly name = "local";

  private constructor(
    private readonly x509: X509,
    private readonly rootCert: InstanceType<X509["X509Certificate"]>,
    private readonly rootKey: CryptoKey,
    readonly rootPem: string,
    private readonly now: () => number,
  ) {}

  /** A fresh self-signed ECDSA P-256 root. */
  static async generate(opts: { trustDomain?: string; now?: () => number } = {}): Promise<LocalCa> {
    const x509 = await loadX509();
    const now = opts.now ?? Date.now;
    const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
    const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: randomBytes(16)
        .toString("hex")
        .replace(/^[89a-f]/, "1"),
      name: `O=${opts.trustDomain ?? "cluster.local"}`,
      notBefore: new Date(now() - 60_000),
      notAfter: new Date(now() + 10 * 365 * 86_400_000),
      keys,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    return new LocalCa(x509, cert, keys.privateKey, cert.toString("pem") + "\n", now);
  }

  /** Root from PEM strings (key in PKCS#8, PKCS#1 or SEC1). */
  static async fromPem(root: LocalCaRoot, now: () => number = Date.now): Promise<LocalCa> {
    const x509 = await loadX509();
    const cert = new x509.X509Certificate(root.certPem);
    const pkcs8 = createPrivateKey(root.keyPem).export({ type: "pkcs8", format: "der" });
    const alg = cert.publicKey.algorithm as { name: string; namedCurve?: string };
    const importAlg = alg.name === "ECDSA" ? { name: "ECDSA", namedCurve: alg.namedCurve! } : { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    const key = await crypto.subtle.importKey("pkcs8", pkcs8, importAlg, false, ["sign"]);
    return new LocalCa(x509, cert, key, cert.toString("pem") + "\n", now);
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
  async inspectCsr(csrPem: string): Promise<IssuedCsr & { csr: InstanceType<X509["Pkcs10CertificateRequest"]> }> {
    const { x509 } = this;
    let csr: InstanceType<X509["Pkcs10CertificateRequest"]>;
    try {
      csr = new x509.Pkcs10CertificateRequest(csrPem);
    } catch (e) {
      throw new CaError("signing", `CSR is not a valid PEM certificate request: ${errorMessage(e)}`, undefined, { cause: e });
    }
    if (!(await csr.verify())) throw new CaError("signing", "CSR signature does not verify");
    const san = csr.extensions.find((e) => e.type === SAN_OID);
    const uris = (san ? new x509.SubjectAlternativeNameExtension(san.rawData).names.items : []).filter((n) => n.type === "url").map((n) => n.value);
    return { csr, uris };
  }

  async sign(csrPem: string, ttlSeconds: number): Promise<string[]> {
    const { x509 } = this;
    const { csr, uris } = await this.inspectCsr(csrPem);
    if (uris.length === 0) throw new CaError("signing", "CSR has no URI SAN (want spiffe://<trust domain>/ns/<ns>/sa/<sa>)");
    const now = this.now();
    const notAfter = Math.min(now + ttlSeconds * 1000, this.rootCert.notAfter.getTime());
    const alg = this.rootKey.algorithm.name === "ECDSA" ? { name: "ECDSA", hash: "SHA-256" } : { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: randomBytes(16)
        .toString("hex")
        .replace(/^[89a-f]/, "1"),
      subject: "",
      issuer: this.rootCert.subject,
      notBefore: new Date(now - 60_000),
      notAfter: new Date(notAfter),
      publicKey: csr.publicKey,
      signingKey: this.rootKey,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        await x509.AuthorityKeyIdentifierExtension.create(this.rootCert),
        new x509.SubjectAlternativeNameExtension(
          uris.map((u) => ({ type: "url" as const, value: u })),
          true,
        ),
      ],
    });
    return [leaf.toString("pem") + "\n", this.rootPem];
  }
}
