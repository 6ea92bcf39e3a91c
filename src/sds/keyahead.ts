// The first workload key, started when the SDS component starts instead of when certificate
// warming begins (after Envoy's spawn). Istio's SDS server likewise warms its cache at start.
// An RSA key takes tens to hundreds of milliseconds on node:crypto's worker thread (nothing of it
// runs on the agent's event loop), so generating it while the start path runs leaves only the
// CSR's signature and the CA's answer for when warming begins. Only RSA: an ECDSA key is about a
// millisecond. Used once: keys for rotations are generated when they are needed. If generating it
// fails, the first CSR fails with that error and the warming loop retries with a fresh key.

import { generateKeyAndCsr, startRsaKeyPair, type KeyAndCsr, type KeyOptions, type RsaKeyPairDer } from "../ca/keygen.ts";

export type KeyGenerator = (o: KeyOptions, spiffe: string) => Promise<KeyAndCsr>;

/** Starts the first RSA key now; the generator returned hands it to its first call for the same options. */
export function keyAhead(
  o: KeyOptions,
  start: (modulusLength: number) => RsaKeyPairDer = startRsaKeyPair,
  generate: (o: KeyOptions, spiffe: string, rsaStarted?: RsaKeyPairDer) => Promise<KeyAndCsr> = generateKeyAndCsr,
): KeyGenerator {
  let ahead = o.algorithm === "RSA" ? start(o.rsaKeySize) : undefined;
  // Seen by the first call; until then a failure must not count as an unhandled rejection.
  ahead?.catch(() => {});
  return (ko, spiffe) => {
    const started = ahead && ko.algorithm === "RSA" && ko.rsaKeySize === o.rsaKeySize ? ahead : undefined;
    ahead = undefined;
    return generate(ko, spiffe, started);
  };
}
