// The secret manager component: picks the signer (istiod's CA, the local CA, or none for mounted
// files), builds the secret cache, serves SDS on the right socket (unless DISABLE_ENVOY), warms
// `default` and `ROOTCA` in the background (readiness blocker "certificate warmed"), and takes
// PCDS trust bundles. `createSecretManager` is what src/agent.ts calls.
// Off the start path: the CA client (grpc-js, its schema) and a generated local root are built on
// the first CSR, and warming starts once `warmAfter` resolves (the agent spawned Envoy); the first
// RSA key is generated on a worker thread from the moment the manager is built (keyahead.ts).

import { FILE_LIMITS, readBoundedTextSync } from "../lib/boundedfile.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CaError } from "../ca/errors.ts";
import type { AgentConfig } from "../config/agentconfig.ts";
import { lazySigner } from "../ca/lazy.ts";
import type { CertificateSigner } from "../ca/signer.ts";
import { tokenSourceFor, type TokenSource } from "../ca/token.ts";
import { FailureReport, type Component } from "../lib/component.ts";
import type { TrustBundleSink } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import { pilotXdsMetrics } from "../lib/pilot-xds-metrics.ts";
import { PeerAuthorizer } from "../lib/peerauth.ts";
import { READINESS, type Blocker, type Readiness } from "../lib/readiness.ts";
import { SecretCache } from "./cache.ts";
import { keyAhead, type KeyGenerator } from "./keyahead.ts";
import type { KeyOptions } from "../ca/keygen.ts";
import { clockSleep, systemClock, type Clock } from "../lib/clock.ts";
import { detectSdsMode, WORKLOAD_SDS_DIR, type SdsMode } from "./external.ts";
import { SecretMetrics } from "./metrics.ts";
import { secretManagerOptionsFrom, type SecretManagerOptions } from "./options.ts";
import { OutputCertsWriter } from "./output.ts";
import { ROOT_CA, WORKLOAD_KEY_CERT } from "./resources.ts";
import { backoffMs, WARM_BACKOFF } from "./rotation.ts";
import { SdsServer } from "./server.ts";
import { errorMessage } from "../lib/errors.ts";

export interface SecretManagerDeps {
  log: Logger;
  registry: Registry;
  readiness: Readiness;
  clock?: Clock;
  random?: () => number;
  /** Replace the signer (tests, benchmarks). */
  signer?: CertificateSigner;
  /** Warming (the first CSR) waits for this; default: starts at once. */
  warmAfter?: Promise<unknown>;
  /** The credential fetcher's token source (CREDENTIAL_FETCHER_TYPE other than JWT); default: the token file. */
  tokens?: TokenSource;
  /** Starts the first key ahead (tests); default: keyahead.ts. */
  keyAhead?: (o: KeyOptions) => KeyGenerator;
}

/** A readiness warning registered only while raised (reblock) and removed on clear. */
function lazyBlocker(readiness: Readiness, name: string): Blocker {
  let b: Blocker | undefined;
  return {
    reblock: () => {
      b = b ?? readiness.warn(name);
      b.reblock();
    },
    fail: (err) => b?.fail(err),
    clear: () => readiness.clear(name),
  };
}

export class SecretManager implements Component, TrustBundleSink {
  readonly name = "sds";
  /** Which socket is served; set by start(). */
  mode: SdsMode | undefined;
  cache: SecretCache | undefined;
  server: SdsServer | undefined;
  private readonly clock: Clock;
  private readonly metrics: SecretMetrics;
  private readonly warmed: Blocker;
  private pendingBundle: string[] | undefined;
  private signer: CertificateSigner | undefined;
  private running: Promise<void> = Promise.resolve();
  /** The first key, started when the manager is built; undefined where no CSR is expected. */
  private readonly firstKey: KeyGenerator | undefined;
  private readonly failure = new FailureReport();
  /** The SDS server's listener died after start. */
  readonly failed = this.failure.failed;

  constructor(
    readonly opts: SecretManagerOptions,
    private readonly deps: SecretManagerDeps,
  ) {
    this.clock = deps.clock ?? systemClock;
    this.metrics = new SecretMetrics(deps.registry, this.clock);
    this.warmed = deps.readiness.warn(READINESS.certificateWarmed);
    // The key starts here, when the agent is built (a few milliseconds after the configuration is
    // loaded), rather than in start(), whose SDS socket check and signer come 10-20 ms later on a
    // busy start path: the key is most of the time to the first certificate (docs/startup.md).
    // Not where no CSR is expected: no CA, or a socket file that may be an external SDS server's
    // (start() decides; a stale one gets its key there).
    const mayBeExternal = opts.serveSds && existsSync(join(opts.root, WORKLOAD_SDS_DIR, opts.socketFile));
    this.firstKey = opts.signer.kind !== "none" && !mayBeExternal ? (deps.keyAhead ?? keyAhead)(opts.keyOptions) : undefined;
  }

