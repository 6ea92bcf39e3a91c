// The composition root: builds every component from the one AgentConfig and starts them in
// Istio's order — status server, DNS proxy, secrets (SDS), xDS relay, gRPC bootstrap, Envoy
// bootstrap, Envoy — and owns shutdown. On the first signal Envoy drains while everything else
// keeps serving (Envoy still needs config, certificates and its health route); when Envoy has
// exited the other components stop. A second signal stops waiting.
//
// The start path (until "Agent started": sockets listening, bootstraps written, Envoy spawned) does
// only what Envoy needs before it runs; everything else waits for `afterStart`: certificate
// warming, the local xDS file, gRPC servers' code behind already-listening sockets, process
// metrics. Subsystems that may be off (DNS proxy, local mode, iptables tracing) are imported only
// when on. Istio does not block Envoy on any of these either (see docs/startup.md).

import type { AgentConfig } from "./config/agentconfig.ts";
import type { Component } from "./lib/component.ts";
import type { LogSink, Logger } from "./lib/log.ts";
import type { LifecycleControl } from "./lib/interfaces.ts";
import { addProcessMetrics, newRegistry, type Registry } from "./lib/metrics.ts";
import { Readiness } from "./lib/readiness.ts";
import { systemClock, type Clock } from "./lib/clock.ts";
import { DrainTrigger } from "./lib/drain.ts";
import { createStatusServer } from "./status/create.ts";
import { dnsProxyEnabled } from "./dns/enabled.ts";
import type { DnsProxy } from "./dns/proxy.ts";
import { createSecretManager, type SecretManager } from "./sds/manager.ts";
import { detectCredentialSocket } from "./sds/external.ts";
import { writeBootstrap, writeGrpcBootstrap } from "./bootstrap/index.ts";
import { createEnvoySupervisor, type EnvoyComponent } from "./envoy/index.ts";
import { createXdsProxy, type XdsProxy } from "./xds/proxy.ts";
import { wasmFromConfig } from "./wasm/factory.ts";
import { MemLimitError, MemoryLimiter, parseGoMemLimit } from "./lib/memlimit.ts";
import type { PlatformInfo } from "./config/metadata.ts";
import type { PlatformDeps } from "./platform/types.ts";
import { errorMessage } from "./lib/errors.ts";

export interface AgentDeps {
  sink: LogSink;
  /** Monotonic clock in ms for the start-path timings (tests inject). */
  now?: () => number;
  /** Time for every component's waits, timers and timestamps (tests pass a manual one). */
  clock?: Clock;
  /** `--log_as_json`, so Envoy's own log matches. */
  logAsJson?: boolean;
  /** Milliseconds since the process started (for the start-up log line). */
  uptimeMs?: () => number;
  /** Edges of platform discovery (tests); the real HTTP, DNS and files when absent. */
  platformDeps?: PlatformDeps;
  /** For GOMEMLIMIT: resident set size and a full collection (default: this process, Bun.gc). */
  memory?: { rss(): number; collect(): void };
  /** The argv prefix that runs the agent again (Envoy is started through it to die with the agent). */
  selfCommand?: readonly string[];
}

/** The workload certificate files mounted into the pod, when the agent serves those (no CA). */
function mountedCertificateFiles(secrets: SecretManager | undefined): string[] {
  if (!secrets || secrets.opts.signer.kind !== "none") return [];
  const w = secrets.opts.workloadFiles;
  return [w.certChainPath, w.keyPath, w.rootCertPath];
}

/** pilot-agent's exit code when its command fails (os.Exit(-1)). */
export const START_FAILURE_EXIT_CODE = 255;

export class Agent {
  readonly registry: Registry;
  readonly readiness: Readiness;
  /** Resolves with the process exit code once the agent has stopped. */
  readonly done: Promise<number>;
  dns?: DnsProxy;
  secrets?: SecretManager;
  /** The xDS relay; also where VM health transitions go. */
  xds?: XdsProxy;
  envoy?: EnvoyComponent;
  private readonly components: Component[] = [];
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly clock: Clock;
  /** Started once Envoy is gone: stops everything but Envoy, waiting up to the shutdown budget. */
  private readonly drain: DrainTrigger;
  private resolveDone!: (code: number) => void;
  /** Resolves when the start path is over (started, failed or aborted): background work may begin. */
  readonly afterStart: Promise<void>;
  private endStartPath!: () => void;
  private exitCode = 0;
  private finishing = false;
  /** A signal or /quitquitquit asked the agent to stop (Istio's context cancelled). */
  private terminating = false;

