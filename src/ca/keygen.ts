// Workload key and CSR generation (Istio's pki/util generate_csr.go): RSA (WORKLOAD_RSA_KEY_SIZE)
// or ECDSA P-256/P-384 with WebCrypto, the CSR written and signed by src/ca/csr.ts with Istio's
// subject (an empty Organization) and a critical SAN extension carrying the SPIFFE URI. Keys are
// written as PKCS#1 / SEC1 like Istio, or PKCS#8 with PKCS8_KEY (which does not change the CSR).

import { createPrivateKey, generateKeyPair, type webcrypto } from "node:crypto";
import { buildCsr } from "./csr.ts";
import { CaError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

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

/** An RSA key pair as DER, being generated on node:crypto's worker thread. */
export type RsaKeyPairDer = Promise<{ publicKey: Buffer; privateKey: Buffer }>;

/** The key pair WebCrypto is asked for; the CSR's signature follows from the key (src/ca/csr.ts). */
function generateKeys(o: KeyOptions, rsaStarted?: RsaKeyPairDer): Promise<CryptoKeyPair> {
  if (o.algorithm === "ECDSA")
    return crypto.subtle.generateKey({ name: "ECDSA", namedCurve: o.curve === "P384" ? "P-384" : "P-256" }, true, ["sign", "verify"]) as Promise<CryptoKeyPair>;
  return rsaKeyPair(rsaStarted ?? startRsaKeyPair(o.rsaKeySize));
}

/**
 * A fresh private key and a CSR for `spiffe` (the SAN URI). `rsaStarted`: an RSA key pair already
 * being generated for these options (src/sds/keyahead.ts), used instead of starting another.
 */
export async function generateKeyAndCsr(o: KeyOptions, spiffe: string, rsaStarted?: RsaKeyPairDer): Promise<KeyAndCsr> {
  const keys = await generateKeys(o, rsaStarted).catch((e: unknown) => {
    throw new CaError("keygen", `generating a ${o.algorithm === "RSA" ? `RSA-${o.rsaKeySize}` : `ECDSA ${o.curve}`} key: ${errorMessage(e)}`, undefined, {
      cause: e,
    });
  });
  const csrPem = await buildCsr(keys, spiffe);
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { keyPem: privateKeyPem(pkcs8, o), csrPem };
}

/**
 * RSA keys come from node:crypto's generateKeyPair, which runs on a worker thread: Bun's WebCrypto
 * RSA generation blocks the event loop (~80 ms for 2048 bits measured here), which would stall the
 * agent's start and every socket it serves. The key is then imported into WebCrypto for signing.
 */
export function startRsaKeyPair(modulusLength: number): RsaKeyPairDer {
  return new Promise((resolve, reject) =>
    generateKeyPair(
      "rsa",
      {
        modulusLength,
        publicExponent: 0x10001,
        publicKeyEncoding: { type: "spki", format: "der" },
        privateKeyEncoding: { type: "pkcs8", format: "der" },
      },
      (err, pub, priv) => (err ? reject(err) : resolve({ publicKey: pub, privateKey: priv })),
    ),
  );
}

async function rsaKeyPair(started: RsaKeyPairDer): Promise<CryptoKeyPair> {
  const { publicKey, privateKey } = await started;
  const params: webcrypto.RsaHashedImportParams = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
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
