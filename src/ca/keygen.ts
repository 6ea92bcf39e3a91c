// Workload key and CSR generation (Istio's pki/util generate_csr.go): RSA (WORKLOAD_RSA_KEY_SIZE)
// or ECDSA P-256/P-384 with WebCrypto, the CSR built and signed by @peculiar/x509 with Istio's
// subject (an empty Organization) and a critical SAN extension carrying the SPIFFE URI. Keys are written as PKCS#1 /
// SEC1 like Istio, or PKCS#8 with PKCS8_KEY. The ASN.1 library is imported on first use so it
// costs nothing at the agent's start.

import { createPrivateKey, generateKeyPair, type webcrypto } from "node:crypto";
import { CaError } from "./errors.ts";

export interface KeyOptions {
  algorithm: "RSA" | "ECDSA";
  /** RSA modulus bits, at least 2048. */
  rsaKeySize: number;
  curve: "P256" | "P384";
  /** PEM as PKCS#8 (`PRIVATE KEY`) instead of PKCS#1/SEC1. */
  pkcs8: boolean;
}

export interface KeyAndCsr {
  keyPem: string;
  csrPem: string;
}

export function spiffeId(trustDomain: string, namespace: string, serviceAccount: string): string {
  return `spiffe://${trustDomain}/ns/${namespace}/sa/${serviceAccount}`;
}

/** Map Istio's env vars to key options; a bad value is a CaError naming the variable. */
export function keyOptionsFromEnv(env: { ECC_SIGNATURE_ALGORITHM: string; ECC_CURVE: string; WORKLOAD_RSA_KEY_SIZE: number; PKCS8_KEY: boolean }): KeyOptions {
  const alg = env.ECC_SIGNATURE_ALGORITHM.trim().toUpperCase();
  if (alg !== "" && alg !== "ECDSA")
    throw new CaError("config", `ECC_SIGNATURE_ALGORITHM: "${env.ECC_SIGNATURE_ALGORITHM}" is not supported (want ECDSA or empty for RSA)`);
  const curve = env.ECC_CURVE.trim().toUpperCase() || "P256"; // Istio: anything but P384 is P256; "" is not an error
  if (curve !== "P256" && curve !== "P384") throw new CaError("config", `ECC_CURVE: "${env.ECC_CURVE}" is not supported (want P256 or P384)`);
  if (alg === "" && env.WORKLOAD_RSA_KEY_SIZE < 2048)
    throw new CaError("config", `WORKLOAD_RSA_KEY_SIZE: ${env.WORKLOAD_RSA_KEY_SIZE} is below the minimum 2048`);
  return { algorithm: alg === "ECDSA" ? "ECDSA" : "RSA", rsaKeySize: env.WORKLOAD_RSA_KEY_SIZE, curve, pkcs8: env.PKCS8_KEY };
}

type X509Module = typeof import("@peculiar/x509");

/** Loads @peculiar/x509 once per process on first use (it needs the reflect-metadata polyfill first). */
export async function loadX509(): Promise<X509Module> {
  await import("reflect-metadata");
  const x509 = await import("@peculiar/x509");
  x509.cryptoProvider.set(globalThis.crypto);
  return x509;
}

function algorithms(o: KeyOptions): { gen: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams; sign: { name: string; hash?: string } } {
  if (o.algorithm === "ECDSA") {
    const p384 = o.curve === "P384";
    return { gen: { name: "ECDSA", namedCurve: p384 ? "P-384" : "P-256" }, sign: { name: "ECDSA", hash: p384 ? "SHA-384" : "SHA-256" } };
  }
  return {
    gen: { name: "RSASSA-PKCS1-v1_5", modulusLength: o.rsaKeySize, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    sign: { name: "RSASSA-PKCS1-v1_5" },
  };
}

/** A fresh private key and a CSR for `spiffe` (the SAN URI). */
export async function generateKeyAndCsr(o: KeyOptions, spiffe: string): Promise<KeyAndCsr> {
  const alg = algorithms(o);
  // The key is asked for first: an RSA key is made on a worker thread while this one loads x509.
  const keygen = (
    o.algorithm === "RSA"
      ? rsaKeyPair(alg.gen as webcrypto.RsaHashedKeyGenParams)
      : (crypto.subtle.generateKey(alg.gen, true, ["sign", "verify"]) as Promise<CryptoKeyPair>)
  ).catch((e: Error) => {
    throw new CaError("keygen", `generating a ${o.algorithm === "RSA" ? `RSA-${o.rsaKeySize}` : `ECDSA ${o.curve}`} key: ${e.message}`);
  });
  keygen.catch(() => {}); // awaited below
  // Let pending I/O (connections, probes) in before the x509 code's long synchronous load.
  await new Promise<void>((r) => setImmediate(r));
  const x509 = await loadX509();
  const keys = await keygen;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    // Istio's GenCSRTemplate: Organization [""], an empty PrintableString "O=" attribute.
    name: "O=",
    keys,
    signingAlgorithm: alg.sign,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: "url", value: spiffe }], true)],
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { keyPem: privateKeyPem(pkcs8, o), csrPem: csr.toString("pem") + "\n" };
}

/**
 * RSA keys come from node:crypto's generateKeyPair, which runs on a worker thread: Bun's WebCrypto
 * RSA generation blocks the event loop (~80 ms for 2048 bits measured here), which would stall the
 * agent's start and every socket it serves. The key is then imported into WebCrypto for signing.
 */
async function rsaKeyPair(gen: webcrypto.RsaHashedKeyGenParams): Promise<CryptoKeyPair> {
  const { publicKey, privateKey } = await new Promise<{ publicKey: Buffer; privateKey: Buffer }>((resolve, reject) =>
    generateKeyPair(
      "rsa",
      {
        modulusLength: gen.modulusLength,
        publicExponent: 0x10001,
        publicKeyEncoding: { type: "spki", format: "der" },
        privateKeyEncoding: { type: "pkcs8", format: "der" },
      },
      (err, pub, priv) => (err ? reject(err) : resolve({ publicKey: pub, privateKey: priv })),
    ),
  );
  const params = { name: gen.name, hash: gen.hash } as webcrypto.RsaHashedImportParams;
  return {
    privateKey: await crypto.subtle.importKey("pkcs8", new Uint8Array(privateKey), params, true, ["sign"]),
    publicKey: await crypto.subtle.importKey("spki", new Uint8Array(publicKey), params, true, ["verify"]),
  };
}

/** PKCS#8 DER -> PEM in the form Istio writes: PKCS#1 for RSA, SEC1 for EC, or PKCS#8. */
export function privateKeyPem(pkcs8Der: Buffer, o: Pick<KeyOptions, "algorithm" | "pkcs8">): string {
  const key = createPrivateKey({ key: pkcs8Der, format: "der", type: "pkcs8" });
  const type = o.pkcs8 ? "pkcs8" : o.algorithm === "RSA" ? "pkcs1" : "sec1";
  return key.export({ type, format: "pem" }).toString();
}