  constructor(
    readonly config: AgentConfig,
    private readonly deps: AgentDeps,
  ) {
    this.log = deps.sink.logger();
    this.now = deps.now ?? (() => performance.now());
    this.clock = deps.clock ?? systemClock;
    this.drain = new DrainTrigger({ clock: this.clock });
    // Process metrics are added once the start path is over (they cost a few ms to set up).
    this.registry = newRegistry();
    this.readiness = new Readiness(() => this.clock.now());
    this.done = new Promise((r) => (this.resolveDone = r));
    this.afterStart = new Promise((r) => (this.endStartPath = r));
    void this.afterStart
      .then(() => new Promise<void>((r) => setImmediate(r)))
      .then(() => addProcessMetrics(this.registry)).catch((e: Error) => this.log.warn(`process metrics unavailable: ${e.message}`));
  }

  /** Build and start every component; resolves once all are serving and Envoy is spawned. */
  async start(signal: AbortSignal): Promise<void> {
    try {
      await this.startPath(signal);
    } finally {
      this.endStartPath();
    }
    this.startMemoryLimit();
  }

  /** GOMEMLIMIT (set in every injected pod) as the agent's soft memory cap; a bad value is a warning. */
  private startMemoryLimit(): void {
    let limitBytes: number | undefined;
    try {
      limitBytes = parseGoMemLimit(this.config.env.GOMEMLIMIT);
    } catch (e) {
      if (!(e instanceof MemLimitError)) throw e;
      this.log.warn(`${e.message}; no memory limit`);
      return;
    }
    if (limitBytes === undefined) return;
    const memory = this.deps.memory ?? { rss: () => process.memoryUsage.rss(), collect: () => Bun.gc(true) };
    void new MemoryLimiter({ limitBytes, ...memory, log: this.log }).start(this.drain.signal);
  }

