// The status server on :15020 (ProxyConfig.statusPort), all interfaces: what Kubernetes and
// Prometheus talk to. Routes (Istio pilot-agent status/server.go):
//   /healthz/ready                     readiness: 200, or 503 naming every pending check
//   /metrics, /stats/prometheus        merged agent + Envoy + application metrics (streamed)
//   /app-health/<c>/{livez,readyz,startupz}, /app-lifecycle/<c>/{prestopz,poststartz}   app probes
//   POST /quitquitquit, POST /drain    loopback only
//   /debug/ndsz                        loopback only; the DNS proxy's name table
//   /debug/config_dump, /debug/, GET|POST /logging   loopback only; the operator's view (debugroutes.ts)
//   /debug/pprof/, /debug/memz         loopback only, with --profiling (Bun has no Go pprof: every
//                                      /debug/pprof path answers 501 pointing at /debug/memz, which
//                                      reports process memory and JavaScript heap statistics)

import type { Registry } from "prom-client";
import type { Component } from "../lib/component.ts";
import type { HealthReporter, LifecycleControl } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import { gauge } from "../lib/metrics.ts";
import type { BlockerState, Readiness } from "../lib/readiness.ts";
import { AppProbeHandler } from "./apphandler.ts";
import { parseAppProbers } from "./appprobers.ts";
import { EnvoyReadinessProbe, type HttpGetText } from "./envoyready.ts";
import { StatusError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";
import { GrpcBootstrapProbe } from "./grpcbootstrap.ts";
import { maybeGzip } from "./gzip.ts";
import { type HealthCheckConfig, WorkloadHealthChecker } from "./healthcheck.ts";
import { isLoopback, LOCALHOST_ONLY } from "./loopback.ts";
import { DebugRoutes, type LogLevelControl } from "./debugroutes.ts";
import { MetricsMerger } from "./merge.ts";
import { ReadyCheck } from "./readycheck.ts";
import { ReadyAnswer } from "./readyanswer.ts";
import { parseScrapeConfig } from "./scrapeconfig.ts";
import { systemClock } from "../lib/clock.ts";

export { LOCALHOST_ONLY };

/** A bound status port. */
export interface StatusListener {
  port: number;
  hostname: string;
  stop(): Promise<void>;
  /** For a listener answering readiness itself: the agent's conditions changed, Envoy was restarted, or shutdown began. */
  readinessChanged?(change: ReadinessChange): void;
}

export type ReadinessChange = { kind: "conditions" } | { kind: "envoy restarted" } | { kind: "shutdown"; reason?: string };

/** What the app probes need on another thread: the raw ISTIO_KUBE_APP_PROBERS and where probes go. */
export interface AppProbeThreadConfig {
  probers: string;
  destination: string;
  sourceAddress?: string;
  keepAlive?: boolean;
}

/** What a listener on another thread needs to answer `/healthz/ready` and the app probes as this server would. */
export interface ReadinessFeed {
  envoy?: { adminHost: string; adminPort: number };
  /** Present when the pod has app probes (kubelet's, rewritten to the status port). */
  apps?: AppProbeThreadConfig;
  /** Where the app probes' log lines go (the "probes" scope, as on this thread). */
  probeLog?(level: "info" | "error", message: string): void;
  grpcBootstrap?: { path: string; root?: string };
  /** Files a ready answer depended on (the gRPC bootstrap's certificates): absolute paths, checked again on every probe. */
  readyFiles?(): string[];
  processStartMs: number;
  /** The agent's pending conditions now (plain data). */
  conditions(): { blockers: BlockerState[]; warnings: BlockerState[] };
  /** Where the thread's readiness log lines go. */
  log(level: "info" | "warn", message: string): void;
  /** The first ready answer: seconds since the process started. */
  firstReady(seconds: number): void;
}

/** Binds the status port on `hostname`, routing every request to `handle`; rejects when it cannot. */
export type StatusListen = (
  hostname: string,
  port: number,
  handle: (req: Request, remote: string | undefined) => Promise<Response>,
  readiness: ReadinessFeed,
) => Promise<StatusListener>;

/** The listener on the agent's own event loop (the default; tests). `onError` hears what Bun could not serve. */
export function inlineListen(onError: (message: string) => void): StatusListen {
  return async (hostname, port, handle) => {
    const server = Bun.serve({
      port,
      hostname,
      idleTimeout: 120,
      fetch: (req, s) => handle(req, s.requestIP(req)?.address),
      error: (e) => {
        onError(`status server: ${errorMessage(e)}`);
        return new Response("internal error\n", { status: 500 });
      },
    });
    return { port: server.port ?? 0, hostname: server.hostname ?? "", stop: () => server.stop(true) };
  };
}

export interface StatusServerOptions {
  /** ProxyConfig.statusPort; 0 picks a free port (tests). */
  port: number;
  /** Default "::" (all interfaces, both families), falling back to 0.0.0.0 without IPv6. */
  hostname?: string;
  log: Logger;
  registry: Registry;
  /** The agent's named readiness blockers. */
  readiness?: Readiness;
  /** Envoy's admin and Prometheus ports; absent when Envoy is disabled (DISABLE_ENVOY). */
  envoy?: {
    adminHost: string;
    adminPort: number;
    prometheusHost: string;
    prometheusPort: number;
    /** PILOT_AGENT_MERGE_ENVOY_STATS */
    mergeStats: boolean;
    get?: HttpGetText;
  };
  /** GRPC_XDS_BOOTSTRAP, checked for readiness when set; relative to `root`. */
  grpcBootstrapPath?: string;
  root?: string;
  /** ISTIO_KUBE_APP_PROBERS (raw JSON). */
  appProbers?: string;
  /** INSTANCE_IP, or localhost with REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION. */
  probeDestination: string;
  /** 127.0.0.6 / ::6; undefined binds no source address. */
  probeSourceAddress?: string;
  /** ENABLE_PROBE_KEEPALIVE_CONNECTIONS */
  probeKeepAlive?: boolean;
  /** ISTIO_PROMETHEUS_ANNOTATIONS (sidecars only; undefined = no application metrics). */
  prometheusAnnotations?: string;
  appMetricsHost?: string;
  /** METRICS_LOCALHOST_ACCESS_ONLY */
  metricsLocalhostOnly?: boolean;
  lifecycle?: LifecycleControl;
  /** The DNS proxy's name table (protoJSON-ready object), undefined when there is none. */
  ndsz?: () => unknown;
  /** The agent's state for /debug/config_dump and the /debug/ page (built when asked). */
  configDump?: () => unknown;
  /** GET/POST /logging. */
  logging?: LogLevelControl;
  /** --profiling */
  profiling?: boolean;
  /** VM / WorkloadEntry health checking from ProxyConfig.readinessProbe. */
  workloadHealth?: {
    config: HealthCheckConfig;
    reporter: HealthReporter;
    localHosts?: string[];
    sleep?: (ms: number, signal: AbortSignal) => Promise<boolean>;
  };
  /** The agent's shutdown signal: once aborted, readiness answers `server is terminated`. */
  shutdown?: AbortSignal;
  now?: () => number;
  /** When the process started (for istio_agent_startup_duration_seconds). */
  processStartMs?: number;
  /** How the port is bound: on this event loop (default) or a thread of its own (statusthread.ts). */
  listen?: StatusListen;
}

export class StatusServer implements Component {
  readonly name = "status";
  private server?: StatusListener;
  private readonly log: Logger;
  private readonly envoyReady?: EnvoyReadinessProbe;
  private readonly grpcBootstrap?: GrpcBootstrapProbe;
  private readonly readyCheck: ReadyCheck;
  private readonly apps: AppProbeHandler;
  /** Valid app probes configured: a listener on another thread answers them itself when any. */
  private readonly probeCount: number;
  private readonly probeLogger: Logger;
  private readonly merger: MetricsMerger;
  private readonly health?: WorkloadHealthChecker;
  private readonly startup;
  private healthRun?: Promise<void>;
  private readonly readyAnswer: ReadyAnswer;
  private done = Promise.resolve();
  private readonly debugRoutes: DebugRoutes;

  constructor(private readonly opts: StatusServerOptions) {
    this.log = opts.log;
    this.debugRoutes = new DebugRoutes({ log: opts.log, configDump: opts.configDump, logging: opts.logging });
    const now = opts.now ?? systemClock.now;
    if (opts.envoy) {
      this.envoyReady = new EnvoyReadinessProbe({
        adminHost: opts.envoy.adminHost,
        adminPort: opts.envoy.adminPort,
        shutdown: opts.shutdown,
        get: opts.envoy.get,
      });
    }
    const grpc = opts.grpcBootstrapPath ? new GrpcBootstrapProbe(opts.grpcBootstrapPath, opts.root) : undefined;
    this.grpcBootstrap = grpc;
    opts.readiness?.onChange(() => this.server?.readinessChanged?.({ kind: "conditions" }));
    const shutdown = opts.shutdown;
    shutdown?.addEventListener("abort", () => this.server?.readinessChanged?.({ kind: "shutdown", reason: abortReason(shutdown) }), { once: true });
    this.readyCheck = new ReadyCheck({ readiness: opts.readiness, envoy: this.envoyReady, grpcBootstrap: grpc });
    // What Istio's NewServer refuses stops the agent at start, naming the variable.
    const probers = parseAppProbers(opts.appProbers ?? "");
    const scrape = parseScrapeConfig(opts.prometheusAnnotations, opts.port);
    const fatal = [...(probers.configError ? [probers.configError] : []), ...probers.rejected, ...(scrape?.problems ?? [])];
    if (fatal.length > 0) throw new StatusError(fatal.join("; "));
    this.probeCount = probers.probes.size;
    this.probeLogger = opts.log.child("probes");
    this.apps = new AppProbeHandler({
      probers,
      destination: opts.probeDestination,
      sourceAddress: opts.probeSourceAddress,
      statusPort: () => this.port(),
      keepAlive: opts.probeKeepAlive,
      log: this.probeLogger,
    });
    this.merger = new MetricsMerger({
      registry: opts.registry,
      log: opts.log,
      envoy: opts.envoy?.mergeStats ? { host: opts.envoy.prometheusHost, port: opts.envoy.prometheusPort } : undefined,
      app: scrape,
      appHost: opts.appMetricsHost,
    });
    this.startup = gauge(opts.registry, "istio_agent_startup_duration_seconds", "The time from the process starting to being marked ready.");
    this.readyAnswer = new ReadyAnswer({
      check: this.readyCheck,
      info: (m) => this.log.info(m),
      warn: (m) => this.log.warn(m),
      firstReady: (seconds) => this.startup.set(seconds),
      now: opts.now ?? systemClock.now,
      processStartMs: opts.processStartMs ?? performance.timeOrigin,
    });
    if (opts.workloadHealth) {
      this.health = new WorkloadHealthChecker({
        ...opts.workloadHealth,
        log: opts.log.child("healthcheck"),
        envoy: this.envoyReady,
        sourceAddress: opts.probeSourceAddress,
      });
    }
  }

  port(): number {
    return this.server?.port ?? 0;
  }

  /** The bound address, e.g. `{ hostname: "::", port: 15020 }`. */
  address(): { hostname: string; port: number } {
    return { hostname: this.server?.hostname ?? "", port: this.port() };
  }

  /** Envoy was restarted: its cached readiness no longer holds. */
  resetEnvoyReadiness(): void {
    this.envoyReady?.reset();
    this.server?.readinessChanged?.({ kind: "envoy restarted" });
  }

  async start(signal: AbortSignal): Promise<void> {
    this.apps.reportConfigProblems();
    const listen = this.opts.listen ?? inlineListen((m) => this.log.error(m));
    const handle = (req: Request, remote: string | undefined) => this.handle(req, remote);
    const feed = this.readinessFeed();
    const hostname = this.opts.hostname ?? "::";
    try {
      this.server = await listen(hostname, this.opts.port, handle, feed);
    } catch (e) {
      if (this.opts.hostname !== undefined || /EADDRINUSE|in use/i.test(errorMessage(e))) {
        throw new StatusError(`cannot listen on [${hostname}]:${this.opts.port}: ${errorMessage(e)}`, "status server", { cause: e });
      }
      try {
        this.server = await listen("0.0.0.0", this.opts.port, handle, feed);
      } catch (e2) {
        throw new StatusError(`cannot listen on :${this.opts.port}: ${errorMessage(e2)}`, "status server", { cause: e2 });
      }
    }
    // Changes made while the listener was binding reached no one: send the state as it is now.
    this.server.readinessChanged?.({ kind: "conditions" });
    if (this.opts.shutdown?.aborted) this.server.readinessChanged?.({ kind: "shutdown", reason: abortReason(this.opts.shutdown) });
    this.log.info(`Opening status port ${this.port()}`);
    if (this.health) this.healthRun = this.health.run(signal).catch((e) => this.log.error(`health check stopped: ${errorMessage(e)}`));
    let resolveDone!: () => void;
    this.done = new Promise((r) => (resolveDone = r));
    const stop = async () => {
      await this.server?.stop();
      this.apps.close();
      await this.healthRun;
      this.log.info("Status server has successfully terminated");
      resolveDone();
    };
    if (signal.aborted) void stop();
    else signal.addEventListener("abort", () => void stop(), { once: true });
  }

  stopped(): Promise<void> {
    return this.done;
  }

  /** Route one request; `remote` is the client's address (injectable for tests). */
  async handle(req: Request, remote: string | undefined): Promise<Response> {
    const path = new URL(req.url).pathname;
    try {
      if (path === "/healthz/ready") return await this.ready();
      if (path === "/metrics" || path === "/stats/prometheus") {
        if (this.opts.metricsLocalhostOnly && !isLoopback(remote)) return text(403, LOCALHOST_ONLY);
        return maybeGzip(req, await this.merger.handle(req));
      }
      if (path === "/quitquitquit" || path === "/drain") return await this.lifecycle(path, req, remote);
      if (path.startsWith("/app-health/") || path.startsWith("/app-lifecycle/")) return await this.apps.handle(path, req);
      if (path === "/debug/ndsz") return this.ndsz(req, remote);
      if (DebugRoutes.owns(path)) return await this.debugRoutes.handle(path, req, remote);
      if (this.opts.profiling && (path === "/debug/memz" || path === "/debug/pprof" || path.startsWith("/debug/pprof/"))) return this.debug(path, req, remote);
      return text(404, "404 page not found");
    } catch (e) {
      this.log.error(`${req.method} ${path}: ${errorMessage(e)}`);
      return text(500, `${errorMessage(e)}`);
    }
  }

  private ready(): Promise<Response> {
    return this.readyAnswer.answer();
  }

  private readinessFeed(): ReadinessFeed {
    const o = this.opts;
    const readiness = o.readiness;
    return {
      ...(o.envoy ? { envoy: { adminHost: o.envoy.adminHost, adminPort: o.envoy.adminPort } } : {}),
      ...(o.grpcBootstrapPath ? { grpcBootstrap: { path: o.grpcBootstrapPath, ...(o.root ? { root: o.root } : {}) } } : {}),
      ...(this.probeCount > 0
        ? {
            apps: {
              probers: o.appProbers ?? "",
              destination: o.probeDestination,
              ...(o.probeSourceAddress ? { sourceAddress: o.probeSourceAddress } : {}),
              ...(o.probeKeepAlive ? { keepAlive: true } : {}),
            },
          }
        : {}),
      probeLog: (level, message) => (level === "error" ? this.probeLogger.error(message) : this.probeLogger.info(message)),
      readyFiles: () => this.grpcBootstrap?.watchedFiles() ?? [],
      processStartMs: o.processStartMs ?? performance.timeOrigin,
      conditions: () => ({ blockers: readiness?.blockers() ?? [], warnings: readiness?.warnings() ?? [] }),
      log: (level, message) => (level === "warn" ? this.log.warn(message) : this.log.info(message)),
      firstReady: (seconds) => this.startup.set(seconds),
    };
  }

  private async lifecycle(path: string, req: Request, remote: string | undefined): Promise<Response> {
    if (!isLoopback(remote)) return text(403, LOCALHOST_ONLY);
    if (req.method !== "POST") return text(405, "Method Not Allowed");
    const lc = this.opts.lifecycle;
    if (!lc) return text(503, `${path} is not available: no Envoy lifecycle control in this agent`);
    if (path === "/quitquitquit") {
      this.log.info("handling /quitquitquit, notifying the agent to exit");
      setTimeout(() => lc.quit(), 0); // after the 200 is on its way
    } else {
      this.log.info("handling /drain, starting drain");
      lc.drain().catch((e) => this.log.error(`/drain failed: ${errorMessage(e)}`));
    }
    return text(200, "OK");
  }

  private ndsz(req: Request, remote: string | undefined): Response | Promise<Response> {
    if (!isLoopback(remote)) return text(403, LOCALHOST_ONLY);
    const table = this.opts.ndsz?.();
    if (table === undefined || table === null) return new Response("{}", { status: 404, headers: { "content-type": "application/json" } });
    return maybeGzip(req, new Response(JSON.stringify(table, null, 2), { headers: { "content-type": "application/json" } }));
  }

  private async debug(path: string, req: Request, remote: string | undefined): Promise<Response> {
    if (!isLoopback(remote)) return text(403, LOCALHOST_ONLY);
    if (path !== "/debug/memz") {
      return text(
        501,
        `${path}: not available in this build (Go pprof profiles do not exist in an agent that runs on Bun); use /debug/memz for process memory and JavaScript heap statistics\n`,
      );
    }
    const { heapStats } = await import("bun:jsc");
    const h = heapStats();
    const body = {
      memory: process.memoryUsage(),
      heap: {
        heapSize: h.heapSize,
        heapCapacity: h.heapCapacity,
        extraMemorySize: h.extraMemorySize,
        objectCount: h.objectCount,
        objectTypeCounts: h.objectTypeCounts,
      },
    };
    return maybeGzip(req, new Response(JSON.stringify(body, null, 2), { headers: { "content-type": "application/json" } }));
  }
}

/** An abort's reason as the Envoy readiness probe words it (`server is terminated: <reason>`). */
function abortReason(signal: AbortSignal): string | undefined {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r.message;
  return r === undefined ? undefined : String(r);
}

function text(status: number, body: string): Response {
  return new Response(body, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
}
