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
//
// `start` resolves with `Bound` (ztunnel's): every address and socket the agent serves on, fixed
// once started, so callers and tests read them there. A component that cannot be built or started
// stops the agent: the ones already started are stopped, the error names the component, and the
// exit code is pilot-agent's for a failed command. Components stop in the reverse of their start
// order, each awaited before the next (Envoy first: it drains while the others keep serving).

import type { AgentConfig } from "./config/agentconfig.ts";
import { building, ComponentError, named, watchFailures, type Component, type FailureDecision } from "./lib/component.ts";
import type { LogSink, Logger } from "./lib/log.ts";
import type { LifecycleControl } from "./lib/interfaces.ts";
import { newRegistry, type Registry } from "./lib/metrics.ts";
import { Readiness } from "./lib/readiness.ts";
import { systemClock, type Clock } from "./lib/clock.ts";
import { DrainTrigger } from "./lib/drain.ts";
import { createStatusServer } from "./status/create.ts";
import { dnsProxyEnabled } from "./dns/enabled.ts";
import type { DnsProxy } from "./dns/proxy.ts";
import type { BoundAddress } from "./dns/server.ts";
import type { HostPort } from "./dns/resolvconf.ts";
import { createSecretManager, type SecretManager } from "./sds/manager.ts";
import { detectCredentialSocket } from "./sds/external.ts";
import { prepareBootstrapTemplate, writeBootstrap, writeGrpcBootstrap } from "./bootstrap/index.ts";
import { createEnvoySupervisor, type EnvoyComponent } from "./envoy/index.ts";
import { createXdsProxy, type XdsProxy } from "./xds/proxy.ts";
import { wasmFromConfig } from "./wasm/factory.ts";
import { MemLimitError, MemoryLimiter, parseGoMemLimit } from "./lib/memlimit.ts";
import { StartupMemory } from "./lib/startupmemory.ts";
import type { PlatformInfo } from "./config/metadata.ts";
import type { PlatformDeps } from "./platform/types.ts";
import { errorMessage } from "./lib/errors.ts";
import { ReadinessHistory } from "./debug/history.ts";
import type { WasmCacheSnapshot } from "./wasm/factory.ts";

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
  /** Drops JavaScriptCore's compiled code once the agent has settled (startupmemory.ts; default Bun.shrink). */
  shrinkCode?: () => void;
  /** The argv prefix that runs the agent again (Envoy is started through it to die with the agent). */
  selfCommand?: readonly string[];
  /**
   * Tests only: bind here instead of the configured addresses (port 0: a free port). In Istio's
   * config a status port of 0 means "off", so free ports can be asked for only here; a server the
   * config turns off stays off.
   */
  listen?: { status?: { hostname: string; port: number }; dns?: HostPort[] };
}

/** What a started agent serves on (ztunnel's `Bound`): fixed once `start` resolves. */
export interface Bound {
  /** The status server's address; absent when it is off (statusPort 0) or did not start. */
  readonly status?: { readonly hostname: string; readonly port: number };
  /** The STS server's port (--stsPort); absent when it is off. */
  readonly sts?: { readonly port: number };
  /** The XDS socket the relay serves Envoy (or proxyless gRPC clients) on; absent if not started. */
  readonly xdsSocket?: string;
  /** The SDS socket; absent when the agent serves none. */
  readonly sdsSocket?: string;
  /** The DNS proxy's listeners (UDP and TCP per address); empty when it is off. */
  readonly dns: readonly BoundAddress[];
}

/** The workload certificate files mounted into the pod, when the agent serves those (no CA). */
function mountedCertificateFiles(secrets: SecretManager | undefined): string[] {
  if (!secrets || secrets.opts.signer.kind !== "none") return [];
  const w = secrets.opts.workloadFiles;
  return [w.certChainPath, w.keyPath, w.rootCertPath];
}

/** pilot-agent's exit code when its command fails (os.Exit(-1)). */
export const START_FAILURE_EXIT_CODE = 255;

/**
 * What the agent does when a component fails after start, as Istio's agent does: its status server
 * failing makes it send itself SIGTERM (the pod could never pass a probe again); Envoy's end is the
 * agent's end (the supervisor holds the exit code); the DNS, SDS and xDS servers only log.
 */