  private async startPath(signal: AbortSignal): Promise<void> {
    const t0 = this.now();
    // Per-step durations for the debug log (cheap: a clock read per step).
    const steps: string[] = [];
    let last = t0;
    const step = (what: string) => {
      const t = this.now();
      steps.push(`${what} ${(t - last).toFixed(1)}ms`);
      last = t;
    };
    const cfg = this.config;
    const env = cfg.env;
    const sink = this.deps.sink;
    const common = { registry: this.registry, readiness: this.readiness };
    const envoyEnabled = !env.DISABLE_ENVOY;
    const stop = this.drain.signal;

    const lifecycle: LifecycleControl = {
      quit: () => {
        this.terminating = true;
        return this.envoy ? this.envoy.quit() : this.finish(0);
      },
      drain: async () => {
        if (this.envoy) await this.envoy.drain();
      },
    };
    signal.addEventListener(
      "abort",
      () => {
        this.terminating = true;
        if (!this.envoy) this.finish(0);
      },
      { once: true },
    );

    // Istio discovers the platform before anything starts; here it runs beside the other start
    // steps and only the bootstraps (node metadata, locality) wait for it.
    const platformWait = this.discoverPlatform();
    try {
      const afterStart = this.afterStart;
      if (dnsProxyEnabled(cfg)) {
        const { createDnsProxy } = await import("./dns/factory.ts");
        this.dns = createDnsProxy(cfg, { log: sink.logger("dns"), ...common });
      }
      // CREDENTIAL_FETCHER_TYPE: one token source shared by the CA client and the xDS relay (none for JWT).
      const tokens = env.CREDENTIAL_FETCHER_TYPE === "JWT" ? undefined : (await import("./credentials/index.ts")).credentialFetcherFor(cfg, { log: sink.logger("credentials"), now: () => this.clock.now() });
      this.secrets = createSecretManager(cfg, { log: sink.logger("sds"), ...common, clock: this.clock, warmAfter: afterStart, ...(tokens ? { tokens } : {}) });
      // The control-plane side: the relay towards istiod or, in local mode, towards the in-process
      // file-backed server (whose code is imported only then).
      const local = env.LOCAL_XDS_PATH ? (await import("./local/upstream.ts")).createLocalSide(cfg, { log: sink.logger("localxds"), ...common, afterStart }) : undefined;
      // ECDS Wasm conversion (ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION): its code loads on the first ECDS response.
      const wasm = wasmFromConfig(cfg, { sink, registry: this.registry, now: this.now });
      const upstream = local ? local.upstream : tokens ? (await import("./credentials/upstream.ts")).tokenFirstIstiodUpstream(cfg, tokens, sink.logger("xdsproxy")) : undefined;
      const xds = (this.xds = createXdsProxy(cfg, { log: sink.logger("xdsproxy"), ...common, nameTables: this.dns, trustBundles: this.secrets, dnsEnabled: !!this.dns, ...(upstream ? { upstream } : {}), ...(wasm ? { ecds: wasm.hook } : {}) }));
      // Istio's line (pkg/istio-agent xds_proxy.go) naming where the relay dials and for which cluster.
      const upstreamAddress = local ? local.describe : (cfg.proxyConfig.discoveryAddress ?? "");
      sink.logger("xdsproxy").info(`Initializing with upstream address ${JSON.stringify(upstreamAddress)} and cluster ${JSON.stringify(env.ISTIO_META_CLUSTER_ID || "Kubernetes")}`);
      const tracer = env.IPTABLES_TRACE_LOGGING ? (await import("./iptables/tracer.ts")).createIptablesTracer(cfg, sink.logger("iptables")) : undefined;
      const statusPort = cfg.proxyConfig.statusPort ?? 0;
      const status =
        statusPort > 0
          ? createStatusServer(cfg, {
              log: sink.logger("status"),
              ...common,
              lifecycle,
              ndsz: this.dns ? () => this.dns!.ndsz() : undefined,
              health: xds,
              envoyEnabled,
              shutdown: signal,
              now: () => this.clock.now(),
            })
          : undefined;
      if (!status) this.log.info("status server disabled (statusPort 0)");
      // --stsPort: the token exchange service for Envoy's Google gRPC services (its code loads only then).
      const sts = cfg.flags.stsPort > 0 ? (await import("./sts/index.ts")).createStsServer(cfg, { sink, platform: () => platformWait, now: () => Date.now() }) : undefined;
      step("build");

      // Istio starts the status server before the agent, then DNS, SDS, the xDS proxy. They are
      // started in that order without waiting for one socket to be bound before the next is
      // asked for (a chain stays in order: the local xDS server before the relay that dials it);
      // all must be listening before the bootstraps are written and Envoy is spawned.
      const chains = [[status], [sts], [this.dns], [this.secrets], local ? [local.componentAfter(xds), xds] : [xds], [tracer], [wasm?.component]];
      const started = await Promise.allSettled(
        chains.map(async (chain) => {
          for (const c of chain) {
            if (!c || signal.aborted) continue;
            await c.start(stop);
            this.components.push(c);
          }
        }),
      );
      const order = chains.flat();
      this.components.sort((a, b) => order.indexOf(a) - order.indexOf(b));
      const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
      step(`listening (${this.components.map((c) => c.name).join(",")})`);

      const sdsMode = this.secrets.mode;
      const credentialSocketExists = await detectCredentialSocket(cfg.root);
      if (credentialSocketExists) this.log.info("Credential SDS socket found");
      const platform = await platformWait;
      step("platform");
      const ctx = { customCredentialsFileExists: sdsMode?.kind === "files-only", credentialSocketExists, platform };
      // Both bootstrap files are written before Envoy is spawned, as Istio does (a gRPC bootstrap
      // error is reported first).
      // GRPC_XDS_BOOTSTRAP="" turns the gRPC bootstrap off, as Istio's `if GRPCBootstrapPath != ""`.
      const grpcWrite = cfg.env.GRPC_XDS_BOOTSTRAP !== "" ? writeGrpcBootstrap(cfg, ctx) : undefined;
      const envoyWrite = envoyEnabled && !signal.aborted ? writeBootstrap(cfg, { ...ctx, logAsJson: this.deps.logAsJson }) : undefined;
      envoyWrite?.catch(() => {}); // awaited below
      if (grpcWrite) this.log.info(`gRPC xDS bootstrap written to ${await grpcWrite}`);
      else this.log.info("GRPC_XDS_BOOTSTRAP is empty: no gRPC xDS bootstrap written");

      if (envoyWrite) {
        const bootstrap = await envoyWrite;
        for (const p of bootstrap.problems) this.log.warn(p);
        step("bootstraps");
        this.envoy = createEnvoySupervisor(cfg, {
          log: sink.logger("envoy"),
          readiness: this.readiness,
          clock: this.clock,
          bootstrapPath: bootstrap.path,
          certificateFiles: mountedCertificateFiles(this.secrets),
          ...(this.deps.selfCommand ? { selfCommand: this.deps.selfCommand } : {}),
          ...(bootstrap.configYaml !== undefined ? { configYaml: bootstrap.configYaml } : {}),
        });
        this.log.info("Starting proxy agent");
        await this.envoy.start(signal);
        step("envoy");
        // Istio's "Envoy exited normally/with error" lines come from the supervisor.
        void this.envoy.exited.then((code) => this.finish(code));
      } else if (!envoyEnabled) {
        this.log.info("DISABLE_ENVOY: proxyless mode, Envoy is not started");
      }
    } catch (e) {
      // pilot-agent returns a start error from its command and exits -1 (255), as for bad flags.
      this.log.error(`agent failed to start: ${errorMessage(e)}`);
      this.exitCode = START_FAILURE_EXIT_CODE;
      this.envoy?.shutdown({ immediate: true });
      this.finish(START_FAILURE_EXIT_CODE);
      return;
    }
    const up = this.deps.uptimeMs ? `, ${this.deps.uptimeMs().toFixed(1)}ms after process start` : "";
    this.log.debug(`start path: ${steps.join(", ")}`);
    this.log.info(`Agent started in ${(this.now() - t0).toFixed(1)}ms${up}`, { components: [...this.components.map((c) => c.name), ...(this.envoy ? ["envoy"] : [])].join(",") });
  }

