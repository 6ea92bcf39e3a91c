// The secret cache (Istio's SecretManagerClient): answers SDS resource names, issues the workload
// certificate through a CertificateSigner, renews it before expiry, and tells subscribers when a
// resource changes. Beyond Istio: renewal is proactive and a failed renewal keeps the valid
// certificate in service, retrying with capped backoff (as ztunnel); readiness reports the trouble
// once the certificate is close to expiry.

import { dirname, resolve } from "node:path";
import { existsSync } from "node:fs";
import { certInfo, joinPem, keyMatchesCert, mergeRoots, pemBlocks } from "../ca/pem.ts";
import { generateKeyAndCsr, type KeyAndCsr, type KeyOptions } from "../ca/keygen.ts";
import type { CertificateSigner } from "../ca/signer.ts";
import type { Logger } from "../lib/log.ts";
import type { Blocker } from "../lib/readiness.ts";
import type { Clock, TimerHandle } from "../lib/clock.ts";
import { SdsError } from "./errors.ts";
import { FileSecrets } from "./filesecrets.ts";
import { contentVersion, type SecretItem } from "./item.ts";
import type { SecretMetrics } from "./metrics.ts";
import type { OutputCertsWriter } from "./output.ts";
import { parseResourceName, ROOT_CA, SYSTEM_ROOT_PATHS, WORKLOAD_KEY_CERT } from "./resources.ts";
import { backoffMs, closeToExpiry, jitteredRatio, RENEW_BACKOFF, rotationDelayMs, type RotationPolicy } from "./rotation.ts";
import { errorMessage } from "../lib/errors.ts";

export interface WorkloadFiles {
  certChainPath: string;
  keyPath: string;
  rootCertPath: string;
}

export interface SecretCacheOptions {
  /** Who signs CSRs; undefined = no CA (files only). */
  signer?: CertificateSigner;
  keyOptions: KeyOptions;
  spiffeId: string;
  ttlSeconds: number;
  rotation: RotationPolicy;
  debounceMs: number;
  /** How long failing certificate file reads are retried (default 10s, as Istio). */
  fileRetryMs?: number;
  /** `default`/`ROOTCA` come from these files when they exist (./etc/certs, workload-spiffe-credentials). */
  workloadFiles?: WorkloadFiles;
  output?: OutputCertsWriter;
  /** CRL file attached to root resources when it exists (PILOT_ENABLE_CA_CRL). */
  crlPath?: string;
  systemRootPaths?: string[];
}

export interface SecretCacheDeps {
  log: Logger;
  metrics: SecretMetrics;
  clock: Clock;
  random?: () => number;
  /** Raised while renewal fails and the certificate is close to expiry. */
  renewalBlocker?: Blocker;
  /** Key + CSR generation (tests may count or slow it). */
  generateKey?: (o: KeyOptions, spiffe: string) => Promise<KeyAndCsr>;
}

export type SecretListener = (resourceName: string) => void;

/** What the cache holds, for the operator's view (/debug/config_dump): public certificates only, never a key. */
export interface SecretCacheSnapshot {
  spiffeId: string;
  /** The signer's name (`istiod`, `local`), absent without a CA. */
  signer?: string;
  workload?: { chainPem: string; rootPem?: string; createdMs: number; expireMs: number };
  /** A CSR is being signed now. */
  signing: boolean;
  /** Consecutive failed renewals (0 when the last one succeeded). */
  renewFailures: number;
  lastError?: { message: string; atMs: number };
  /** ROOTCA as last served (merged with the trust bundle). */
  rootPem?: string;
  files: ReturnType<FileSecrets["snapshot"]>;
}

export class SecretCache {
  private workload: SecretItem | undefined;
  private caRoot: string | undefined;
  private inflight: Promise<SecretItem> | undefined;
  private renewTimer: TimerHandle | undefined;
  private renewFailures = 0;
  private trustBundle: string[] = [];
  private lastRootVersion: string | undefined;
  private lastRootPem: string | undefined;
  private lastError: { message: string; atMs: number } | undefined;
  private closed = false;
  private readonly listeners = new Set<SecretListener>();
  readonly files: FileSecrets;
  private readonly random: () => number;