export function afterStartFailure(component: string): FailureDecision {
  if (component === "status") return "terminate";
  if (component === "envoy") return "exit";
  return "degrade";
}

/** A started component and the signal that stops it. */
interface Running {
  component: Component;
  stop: AbortController;
}

export class Agent {
  readonly registry: Registry;
  readonly readiness: Readiness;
  /** The readiness conditions' story, for the operator's view. */
  private readonly history: ReadinessHistory;
  /** When the process started (wall clock), for the operator's view. */
  private readonly startedMs: number;
  /** Resolves with the process exit code once the agent has stopped. */
  readonly done: Promise<number>;
  private dns?: DnsProxy;
  private secrets?: SecretManager;
  /** The xDS relay; also where VM health transitions go. */
  private xds?: XdsProxy;
  private envoy?: EnvoyComponent;
  private status?: ReturnType<typeof createStatusServer>;
  private sts?: Component & { port(): number };
  /** Started components, in start order. */
  private readonly running: Running[] = [];
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
  /** Aborted by the caller's signal, or by a failure Istio answers with SIGTERM: a graceful stop. */
  private readonly shutdown = new AbortController();
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
    this.readiness = new Readiness(() => this.clock.now(), deps.sink.logger("readiness"));
    this.history = new ReadinessHistory(this.readiness, () => this.clock.now());
    this.startedMs = this.clock.now() - (deps.uptimeMs?.() ?? 0);
    this.done = new Promise((r) => (this.resolveDone = r));
    this.afterStart = new Promise((r) => (this.endStartPath = r));
    void this.afterStart
      .then(() => new Promise<void>((r) => setImmediate(r)))
      .then(() => import("./lib/runtime-metrics.ts"))
      .then(({ addProcessMetrics }) => addProcessMetrics(this.registry))
      .catch((e: Error) => this.log.warn(`process metrics unavailable: ${e.message}`));
  }

  /**
   * Build and start every component; resolves once all are serving and Envoy is spawned, with what
   * was bound. Rejects with a ComponentError naming the component that could not be built or
   * started (the others are being stopped and `done` resolves with START_FAILURE_EXIT_CODE).
   */
  async start(signal: AbortSignal): Promise<Bound> {
    if (signal.aborted) this.shutdown.abort();
    else signal.addEventListener("abort", () => this.shutdown.abort(), { once: true });
    try {
      await this.startPath(this.shutdown.signal);
    } finally {
      this.endStartPath();
    }
    this.startMemoryLimit();
    const memory = this.memory();
    const shrink = this.deps.shrinkCode ?? (() => Bun.shrink());
    new StartupMemory({ readiness: this.readiness, clock: this.clock, shrink, ...memory, now: this.now, log: this.log }).start(
      AbortSignal.any([this.shutdown.signal, this.drain.signal]),
    );
    watchFailures([...this.running.map((r) => r.component), ...(this.envoy ? [this.envoy] : [])], afterStartFailure, {
      log: this.log,
      terminate: () => this.shutdown.abort(),
      stopping: () => this.shutdown.signal.aborted || this.finishing,
    });
    return this.bound();
  }

  /** Read once, at the end of start: the addresses of the components that are running. */
  private bound(): Bound {
    const up = (c: Component | undefined) => c !== undefined && this.running.some((r) => r.component === c);
    return Object.freeze({
      ...(up(this.status) ? { status: Object.freeze(this.status!.address()) } : {}),
      ...(up(this.sts) ? { sts: Object.freeze({ port: this.sts!.port() }) } : {}),
      ...(up(this.xds) ? { xdsSocket: this.xds!.socketPath } : {}),
      ...(up(this.secrets) && this.secrets!.mode ? { sdsSocket: this.secrets!.mode.socketPath } : {}),
      dns: Object.freeze(up(this.dns) ? this.dns!.addresses().map((a) => Object.freeze({ ...a })) : []),
    });
  }

  /** The process's resident set and a full collection (GOMEMLIMIT, the relay's burst memory). */
  private memory(): { rss(): number; collect(): void } {
    if (this.deps.memory) return this.deps.memory;
    let warned = false;
    const rss = (): number => {
      try {
        return process.memoryUsage.rss();
      } catch (e) {
        // No /proc (a chroot, a locked-down sandbox): read as 0, which neither acts on.
        if (!warned) this.log.warn(`resident memory unreadable (${errorMessage(e)}): the GOMEMLIMIT cap and the relay's burst clean-up cannot act`);
        warned = true;
        return 0;
      }
    };
    return { rss, collect: () => Bun.gc(true) };
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
    void new MemoryLimiter({ limitBytes, ...this.memory(), log: this.log }).start(this.drain.signal);
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
        const listen = this.deps.listen?.dns;
        this.dns = building("dns", () => createDnsProxy(cfg, { log: sink.logger("dns"), ...common, ...(listen ? { listen } : {}) }));
      }
      // CREDENTIAL_FETCHER_TYPE: one token source shared by the CA client and the xDS relay (none for JWT).
      const tokens =
        env.CREDENTIAL_FETCHER_TYPE === "JWT"
          ? undefined
          : (await import("./credentials/index.ts")).credentialFetcherFor(cfg, { log: sink.logger("credentials"), now: () => this.clock.now() });
      this.secrets = building("sds", () =>
        createSecretManager(cfg, { log: sink.logger("sds"), ...common, clock: this.clock, warmAfter: afterStart, ...(tokens ? { tokens } : {}) }),
      );
      // The control-plane side: the relay towards istiod or, in local mode, towards the in-process
      // file-backed server (whose code is imported only then).
      const local = env.LOCAL_XDS_PATH
        ? (await import("./local/upstream.ts")).createLocalSide(cfg, {
            log: sink.logger("localxds"),
            ...common,
            afterStart,
            ...(this.dns ? { nameTables: this.dns } : {}),
            ...(this.deps.selfCommand ? { selfCommand: this.deps.selfCommand } : {}),
          })
        : undefined;
      // ECDS Wasm conversion (ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION): its code loads on the first ECDS response.
      const wasm = wasmFromConfig(cfg, { sink, registry: this.registry, now: this.now });
      const upstream = local
        ? local.upstream
        : tokens
          ? (await import("./credentials/upstream.ts")).tokenFirstIstiodUpstream(cfg, tokens, sink.logger("xdsproxy"))
          : undefined;
      const xds = (this.xds = createXdsProxy(cfg, {
        log: sink.logger("xdsproxy"),
        ...common,
        nameTables: this.dns,
        trustBundles: this.secrets,
        dnsEnabled: !!this.dns,
        ...(upstream ? { upstream } : {}),
        ...(wasm ? { ecds: wasm.hook } : {}),
        wallClock: () => this.clock.now(),
        memory: this.memory(),
        clock: this.clock,
        now: this.now,
      }));
      // Istio's line (pkg/istio-agent xds_proxy.go) naming where the relay dials and for which cluster.
      const upstreamAddress = local ? local.describe : (cfg.proxyConfig.discoveryAddress ?? "");
      sink
        .logger("xdsproxy")
        .info(`Initializing with upstream address ${JSON.stringify(upstreamAddress)} and cluster ${JSON.stringify(env.ISTIO_META_CLUSTER_ID || "Kubernetes")}`);
      const tracer = env.IPTABLES_TRACE_LOGGING ? (await import("./iptables/tracer.ts")).createIptablesTracer(cfg, sink.logger("iptables")) : undefined;
      const statusPort = cfg.proxyConfig.statusPort ?? 0;
      const statusListen = this.deps.listen?.status;
      const status =
        statusPort > 0
          ? building("status", () =>
              createStatusServer(cfg, {
                log: sink.logger("status"),
                ...common,
                lifecycle,
                ndsz: this.dns ? () => this.dns!.ndsz() : undefined,
                configDump: () => this.configDump(wasm),
                logging: { levels: () => sink.scopeLevels(), set: (spec) => sink.setLevels(spec) },
                health: xds,
                envoyEnabled,
                shutdown: signal,
                now: () => this.clock.now(),
                ...(statusListen ? { listen: statusListen } : {}),
              }),
            )
          : undefined;
      this.status = status;
      if (!status) this.log.info("status server disabled (statusPort 0)");
      // --stsPort: the token exchange service for Envoy's Google gRPC services (its code loads only then).
      const stsModule = cfg.flags.stsPort > 0 ? await import("./sts/index.ts") : undefined;
      const sts = stsModule ? building("sts", () => stsModule.createStsServer(cfg, { sink, platform: () => platformWait, now: () => Date.now() })) : undefined;
      this.sts = sts;
      step("build");

      // Istio starts the status server before the agent, then DNS, SDS, the xDS proxy. They are
      // started in that order without waiting for one socket to be bound before the next is
      // asked for (a chain stays in order: the local xDS server before the relay that dials it);
      // all must be listening before the bootstraps are written and Envoy is spawned.
      const chains = [[status], [sts], [this.dns], [this.secrets], local ? [local.component, xds] : [xds], [tracer], [wasm?.component]];
      const starting = Promise.allSettled(
        chains.map(async (chain) => {
          for (const c of chain) {
            if (!c || signal.aborted) continue;
            await this.startComponent(c);
          }
        }),
      );
      // While the sockets come up (the status thread boots on its own), read and parse Envoy's
      // bootstrap template: Istio's template file takes several ms to parse. Nothing is written yet.
      const template = envoyEnabled ? prepareBootstrapTemplate(cfg) : undefined;
      const started = await starting;
      const order = chains.flat();
      this.running.sort((a, b) => order.indexOf(a.component) - order.indexOf(b.component));
      const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
      step(`listening (${this.running.map((r) => r.component.name).join(",")})`);

      const sdsMode = this.secrets.mode;
      const credentialSocketExists = await detectCredentialSocket(cfg.root);
      if (credentialSocketExists) this.log.info("Credential SDS socket found");
      const platform = await platformWait;
      step("platform");
      const ctx = { customCredentialsFileExists: sdsMode?.kind === "files-only", credentialSocketExists, platform };
      // Both bootstrap files are written before Envoy is spawned, as Istio does (a gRPC bootstrap
      // error is reported first).
      // GRPC_XDS_BOOTSTRAP="" turns the gRPC bootstrap off, as Istio's `if GRPCBootstrapPath != ""`.
      const grpcWrite = cfg.env.GRPC_XDS_BOOTSTRAP !== "" ? named("grpc bootstrap", writeGrpcBootstrap(cfg, ctx)) : undefined;
      const envoyWrite =
        envoyEnabled && !signal.aborted
          ? named("envoy bootstrap", writeBootstrap(cfg, { ...ctx, logAsJson: this.deps.logAsJson, ...(template ? { template } : {}) }))
          : undefined;
      envoyWrite?.catch(() => {}); // awaited below
      if (grpcWrite) this.log.info(`gRPC xDS bootstrap written to ${await grpcWrite}`);
      else this.log.info("GRPC_XDS_BOOTSTRAP is empty: no gRPC xDS bootstrap written");

      if (envoyWrite) {
        const bootstrap = await envoyWrite;
        for (const p of bootstrap.problems) this.log.warn(p);
        step("bootstraps");
        this.envoy = building("envoy", () =>
          createEnvoySupervisor(cfg, {
            log: sink.logger("envoy"),
            readiness: this.readiness,
            clock: this.clock,
            bootstrapPath: bootstrap.path,
            certificateFiles: mountedCertificateFiles(this.secrets),
            ...(this.deps.selfCommand ? { selfCommand: this.deps.selfCommand } : {}),
            ...(bootstrap.configYaml !== undefined ? { configYaml: bootstrap.configYaml } : {}),
          }),
        );
        this.log.info("Starting proxy agent");
        await named("envoy", this.envoy.start(signal));
        step("envoy");
        // Istio's "Envoy exited normally/with error" lines come from the supervisor.
        void this.envoy.exited.then((code) => this.finish(code));
      } else if (!envoyEnabled) {
        this.log.info("DISABLE_ENVOY: proxyless mode, Envoy is not started");
      }
    } catch (e) {
      // pilot-agent returns a start error from its command and exits -1 (255), as for bad flags.
      const err = e instanceof ComponentError ? e : new ComponentError("agent", e);
      this.log.error(`agent failed to start: ${err.message}`, { component: err.component });
      this.exitCode = START_FAILURE_EXIT_CODE;
      this.envoy?.shutdown({ immediate: true });
      this.finish(START_FAILURE_EXIT_CODE);
      throw err;
    }
    const up = this.deps.uptimeMs ? `, ${this.deps.uptimeMs().toFixed(1)}ms after process start` : "";
    this.log.debug(`start path: ${steps.join(", ")}`);
    this.log.info(`Agent started in ${(this.now() - t0).toFixed(1)}ms${up}`, {
      components: [...this.running.map((r) => r.component.name), ...(this.envoy ? ["envoy"] : [])].join(","),
    });
  }

  /** Start one component with its own stop signal; a failure names it. */
  private async startComponent(c: Component): Promise<void> {
    const stop = new AbortController();
    this.log.debug(`${c.name}: starting`);
    try {
      await c.start(stop.signal);
    } catch (e) {
      stop.abort();
      throw new ComponentError(c.name, e);
    }
    this.running.push({ component: c, stop });
    this.log.debug(`${c.name}: started`);
  }

  /** Stop the running components in the reverse of their start order, each awaited; `onStopped` hears each. */
  private async stopComponents(onStopped: (c: Component) => void): Promise<void> {
    for (const { component: c, stop } of [...this.running].reverse()) {
      this.log.debug(`${c.name}: stopping`);
      stop.abort();
      await (c.stopped?.() ?? Promise.resolve()).catch((e: unknown) => this.log.warn(`${c.name}: stopping failed: ${errorMessage(e)}`));
      this.log.debug(`${c.name}: stopped`);
      onStopped(c);
    }
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

  /** `/debug/config_dump`: read from each component's snapshot when asked (the builder loads then). */
  private async configDump(wasm: { snapshot(): WasmCacheSnapshot } | undefined): Promise<unknown> {
    const { buildConfigDump } = await import("./debug/configdump.ts");
    const secrets = this.secrets;
    const dns = this.dns;
    const xds = this.xds;
    const envoy = this.envoy;
    return buildConfigDump({
      config: this.config,
      now: () => this.clock.now(),
      startedMs: this.startedMs,
      pid: process.pid,
      readiness: this.readiness,
      history: this.history,
      logLevels: () => this.deps.sink.scopeLevels(),
      ...(secrets ? { signer: secrets.opts.signer, secrets: () => secrets.cache?.snapshot() } : {}),
      ...(xds ? { xds: () => xds.snapshot() } : {}),
      ...(dns ? { dns: () => dns.snapshot() } : {}),
      ...(wasm ? { wasm: () => wasm.snapshot() } : {}),
      ...(envoy ? { envoy: () => envoy.snapshot() } : {}),
    });
  }

  /** Second signal: stop Envoy at once and stop waiting for anything. */
  forceStop(): void {
    this.log.warn("forced stop");
    void this.envoy?.shutdown({ immediate: true });
    this.finish(this.exitCode);
    for (const r of this.running) r.stop.abort();
    this.clock.timer(1000, () => this.resolveDone(this.exitCode));
  }

  /** Envoy is gone (or there is none): stop the other components, then resolve `done`. */
  private finish(code: number): void {
    if (this.finishing) return;
    this.finishing = true;
    if (code !== 0) this.exitCode = code;
    // Each running component holds the drain until it has stopped; they stop one after another.
    const watchers = new Map(this.running.map((r) => [r.component, this.drain.watch(r.component.name)]));
    void this.stopComponents((c) => watchers.get(c)?.release());
    void this.drain.start().then((outcome) => {
      if (!outcome.complete)
        this.log.warn(`components did not stop within ${this.drain.deadlineMs}ms (pending: ${outcome.pending.join(", ")}); exiting anyway`);
      this.log.info("Agent stopped");
      if (this.terminating) this.log.info("Agent has successfully terminated");
      this.resolveDone(this.exitCode);
    });
  }
}