  /** The platform's node facts (PLATFORM_METADATA, locality, instance labels); Unknown on any failure. */
  private async discoverPlatform(): Promise<PlatformInfo> {
    const log = this.deps.sink.logger("platform");
    try {
      const { discoverAgentPlatform } = await import("./platform/index.ts");
      const found = await discoverAgentPlatform(this.config, log, this.deps.platformDeps);
      const md = found.info.metadata ?? {};
      const loc = found.info.locality;
      log.info(`platform ${found.cloud}`, { locality: loc ? [loc.region, loc.zone, loc.subZone].join("/") : "", metadata: Object.keys(md).sort().join(",") });
      return found.info;
    } catch (e) {
      log.warn(`platform discovery failed, treating it as Unknown: ${errorMessage(e)}`);
      return { metadata: {}, locality: { region: "", zone: "", subZone: "" }, labels: {}, isKubernetes: true };
    }
  }

  /** Second signal: stop Envoy at once and stop waiting for anything. */
  forceStop(): void {
    this.log.warn("forced stop");
    void this.envoy?.shutdown({ immediate: true });
    this.finish(this.exitCode);
    this.clock.timer(1000, () => this.resolveDone(this.exitCode));
  }

  /** Envoy is gone (or there is none): stop the other components, then resolve `done`. */
  private finish(code: number): void {
    if (this.finishing) return;
    this.finishing = true;
    if (code !== 0) this.exitCode = code;
    for (const c of this.components) this.drain.track(c.name, c.stopped?.() ?? Promise.resolve());
    void this.drain.start().then((outcome) => {
      if (!outcome.complete) this.log.warn(`components did not stop within ${this.drain.deadlineMs}ms (pending: ${outcome.pending.join(", ")}); exiting anyway`);
      this.log.info("Agent stopped");
      if (this.terminating) this.log.info("Agent has successfully terminated");
      this.resolveDone(this.exitCode);
    });
  }
}