  async start(signal: AbortSignal): Promise<void> {
    const o = this.opts;
    const log = this.deps.log;
    this.mode = o.serveSds ? await detectSdsMode(o.root, o.socketFile) : undefined;
    const filesOnly = this.mode?.kind === "files-only";
    if (filesOnly)
      log.info(
        `external SDS server found on ${(this.mode as { externalSocket: string }).externalSocket}: serving file certificates only on ${this.mode!.socketPath}`,
      );
    const signer = filesOnly ? undefined : (this.deps.signer ?? (await this.makeSigner()));
    this.signer = signer;
    const cache = new SecretCache(
      {
        ...(signer ? { signer } : {}),
        keyOptions: o.keyOptions,
        spiffeId: o.spiffeId,
        ttlSeconds: o.ttlSeconds,
        rotation: o.rotation,
        debounceMs: o.debounceMs,
        ...(filesOnly ? {} : { workloadFiles: o.workloadFiles }),
        ...(o.outputDir && !filesOnly ? { output: new OutputCertsWriter(o.outputDir, o.outputMode, o.signer.kind === "local") } : {}),
        ...(o.crlPath ? { crlPath: o.crlPath } : {}),
      },
      {
        log,
        metrics: this.metrics,
        clock: this.clock,
        ...(this.deps.random ? { random: this.deps.random } : {}),
        ...(signer ? { generateKey: this.firstKey ?? (this.deps.keyAhead ?? keyAhead)(o.keyOptions) } : {}),
        renewalBlocker: lazyBlocker(this.deps.readiness, READINESS.certificateRenewal),
      },
    );
    this.cache = cache;
    if (this.pendingBundle) cache.updateTrustBundle(this.pendingBundle);
    if (this.mode) {
      const authorizer = new PeerAuthorizer(o.authorizedUids, o.ownUid);
      this.server = new SdsServer(
        { socketPath: this.mode.socketPath, authorizer, maxConcurrentStreams: o.maxStreams, maxReceiveMessageSize: o.maxRecvMsgSize },
        { log, secrets: cache, clock: this.clock, xdsMetrics: pilotXdsMetrics(this.deps.registry) },
      );
      await this.server.start();
      void this.server.failed.then((e) => this.failure.report(e));
    }
    const after = this.deps.warmAfter ?? Promise.resolve();
    const server = this.server;
    if (server) void after.then(() => server.prepare()).catch((e: Error) => log.error(`SDS: cannot load the SDS schema: ${e.message}`));
    if (filesOnly) this.warmed.clear();
    else this.running = after.then(() => this.warm(cache, signal));
    signal.addEventListener("abort", () => void this.shutdown(), { once: true });
  }

  /** Warming done, and after a stop the OUTPUT_CERTS write under way (if any) finished. */
  stopped(): Promise<void> {
    return this.running.then(() => this.cache?.outputSettled());
  }

  updateTrustBundle(pemCerts: string[]): void {
    if (this.cache) this.cache.updateTrustBundle(pemCerts);
    else this.pendingBundle = pemCerts;
  }

