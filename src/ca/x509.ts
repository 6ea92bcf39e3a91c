// @peculiar/x509, loaded on first use: the local CA (CA_PROVIDER=local) builds and signs
// certificates with it. Nothing on istiod's CA path loads it (the CSR is written by src/ca/csr.ts),
// so a pod whose certificates come from istiod never pays its 3.7 MiB (docs/memory.md).

type X509Module = typeof import("@peculiar/x509");

/** Loads @peculiar/x509 once per process on first use (it needs the reflect-metadata polyfill first). */
export async function loadX509(): Promise<X509Module> {
  await import("reflect-metadata");
  const x509 = await import("@peculiar/x509");
  x509.cryptoProvider.set(globalThis.crypto);
  return x509;
}
