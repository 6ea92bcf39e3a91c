// The CA client: istio.v1.auth.IstioCertificateService/CreateCertificate to istiod (or any
// Istio-compatible CA), a unary gRPC call over the agent's own HTTP/2 client (src/xds/unary.ts).
// TLS with the configured root unless plaintext (:15010); metadata ClusterID, CA_HEADER_* and
// `authorization: Bearer <token>` (token re-read per request); Istio's retries; the connection is
// kept between CSRs, and after any failure it is dropped so the next dial re-reads a rotated root.

import { clientCertProblem } from "./inspect.ts";
import { RootBundleCheck } from "./rootcheck.ts";
import { TlsContextCache } from "./tlscontext.ts";
import { missingRootHint } from "./options.ts";
import { existsSync } from "node:fs";
import type { Duplex } from "node:stream";
import { isIP } from "node:net";
import { CaError } from "./errors.ts";
import { csrMetadata } from "./metadata.ts";
import type { CaClientOptions } from "./options.ts";
import { CA_MAX_ATTEMPTS, isRetriable, retryDelayMs } from "./retry.ts";
import type { CertificateSigner } from "./signer.ts";
import { caTarget, type CaTarget } from "./target.ts";
import { CREATE_CERTIFICATE_PATH, decodeCertificateResponse, encodeCertificateRequest, type CertificateRequest, type CertificateResponse } from "./wire.ts";
import type { TokenSource } from "./token.ts";
import { pemBlocks } from "./pem.ts";
import { FILE_LIMITS, readBoundedFileSync } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";
import { dialSocket } from "../xds/dial.ts";
import { codeName } from "../xds/grpcstatus.ts";
import { Code } from "../xds/types.ts";
import { GrpcCallError, UnaryChannel } from "../xds/unary.ts";

/** In an error's text when the CA sent a status without a grpc-message. */
const NO_MESSAGE = "(no grpc-message)";

/**
 * A CSR attempt's deadline. Istio's CA client sets none (it waits for the CA's answer); ours is a
 * bound so a stalled CA cannot hang rotation, long enough that a CA busy with a start storm is not
 * asked twice (each expiry is a second CSR; docs/scale.md).
 */
export const CA_ATTEMPT_TIMEOUT_MS = 30_000;

export interface CaClientDeps {
  tokens: TokenSource;
  /** Sleep between retries (injected clock); resolves false if aborted. */
  sleep: (ms: number) => Promise<boolean>;
  random?: () => number;
  /** Called once per retry (metric num_outgoing_retries). */
  onRetry?: () => void;
  /** Per-attempt deadline (default 30 s: Istio has none; a bound so a stalled CA cannot hang rotation). */
  attemptTimeoutMs?: number;
  /** Close the connection after this long without a CSR (default: gRPC's 30 minutes). */
  idleMs?: number;
  /** Largest response accepted (default: gRPC's 4 MiB). */
  maxResponseBytes?: number;
  /** The clock, for the PROV_CERT certificate's expiry (default: none checked). */
  now?: () => number;
  /** Why a PROV_CERT certificate was left out of a connection. */
  warn?: (message: string) => void;
}

export class IstioCaClient implements CertificateSigner {
  readonly name = "istiod";
  private channelCache: UnaryChannel | undefined;
  /** The root is parsed once per content, not at every dial (each CSR retry dials). */
  private readonly rootCheck = new RootBundleCheck();
  /** One TLS context per content of the root and client certificate, not one per dial. */
  private readonly contexts = new TlsContextCache();

  constructor(
    readonly opts: CaClientOptions,
    private readonly deps: CaClientDeps,
  ) {}

  /** Connections dialed so far. */
  get dials(): number {
    return this.channelCache?.dials ?? 0;
  }

  /** Root bundles parsed so far (once per content). */
  get rootParses(): number {
    return this.rootCheck.parses;
  }

  /** TLS contexts made so far (once per content of the root and client certificate). */
  get tlsContexts(): number {
    return this.contexts.made;
  }

  async sign(csrPem: string, ttlSeconds: number): Promise<string[]> {
    const req: CertificateRequest = { csr: csrPem, validityDuration: Math.round(ttlSeconds) };
    if (this.opts.csrMetadata) req.metadata = this.opts.csrMetadata;
    const random = this.deps.random ?? Math.random;
    let last: CaError | undefined;
    for (let attempt = 0; attempt < CA_MAX_ATTEMPTS; attempt++) {
      if (attempt > 0) {
        this.deps.onRetry?.();
        if (!(await this.deps.sleep(retryDelayMs(attempt, random)))) break;
      }
      try {
        const res = await this.call(req);
        return this.checkChain(res);
      } catch (e) {
        this.reset(); // redial on the next attempt: picks up a rotated root, drops a broken connection
        last = e instanceof CaError ? e : new CaError("unavailable", String(e));
        if (!isRetriable(last.code)) break;
      }
    }
    throw last ?? new CaError("unavailable", `CSR to ${this.opts.address} aborted`);
  }

  close(): void {
    this.reset();
  }

