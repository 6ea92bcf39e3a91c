// The CA client: istio.v1.auth.IstioCertificateService/CreateCertificate over grpc-js to istiod
// (or any Istio-compatible CA). TLS with the configured root unless plaintext (:15010); metadata
// ClusterID, CA_HEADER_* and `authorization: Bearer <token>` (token re-read per request); Istio's
// retries; after any failure the connection is rebuilt so a rotated root file is picked up.

import * as grpc from "@grpc/grpc-js";
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import { checkServerIdentity, createSecureContext } from "node:tls";
import { complianceTls } from "../lib/compliance.ts";

const IP_SNI_PLACEHOLDER = "ip-address.invalid";
import { CaError } from "./errors.ts";
import type { CaClientOptions } from "./options.ts";
import { caCodec, caServiceDefinition, CREATE_CERTIFICATE_PATH, type CaCodec, type CertificateRequest, type CertificateResponse } from "./proto.ts";
import { CA_MAX_ATTEMPTS, isRetriable, retryDelayMs } from "./retry.ts";
import type { CertificateSigner } from "./signer.ts";
import type { TokenSource } from "./token.ts";
import { pemBlocks } from "./pem.ts";
import { FILE_LIMITS, readBoundedFileSync } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

export interface CaClientDeps {
  tokens: TokenSource;
  /** Sleep between retries (injected clock); resolves false if aborted. */
  sleep: (ms: number) => Promise<boolean>;
  random?: () => number;
  /** Called once per retry (metric num_outgoing_retries). */
  onRetry?: () => void;
  /** Per-attempt deadline; default 10s so a stalled CA cannot hang rotation. */
  attemptTimeoutMs?: number;
}

export class IstioCaClient implements CertificateSigner {
  readonly name = "istiod";
  private client: grpc.Client | undefined;
  private codecCache: CaCodec | undefined;

  constructor(
    readonly opts: CaClientOptions,
    private readonly deps: CaClientDeps,
  ) {}

  /** The CA schema, parsed on the first CSR rather than at construction. */
  private get codec(): CaCodec {
    return (this.codecCache ??= caCodec());
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
        this.reset(); // rebuild the connection: picks up a rotated root, drops a broken channel
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
    this.client?.close();
    this.client = undefined;
  }

  private checkChain(res: CertificateResponse): string[] {
    const chain = res.certChain.flatMap((c) => pemBlocks(c, "CERTIFICATE"));
    if (chain.length < 2) {
      throw new CaError("bad-response", `CA ${this.opts.address} returned ${chain.length} certificate(s); want the workload certificate and at least the root`);
    }
    return chain;
  }

  private connect(): grpc.Client {
    if (this.client) return this.client;
    const o = this.opts;
    let creds: grpc.ChannelCredentials;
    const channelOpts: grpc.ChannelOptions = {};
    if (!o.tls) {
      creds = grpc.credentials.createInsecure();
    } else {
      let root: Buffer | null = null;
      if (o.rootCertPath && o.rootCertPath !== "SYSTEM") {
        try {
          root = readBoundedFileSync(o.rootCertPath, FILE_LIMITS.certificate);
        } catch (e) {
          throw new CaError(
            "config",
            `CA root certificate ${o.rootCertPath}: ${errorMessage(e)} (set CA_ROOT_CA, or mount the istio-ca-root-cert configmap)`,
            undefined,
            { cause: e },
          );
        }
      }
      let key: Buffer | null = null;
      let cert: Buffer | null = null;
      if (o.clientCertPath && o.clientKeyPath && existsSync(o.clientCertPath) && existsSync(o.clientKeyPath)) {
        key = readBoundedFileSync(o.clientKeyPath, FILE_LIMITS.certificate);
        cert = readBoundedFileSync(o.clientCertPath, FILE_LIMITS.certificate);
      }
      // COMPLIANCE_POLICY restricts versions, suites and curves here as for the istiod connection.
      const secure = createSecureContext({ ...(root ? { ca: root } : {}), ...(key && cert ? { key, cert } : {}), ...complianceTls(o.compliancePolicy ?? "") });
      const name = o.serverName;
      if (name && isIP(name) !== 0) {
        // Bun refuses an IP as TLS server name (SNI) where Node only warns; grpc-js always sets
        // one. Send a placeholder name and check the certificate against the IP ourselves.
        creds = grpc.credentials.createFromSecureContext(secure, { checkServerIdentity: (_host, c) => checkServerIdentity(name, c) });
        channelOpts["grpc.ssl_target_name_override"] = IP_SNI_PLACEHOLDER;
      } else {
        creds = grpc.credentials.createFromSecureContext(secure);
        if (name) {
          channelOpts["grpc.ssl_target_name_override"] = name;
          channelOpts["grpc.default_authority"] = name;
        }
      }
    }
    const Ctor = grpc.makeGenericClientConstructor(caServiceDefinition(this.codec), "IstioCertificateService");
    this.client = new Ctor(o.address, creds, channelOpts);
    return this.client;
  }

  private async call(req: CertificateRequest): Promise<CertificateResponse> {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.opts.headers)) md.set(k, v);
    const token = await this.deps.tokens.token();
    if (token) md.set("authorization", `Bearer ${token}`);
    const client = this.connect();
    const deadline = Date.now() + (this.deps.attemptTimeoutMs ?? 10_000);
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        CREATE_CERTIFICATE_PATH,
        (r: CertificateRequest) => this.codec.encodeRequest(r),
        (b: Buffer) => this.codec.decodeResponse(b),
        req,
        md,
        { deadline },
        (err, res) => {
          if (err) return reject(this.describe(err, token !== undefined));
          resolve(res!);
        },
      );
    });
  }

  private describe(err: grpc.ServiceError, hadToken: boolean): CaError {
    const where = `CA ${this.opts.address}`;
    if (err.code === grpc.status.UNAUTHENTICATED || err.code === grpc.status.PERMISSION_DENIED) {
      const why = hadToken ? `rejected the token from ${this.deps.tokens.describe}` : `refused the request: no token at ${this.deps.tokens.describe}`;
      return new CaError("rejected-token", `${where} ${why}: ${err.details || err.message}`, err.code);
    }
    return new CaError(
      err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED ? "unavailable" : "signing",
      `${where}: CSR failed: ${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`,
      err.code,
    );
  }
}
