// @peculiar/x509 for the tests: an independent reader of the certificates and requests the agent
// writes by hand (src/ca/csr.ts, src/ca/certwrite.ts). The agent itself loads no ASN.1 library
// (docs/memory.md).

type X509Module = typeof import("@peculiar/x509");

/** Loads @peculiar/x509 once per process on first use (it needs the reflect-metadata polyfill first). */
export async function loadX509(): Promise<X509Module> {
  await import("reflect-metadata");
  const x509 = await import("@peculiar/x509");
  x509.cryptoProvider.set(globalThis.crypto);
  return x509;
}
