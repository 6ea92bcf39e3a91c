// A signer whose code and state are built on its first CSR: the agent's start path does not pay
// for loading grpc-js and the CA schema (istiod's CA) or for generating a root (the local CA).
// A failed build is not cached: the next CSR (the secret cache retries with backoff) tries again.

import type { CertificateSigner } from "./signer.ts";

export function lazySigner(name: string, build: () => Promise<CertificateSigner>): CertificateSigner {
  let building: Promise<CertificateSigner> | undefined;
  let built: CertificateSigner | undefined;
  let closed = false;
  const start = (): Promise<CertificateSigner> =>
    (building ??= build().then(
      (s) => {
        if (closed) s.close?.();
        return (built = s);
      },
      (e: unknown) => {
        building = undefined;
        throw e;
      },
    ));
  return {
    name,
    async sign(csrPem, ttlSeconds) {
      return (await start()).sign(csrPem, ttlSeconds);
    },
    prepare() {
      start().catch(() => {}); // a failure is reported by the sign() that retries it
    },
    close() {
      closed = true;
      built?.close?.();
    },
  };
}