  private reset(): void {
    this.channelCache?.close();
  }

  private checkChain(res: CertificateResponse): string[] {
    const chain = res.certChain.flatMap((c) => pemBlocks(c, "CERTIFICATE"));
    if (chain.length < 2) {
      throw new CaError("bad-response", `CA ${this.opts.address} returned ${chain.length} certificate(s); want the workload certificate and at least the root`);
    }
    return chain;
  }

  private channel(): UnaryChannel {
    if (this.channelCache) return this.channelCache;
    const o = this.opts;
    const target = caTarget(o.address);
    // gRPC sends the server name as :authority when one is configured (not an IP: that is only checked).
    const named = o.tls && o.serverName && isIP(o.serverName) === 0;
    this.channelCache = new UnaryChannel({
      dial: () => this.dial(target),
      scheme: o.tls ? "https" : "http",
      authority: named ? o.serverName! : target.authority,
      ...(this.deps.idleMs !== undefined ? { idleMs: this.deps.idleMs } : {}),
      ...(this.deps.maxResponseBytes !== undefined ? { maxResponseBytes: this.deps.maxResponseBytes } : {}),
    });
    return this.channelCache;
  }

  /** A new connection: the root and client certificate are read here, so each dial sees the files as they are. */
  private dial(target: CaTarget): Duplex {
    const o = this.opts;
    if (!o.tls) return dialSocket({ host: target.host, port: target.port });
    let ca: Buffer | undefined;
    if (o.rootCertPath && o.rootCertPath !== "SYSTEM") {
      try {
        ca = readBoundedFileSync(o.rootCertPath, FILE_LIMITS.certificate);
      } catch (e) {
        throw new CaError(
          "config",
          `CA root certificate ${o.rootCertPath}: ${errorMessage(e)} (${o.missingRootHint ?? missingRootHint(true, "CA_ROOT_CA")})`,
          undefined,
          {
            cause: e,
          },
        );
      }
      // TLS would only say "Invalid CA", naming no file.
      const problem = this.rootCheck.problem(o.rootCertPath, ca);
      if (problem) throw new CaError("config", `${problem} (the CA connection's root; CA_ROOT_CA names another file)`);
    }
    let key: Buffer | undefined;
    let cert: Buffer | undefined;
    if (o.clientCertPath && o.clientKeyPath && existsSync(o.clientCertPath) && existsSync(o.clientKeyPath)) {
      cert = readBoundedFileSync(o.clientCertPath, FILE_LIMITS.certificate);
      const unusable = this.deps.now ? clientCertProblem(cert, this.deps.now()) : undefined;
      if (unusable) {
        // As Istio (pilot/pkg/grpc/tls.go): the connection goes without it, on the token alone.
        this.deps.warn?.(`PROV_CERT certificate ${o.clientCertPath} ${unusable}: using the token instead`);
        cert = undefined;
      } else key = readBoundedFileSync(o.clientKeyPath, FILE_LIMITS.certificate);
    }
    // COMPLIANCE_POLICY restricts versions, suites and curves here as for the istiod connection.
    return dialSocket({
      host: target.host,
      port: target.port,
      tls: this.contexts.with({ ca, cert, key, servername: o.serverName ?? "", compliancePolicy: o.compliancePolicy ?? "" }),
    });
  }

  private async call(req: CertificateRequest): Promise<CertificateResponse> {
    const token = await this.deps.tokens.token();
    const metadata = csrMetadata(this.opts.headers, token, this.deps.tokens.describe);
    const channel = this.channel();
    const body = encodeCertificateRequest(req);
    try {
      const bytes = await channel.call(CREATE_CERTIFICATE_PATH, metadata, body, this.deps.attemptTimeoutMs ?? CA_ATTEMPT_TIMEOUT_MS);
      return this.decode(bytes);
    } catch (e) {
      throw e instanceof GrpcCallError ? this.describe(e, token !== undefined) : e;
    }
  }

  /** The response message; one that does not parse fails as grpc does (INTERNAL, retried). */
  private decode(bytes: Uint8Array): CertificateResponse {
    try {
      return decodeCertificateResponse(bytes);
    } catch (e) {
      throw new GrpcCallError(Code.INTERNAL, `Response message parsing error: ${errorMessage(e)}`);
    }
  }

  private describe(err: GrpcCallError, hadToken: boolean): CaError {
    const where = `CA ${this.opts.address}`;
    if (err.code === Code.UNAUTHENTICATED || err.code === 7 /* PERMISSION_DENIED */) {
      const why = hadToken ? `rejected the token from ${this.deps.tokens.describe}` : `refused the request: no token at ${this.deps.tokens.describe}`;
      return new CaError("rejected-token", `${where} ${why}: ${err.details || NO_MESSAGE}`, err.code);
    }
    return new CaError(
      err.code === Code.UNAVAILABLE || err.code === Code.DEADLINE_EXCEEDED ? "unavailable" : "signing",
      `${where}: CSR failed: ${codeName(err.code)}: ${err.details || NO_MESSAGE}`,
      err.code,
    );
  }
}