  constructor(
    readonly opts: SecretCacheOptions,
    private readonly deps: SecretCacheDeps,
  ) {
    this.random = deps.random ?? Math.random;
    this.files = new FileSecrets({
      log: deps.log,
      metrics: deps.metrics,
      clock: deps.clock,
      debounceMs: opts.debounceMs,
      ...(opts.fileRetryMs !== undefined ? { retryTotalMs: opts.fileRetryMs } : {}),
      onUpdate: (n) => this.fileChanged(n),
    });
  }

  onUpdate(fn: SecretListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The current secret for an SDS resource name; generates (or reads) it when needed. */
  async get(name: string, signal?: AbortSignal): Promise<SecretItem> {
    const ref = parseResourceName(name);
    switch (ref.kind) {
      case "invalid":
        throw new SdsError(ref.reason, name);
      case "default": {
        const f = this.workloadFile("cert");
        return f ? this.files.certPair(name, f.certChainPath, f.keyPath, signal) : this.workloadCert();
      }
      case "rootca":
        return this.rootCa();
      case "file-cert":
        return this.files.certPair(name, ref.certPath, ref.keyPath, signal);
      case "file-root":
        return this.files.root(name, ref.caPath, signal);
      case "system-root": {
        const path = (this.opts.systemRootPaths ?? SYSTEM_ROOT_PATHS).find((p) => existsSync(p));
        if (!path)
          throw new SdsError(`file-root:system: no OS trust bundle found (looked at ${(this.opts.systemRootPaths ?? SYSTEM_ROOT_PATHS).join(", ")})`, name);
        return this.files.root(name, path, signal);
      }
    }
  }

  /** CRL file to attach to root resources, if configured and present. */
  crlFor(name: string): string | undefined {
    const p = this.opts.crlPath;
    return p && name !== WORKLOAD_KEY_CERT && existsSync(p) ? p : undefined;
  }

  /** PCDS trust bundle (ProxyConfig.caCertificatesPem): merged into ROOTCA. */
  updateTrustBundle(pems: string[]): void {
    const next = mergeRoots(pems.flatMap((p) => pemBlocks(p, "CERTIFICATE")));
    if (next.join("") === this.trustBundle.join("")) return;
    this.trustBundle = next;
    this.deps.log.info(`trust bundle updated from ProxyConfig: ${next.length} certificate(s)`);
    void this.rootChanged();
    // As Istio: a new trust bundle also re-issues the workload certificate.
    if (this.workload && this.opts.signer && !this.workloadFile("cert")) void this.renew();
  }

  /** Read-only view for the operator (no private key ever leaves through it). */
  snapshot(): SecretCacheSnapshot {
    const w = this.workload;
    return {
      spiffeId: this.opts.spiffeId,
      ...(this.opts.signer ? { signer: this.opts.signer.name } : {}),
      ...(w?.certificateChain
        ? { workload: { chainPem: w.certificateChain, ...(w.rootCert ? { rootPem: w.rootCert } : {}), createdMs: w.createdMs, expireMs: w.expireMs } }
        : {}),
      signing: this.inflight !== undefined,
      renewFailures: this.renewFailures,
      ...(this.lastError ? { lastError: { ...this.lastError } } : {}),
      ...(this.lastRootPem ? { rootPem: this.lastRootPem } : {}),
      files: this.files.snapshot(),
    };
  }

  /** Expiry of the workload certificate (ms), if issued. */
  workloadExpiry(): number | undefined {
    return this.workload?.expireMs;
  }

  close(): void {
    this.closed = true;
    this.renewTimer?.cancel();
    this.files.close();
    this.opts.signer?.close?.();
  }

  private emit(name: string): void {
    for (const fn of this.listeners) {
      try {
        fn(name);
      } catch (e) {
        this.deps.log.error(`secret update listener failed for ${name}: ${errorMessage(e)}`);
      }
    }
  }

  /** Workload file paths when they exist and are not our own OUTPUT_CERTS (Istio's rule). */
  private workloadFile(which: "cert" | "root"): WorkloadFiles | undefined {
    const f = this.opts.workloadFiles;
    if (!f) return undefined;
    const out = this.opts.output ? resolve(this.opts.output.dir) : undefined;
    const usable = (p: string) => p !== "" && existsSync(p) && resolve(dirname(p)) !== out;
    if (which === "cert" ? usable(f.certChainPath) && usable(f.keyPath) : usable(f.rootCertPath)) return f;
    return undefined;
  }

  private async rootCa(): Promise<SecretItem> {
    const f = this.workloadFile("root");
    let base: string[];
    if (f) {
      const item = await this.files.root(ROOT_CA, f.rootCertPath);
      base = pemBlocks(item.rootCert ?? "", "CERTIFICATE");
    } else {
      if (this.caRoot === undefined) {
        if (!this.opts.signer)
          throw new SdsError(
            `ROOTCA: no CA configured and no root certificate file${this.opts.workloadFiles ? ` at ${this.opts.workloadFiles.rootCertPath}` : ""}`,
            ROOT_CA,
          );
        await this.workloadCert();
      }
      base = [this.caRoot!];
    }
    const rootCert = joinPem(mergeRoots(base, this.trustBundle));
    const version = contentVersion(rootCert);
    this.lastRootVersion = version;
    this.lastRootPem = rootCert;
    return { resourceName: ROOT_CA, rootCert, createdMs: 0, expireMs: 0, version };
  }

  private async rootChanged(): Promise<void> {
    const before = this.lastRootVersion;
    try {
      const root = await this.rootCa();
      if (root.version !== before) {
        this.emit(ROOT_CA);
        await this.writeOutput(undefined, root.rootCert);
      }
    } catch (e) {
      this.deps.log.warn(`ROOTCA not available yet: ${errorMessage(e)}`);
    }
  }

  private fileChanged(name: string): void {
    if (name === ROOT_CA) {
      void this.rootChanged();
      return;
    }
    this.emit(name);
  }

  private async workloadCert(): Promise<SecretItem> {
    const w = this.workload;
    if (w && w.expireMs > this.deps.clock.now()) return w;
    return this.issue();
  }

  /** One CSR at a time: concurrent callers share the in-flight signing. */
  private issue(): Promise<SecretItem> {
    if (!this.inflight) {
      this.inflight = this.sign()
        .catch((e: unknown) => {
          this.lastError = { message: errorMessage(e), atMs: this.deps.clock.now() };
          throw e;
        })
        .finally(() => {
          this.inflight = undefined;
        });
    }
    return this.inflight;
  }

  private async sign(): Promise<SecretItem> {
    const signer = this.opts.signer;
    if (!signer) {
      const where = this.opts.workloadFiles ? ` at ${this.opts.workloadFiles.certChainPath} / ${this.opts.workloadFiles.keyPath}` : "";
      throw new SdsError(`default: no CA configured and no certificate files${where}`, WORKLOAD_KEY_CERT);
    }
    const { keyPem, csrPem } = await (this.deps.generateKey ?? generateKeyAndCsr)(this.opts.keyOptions, this.opts.spiffeId);
    const m = this.deps.metrics;
    const labels = { request_type: "csr" };
    m.outgoingRequests.inc(labels);
    const t0 = performance.now();
    let chain: string[];
    try {
      chain = await signer.sign(csrPem, this.opts.ttlSeconds);
    } catch (e) {
      m.failedOutgoingRequests.inc(labels);
      throw e;
    } finally {
      m.outgoingLatency.inc(labels, performance.now() - t0);
    }
    const leaf = certInfo(chain[0]!, `certificate from ${signer.name} CA`);
    if (!keyMatchesCert(keyPem, chain[0]!))
      throw new SdsError(`default: the ${signer.name} CA returned a certificate that does not match our key`, WORKLOAD_KEY_CERT);
    const now = this.deps.clock.now();
    const certificateChain = joinPem(chain);
    const root = chain[chain.length - 1]!;
    const item: SecretItem = {
      resourceName: WORKLOAD_KEY_CERT,
      certificateChain,
      privateKey: keyPem,
      rootCert: root,
      createdMs: now,
      expireMs: leaf.notAfter,
      version: contentVersion(certificateChain, keyPem),
    };
    const replaced = this.workload !== undefined;
    const rootChanged = this.caRoot !== undefined && this.caRoot !== root;
    this.workload = item;
    this.caRoot = root;
    m.setExpiry(WORKLOAD_KEY_CERT, leaf.notAfter);
    this.deps.log.info(`workload certificate issued by ${signer.name} CA`, {
      resource: WORKLOAD_KEY_CERT,
      expires: new Date(leaf.notAfter).toISOString(),
      spiffe: this.opts.spiffeId,
    });
    this.scheduleRotation(item);
    if (replaced) this.emit(WORKLOAD_KEY_CERT);
    if (rootChanged) {
      this.deps.log.info("root certificate changed with the new workload certificate: pushing ROOTCA");
      await this.rootChanged();
    }
    let rootBundle: string | undefined;
    try {
      rootBundle = (await this.rootCa()).rootCert;
    } catch {
      rootBundle = undefined;
    }
    await this.writeOutput(item, rootBundle);
    return item;
  }

  private scheduleRotation(item: SecretItem): void {
    if (this.closed) return;
    this.renewTimer?.cancel();
    const now = this.deps.clock.now();
    const delay = rotationDelayMs(item.createdMs, item.expireMs, now, jitteredRatio(this.opts.rotation, this.random));
    this.deps.log.debug(`workload certificate rotation scheduled in ${Math.round(delay / 1000)}s`);
    this.renewTimer = this.deps.clock.timer(delay, () => void this.renew());
  }

  /** Renew now; on failure keep serving the current certificate and retry with backoff. */
  private async renew(): Promise<void> {
    if (this.closed) return;
    this.renewTimer?.cancel();
    try {
      await this.issue();
      if (this.renewFailures > 0) this.deps.log.info(`workload certificate renewed after ${this.renewFailures} failed attempt(s)`);
      this.renewFailures = 0;
      this.deps.renewalBlocker?.clear();
    } catch (e) {
      if (this.closed) return;
      this.renewFailures++;
      const delay = backoffMs(this.renewFailures, RENEW_BACKOFF, this.random);
      const w = this.workload;
      const now = this.deps.clock.now();
      const left = w ? Math.round((w.expireMs - now) / 1000) : 0;
      const msg = `renewing the workload certificate failed (attempt ${this.renewFailures}): ${errorMessage(e)}`;
      this.deps.log.error(`${msg}; still serving the current certificate (expires in ${left}s), retrying in ${(delay / 1000).toFixed(1)}s`);
      if (w && closeToExpiry(w.createdMs, w.expireMs, now)) {
        this.deps.renewalBlocker?.reblock();
        this.deps.renewalBlocker?.fail(`certificate expires in ${left}s and ${msg}`);
      }
      this.renewTimer = this.deps.clock.timer(delay, () => void this.renew());
    }
  }

  /**
   * Resolves once no OUTPUT_CERTS write is under way. Writes run one at a time and none starts after
   * close(), so a shutdown that waits for this leaves key.pem and cert-chain.pem a pair: the agent
   * exiting between the two files of a renewal left a new key beside the old chain (seen in CI).
   */
  outputSettled(): Promise<void> {
    return this.writing;
  }

  private writing: Promise<void> = Promise.resolve();

  private writeOutput(item: SecretItem | undefined, root: string | undefined): Promise<void> {
    const out = this.opts.output;
    if (!out) return Promise.resolve();
    const next = this.writing.then(() => (this.closed ? undefined : this.writeOutputNow(out, item, root)));
    this.writing = next.catch(() => {}); // a failed write (already logged) must not stop the ones after it
    return next;
  }

  private async writeOutputNow(out: OutputCertsWriter, item: SecretItem | undefined, root: string | undefined): Promise<void> {
    try {
      const written = await out.write({ key: item?.privateKey, chain: item?.certificateChain, root });
      if (written.length > 0) this.deps.log.info(`OUTPUT_CERTS: wrote ${written.join(", ")} in ${out.dir}`);
    } catch (e) {
      this.deps.log.error(`${errorMessage(e)}; SDS keeps serving the certificate`);
    }
  }
}
