// A fake istiod CA for tests and benchmarks: a real grpc-js server over TLS speaking
// istio.v1.auth.IstioCertificateService. It checks the bearer token and the CSR (signature, SPIFFE
// SAN), signs with an in-memory LocalCa, and can be told to fail, stall or reject the token.
// The CSR is read with @peculiar/x509 directly, not with the project's own CSR inspection, so a
// fault there cannot hide behind the same fault in the fake.

import * as grpc from "@grpc/grpc-js";
import { createPrivateKey } from "node:crypto";
import { caCodec, caServiceDefinition, type CertificateRequest, type CertificateResponse } from "../../src/ca/proto.ts";
import { LocalCa } from "../../src/ca/local.ts";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(globalThis.crypto);

/** URI SANs of a CSR whose signature verifies; throws naming the problem otherwise. */
export async function csrUris(csrPem: string): Promise<string[]> {
  const csr = new x509.Pkcs10CertificateRequest(csrPem);
  if (!(await csr.verify())) throw new Error("CSR signature does not verify");
  const raw = csr.extensions.find((e) => e.type === "2.5.29.17"); // subjectAltName
  const names = raw ? new x509.SubjectAlternativeNameExtension(raw.rawData).names.items : [];
  return names.filter((n) => n.type === "url").map((n) => n.value);
}

export type FakeCaMode = "ok" | "fail" | "stall" | "reject-token" | "short-chain";

export interface FakeCaRequest {
  csr: string;
  validityDuration: number;
  metadata: Record<string, string>;
  headers: Record<string, string>;
  uris: string[];
}

export interface FakeCaOptions {
  /** Expected bearer token; undefined = any (or none). */
  token?: string;
  /** Expected SPIFFE ID in the CSR; undefined = any. */
  spiffeId?: string;
  /** Plaintext instead of TLS. */
  plaintext?: boolean;
  signer?: LocalCa;
}

export interface TlsMaterial {
  rootPem: string;
  certPem: string;
  keyPem: string;
}

/** A TLS root and a serving certificate for istiod.istio-system.svc / localhost / 127.0.0.1. */
export async function servingCert(dnsNames = ["istiod.istio-system.svc", "localhost"]): Promise<TlsMaterial> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const rootKeys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const now = Date.now();
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=fake istiod TLS root",
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 86_400_000),
    keys: rootKeys,
    signingAlgorithm: alg,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
  });
  const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: "02",
    subject: "CN=istiod",
    issuer: root.subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 86_400_000),
    publicKey: keys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: alg,
    extensions: [
      new x509.SubjectAlternativeNameExtension([...dnsNames.map((d) => ({ type: "dns" as const, value: d })), { type: "ip", value: "127.0.0.1" }]),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
    ],
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  const keyPem = createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" }).export({ type: "pkcs8", format: "pem" }).toString();
  return { rootPem: root.toString("pem") + "\n", certPem: cert.toString("pem") + "\n", keyPem };
}

export class FakeCa {
  mode: FakeCaMode = "ok";
  failCode = grpc.status.UNAVAILABLE;
  readonly requests: FakeCaRequest[] = [];
  private readonly stalled: (() => void)[] = [];

  private constructor(
    private readonly server: grpc.Server,
    readonly address: string,
    readonly tls: TlsMaterial | undefined,
    public signer: LocalCa,
    readonly opts: FakeCaOptions,
  ) {}

  /** The root that signs workload certificates (ROOTCA). */
  get caRootPem(): string {
    return this.signer.rootPem;
  }

  static async start(opts: FakeCaOptions = {}): Promise<FakeCa> {
    const signer = opts.signer ?? (await LocalCa.generate());
    const tls = opts.plaintext ? undefined : await servingCert();
    const server = new grpc.Server();
    const creds = tls
      ? grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(tls.keyPem), cert_chain: Buffer.from(tls.certPem) }], false)
      : grpc.ServerCredentials.createInsecure();
    const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", creds, (err, p) => (err ? reject(err) : resolve(p))));
    const ca = new FakeCa(server, `127.0.0.1:${port}`, tls, signer, opts);
    server.addService(caServiceDefinition(caCodec()), {
      CreateCertificate: (call: grpc.ServerUnaryCall<CertificateRequest, CertificateResponse>, cb: grpc.sendUnaryData<CertificateResponse>) =>
        void ca.handle(call, cb),
    });
    return ca;
  }

  private async handle(call: grpc.ServerUnaryCall<CertificateRequest, CertificateResponse>, cb: grpc.sendUnaryData<CertificateResponse>): Promise<void> {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.metadata.getMap())) headers[k] = String(v);
    const req = call.request;
    let uris: string[] = [];
    try {
      uris = await csrUris(req.csr);
    } catch (e) {
      return cb({ code: grpc.status.INVALID_ARGUMENT, details: (e as Error).message });
    }
    this.requests.push({ csr: req.csr, validityDuration: req.validityDuration, metadata: req.metadata ?? {}, headers, uris });
    if (this.mode === "stall") {
      this.stalled.push(() => cb({ code: grpc.status.UNAVAILABLE, details: "fake CA closing" }));
      return;
    }
    if (this.mode === "fail") return cb({ code: this.failCode, details: "fake CA told to fail" });
    const auth = headers["authorization"];
    if (this.mode === "reject-token" || (this.opts.token !== undefined && auth !== `Bearer ${this.opts.token}`)) {
      return cb({ code: grpc.status.UNAUTHENTICATED, details: "authenticate failure: token invalid or expired" });
    }
    if (this.opts.spiffeId !== undefined && !uris.includes(this.opts.spiffeId)) {
      return cb({ code: grpc.status.PERMISSION_DENIED, details: `CSR SAN ${uris.join(",")} does not match ${this.opts.spiffeId}` });
    }
    try {
      const chain = await this.signer.sign(req.csr, req.validityDuration);
      cb(null, { certChain: this.mode === "short-chain" ? chain.slice(0, 1) : chain });
    } catch (e) {
      cb({ code: grpc.status.INTERNAL, details: (e as Error).message });
    }
  }

  async close(): Promise<void> {
    for (const r of this.stalled.splice(0)) r();
    this.server.forceShutdown();
  }
}
