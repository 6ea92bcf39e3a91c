// Errors of the certificate side: what failed (CSR, token, CA call, key generation) and where
// (CA address, file path). Never carries a private key or a token.

export type CaErrorKind = "config" | "keygen" | "token" | "rejected-token" | "unavailable" | "bad-response" | "signing";

export class CaError extends Error {
  override name = "CaError";
  constructor(
    readonly kind: CaErrorKind,
    message: string,
    /** gRPC status code when the CA answered with one. */
    readonly code?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