  private async makeSigner(): Promise<CertificateSigner | undefined> {
    const s = this.opts.signer;
    const log = this.deps.log;
    switch (s.kind) {
      case "none":
        log.info(`no CA client: ${s.why}`);
        log.info("Workload is using file mounted certificates. Skipping connecting to CA");
        return undefined;
      case "local": {
        // A root from files is checked at start (a bad directory stops the agent); a generated
        // one is made with the first CSR.
        const trustDomain = this.opts.trustDomain;
        const ca = s.dir
          ? await (await import("../ca/local.ts")).LocalCa.fromDir(s.dir)
          : lazySigner("local", async () => (await import("../ca/local.ts")).LocalCa.generate({ trustDomain }));
        log.info(`CA_PROVIDER=local: signing workload certificates in process${s.dir ? ` with the root from ${s.dir}` : " with a generated root"}`);
        return ca;
      }
      case "istiod": {
        // As Istio's createCitadel: a TLS CA whose root file is missing stops the agent at start.
        const root = s.ca.rootCertPath;
        if (s.ca.tls && s.ca.rootMustExist && root && root !== "SYSTEM" && !existsSync(root)) {
          throw new CaError(
            "config",
            `root CA file for CA does not exist ${root} (CA_ADDR ${s.ca.address}: ${s.ca.missingRootHint ?? "set CA_ROOT_CA"}, or use a :15010 plaintext CA_ADDR)`,
          );
        }
        const retries = this.metrics.outgoingRetries;
        const random = this.deps.random;
        // Istio's lines (pkg/istio-agent agent.go, plugins.go), then ours with the details.
        log.info(`CA Endpoint ${s.ca.address}, provider Citadel`);
        if (!s.ca.tls) log.warn("Debug mode or IP-secure network");
        else if (s.ca.rootCertPath === "SYSTEM" || !s.ca.rootCertPath) log.info(`Using CA ${s.ca.address} cert with system certs`);
        else log.info(`Using CA ${s.ca.address} cert with certs: ${s.ca.rootCertPath}`);
        log.info(`CA client: ${s.ca.address} (${s.ca.tls ? `TLS, root ${s.ca.rootCertPath}, server name ${s.ca.serverName}` : "plaintext"})`);
        // A missing or expired token is otherwise silent while the CA is unreachable.
        if (!this.deps.tokens && ["", "JWT"].includes(s.credentialFetcher.trim())) await this.warnAboutToken(s.tokenPath);
        return lazySigner("istiod", async () => {
          const { IstioCaClient } = await import("../ca/client.ts");
          return new IstioCaClient(s.ca, {
            tokens: this.deps.tokens ?? tokenSourceFor(s.credentialFetcher, s.tokenPath),
            sleep: (ms) => clockSleep(this.clock, ms),
            ...(random ? { random } : {}),
            onRetry: () => retries.inc({ request_type: "csr" }),
            now: () => this.clock.now(),
            warn: (m) => log.warn(m),
          });
        });
      }
    }
  }

  /** Warn when the CA's token file is missing, empty, not a JWT or past its `exp` (the token never logged). */
  private async warnAboutToken(path: string): Promise<void> {
    let text: string | undefined;
    try {
      // Synchronous: this is on SDS's start path (its socket waits for it, and Envoy for the socket),
      // and an asynchronous read would start Bun's file thread pool for one small file.
      text = readBoundedTextSync(path, FILE_LIMITS.token);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
        this.deps.log.warn(`token file ${path} cannot be read: ${errorMessage(e)}; the CA will refuse certificate requests`);
        return;
      }
    }
    const { tokenProblem } = await import("../ca/inspect.ts");
    const problem = tokenProblem(path, text, this.clock.now());
    if (problem)
      this.deps.log.warn(
        `${problem}: the CA will refuse certificate requests (on a VM, copy the istio-token made by \`istioctl x workload entry configure\` there)`,
      );
  }

  /** Generate `default` then `ROOTCA`, retrying forever with backoff until both succeed. */
  private async warm(cache: SecretCache, signal: AbortSignal): Promise<void> {
    let failures = 0;
    // e.g. the local CA's root, made while the workload key is generated (after pending I/O).
    const signer = this.signer;
    if (signer?.prepare) setImmediate(() => signer.prepare!());
    for (const name of [WORKLOAD_KEY_CERT, ROOT_CA]) {
      for (;;) {
        if (signal.aborted) return;
        try {
          await cache.get(name);
          break;
        } catch (e) {
          failures++;
          const msg = `${name}: ${errorMessage(e)}`;
          this.warmed.fail(msg);
          const delay = backoffMs(failures, WARM_BACKOFF, this.deps.random ?? Math.random);
          this.deps.log.warn(`warming certificates failed (attempt ${failures}), retrying in ${(delay / 1000).toFixed(1)}s: ${msg}`);
          if (!(await clockSleep(this.clock, delay, signal))) return;
        }
      }
    }
    this.warmed.clear();
    this.deps.log.info("certificates warmed: default and ROOTCA ready");
  }

  private async shutdown(): Promise<void> {
    await this.server?.close();
    this.cache?.close();
  }
}

/** The factory src/agent.ts calls. */
export function createSecretManager(cfg: AgentConfig, deps: SecretManagerDeps): SecretManager {
  return new SecretManager(secretManagerOptionsFrom(cfg), deps);
}
