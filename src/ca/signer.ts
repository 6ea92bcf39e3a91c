// The pluggable signing step: istiod's CA over gRPC (client.ts) or the in-process CA (local.ts).

export interface CertificateSigner {
  /** Short name for logs and metrics (`istiod`, `local`). */
  readonly name: string;
  /**
   * Sign a PEM CSR for `ttlSeconds`. Resolves to the PEM chain, workload certificate first and the
   * root last (at least two entries). Rejects with a CaError.
   */
  sign(csrPem: string, ttlSeconds: number): Promise<string[]>;
  /** Release connections. */
  close?(): void;
  /** Start building what sign() needs (code, a root) in the background, ahead of the first CSR. */
  prepare?(): void;
}
