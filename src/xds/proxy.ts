// The xDS proxy component: the downstream UDS server, one active relayed stream at a time (a new
// Envoy stream replaces the old one), each with a fresh upstream stream, the "xds connected"
// readiness blocker, and the HealthReporter the health prober talks to.

import { join, resolve } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import { FailureReport, type Component } from "../lib/component.ts";
import type { HealthReporter, NameTableSink, TrustBundleSink } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import { DEFAULT_LOG_LIMIT, LogLimiter } from "../lib/loglimit.ts";
import type { Registry } from "../lib/metrics.ts";
import { PeerAuthorizer } from "../lib/peerauth.ts";
import { READINESS, type Blocker, type Readiness } from "../lib/readiness.ts";
import { DownstreamServer, type DownstreamCall, type DownstreamHandlers } from "./downstream.ts";
import { internalHandlers, type InternalHandler } from "./internal.ts";
import { lazyXdsCodec, type AgentRequest, type XdsCodec } from "./messages.ts";
import { xdsMetrics, type XdsMetrics } from "./metrics.ts";
import { StreamRelay } from "./relay.ts";
import { Code, HEALTH_INFO_TYPE, NAME_TABLE_TYPE, PROXY_CONFIG_TYPE } from "./types.ts";
import { IstiodUpstream, nodeFiles, type Upstream } from "./upstream.ts";
import { dialConfigFrom } from "./upstream-config.ts";
import type { EcdsHook } from "../wasm/ecds.ts";
import { SHUTDOWN_BUDGET_MS } from "../lib/drain.ts";
import { ids } from "../lib/log.ts";
import { systemClock, type Clock } from "../lib/clock.ts";
import { BurstMemory } from "./burstmemory.ts";
import { StreamStats, type StreamSnapshot } from "./streamstats.ts";
import type { GrpcStatus } from "./types.ts";

export interface XdsProxyOptions {
  /** `<ConfigPath>/XDS` */
  socketPath: string;
  upstream: Upstream;
  authorizer: PeerAuthorizer;
  log: Logger;
  registry: Registry;
  readiness?: Readiness;
  nameTables?: NameTableSink;
  trustBundles?: TrustBundleSink;
  /** Subscribe to NDS on the first Listener request (DNS proxy on). */
  subscribeNds: boolean;
  /** Subscribe to PCDS on the first Listener request (PROXY_CONFIG_XDS_AGENT). */
  subscribePcds: boolean;
  /** Largest request accepted from Envoy (ISTIO_GPRC_MAXRECVMSGSIZE). */
  maxRequestBytes: number;
  maxConcurrentStreams?: number;
  /** ECDS Wasm conversion (ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION); absent = pass-through. */
  ecds?: EcdsHook;
  /** Monotonic milliseconds, for rate-limiting repeated log lines. */
  now?: () => number;
  /** Wall-clock milliseconds, for the times in the operator's view. */
  wallClock?: () => number;
  /** The process's resident set and a full collection: burst memory is handed back (burstmemory.ts); absent = not managed. */
  memory?: { rss(): number; collect(): void };
  /** Timers for the burst-memory quiet wait; the real clock when omitted. */
  clock?: Pick<Clock, "timer">;
}

/** The relay's state for the operator's view (/debug/config_dump). */
export interface XdsSnapshot {
  upstream: {
    address: string;
    /** `idle`: no client stream yet; `connecting`: a stream is open towards it; `connected`; `disconnected`. */
    state: "idle" | "connecting" | "connected" | "disconnected";
    sinceMs?: number;
    lastError?: { message: string; code: number; atMs: number };
  };
  /** Client streams accepted since start. */
  streamsOpened: number;
  /** The client stream being relayed, or the last one once it ended. */
  stream?: StreamSnapshot & { active: boolean };
}

export class XdsProxy implements Component, HealthReporter {
  readonly name = "xdsproxy";
  readonly socketPath: string;
  readonly metrics: XdsMetrics;
  private readonly log: Logger;
  private readonly codec: XdsCodec;
  private readonly internal: Map<string, InternalHandler>;
  private readonly initialRequests: AgentRequest[] = [];
  private readonly blocker: Blocker | undefined;
  private server: DownstreamServer | undefined;
  private active: StreamRelay | undefined;
  private lastHealth: AgentRequest | undefined;
  private stoppedPromise: Promise<void> = Promise.resolve();
  private readonly failure = new FailureReport();
  /** The XDS socket's listener died after start. */
  readonly failed = this.failure.failed;
  private readonly logLimit: LogLimiter;
  private readonly wallClock: () => number;
  private upstreamState: XdsSnapshot["upstream"];
  private streamsOpened = 0;
  private stats: StreamStats | undefined;
  private readonly burst: BurstMemory | undefined;

  constructor(private readonly o: XdsProxyOptions) {
    this.socketPath = o.socketPath;
    this.log = o.log.child("xdsproxy");
    this.metrics = xdsMetrics(o.registry);
    this.codec = lazyXdsCodec();
    this.internal = internalHandlers({ nameTables: o.nameTables, trustBundles: o.trustBundles });
    if (o.subscribeNds && o.nameTables) this.initialRequests.push({ typeUrl: NAME_TABLE_TYPE });
    if (o.subscribePcds && o.trustBundles) this.initialRequests.push({ typeUrl: PROXY_CONFIG_TYPE });
    this.blocker = o.readiness?.warn(READINESS.xdsConnected);
    this.logLimit = new LogLimiter({ ...DEFAULT_LOG_LIMIT, now: o.now ?? (() => performance.now()) });
    this.wallClock = o.wallClock ?? systemClock.now;
    this.upstreamState = { address: o.upstream.describe, state: "idle" };
    const now = o.now ?? (() => performance.now());
    this.burst = o.memory
      ? new BurstMemory({
          ...o.memory,
          clock: o.clock ?? systemClock,
          now,
          onCollect: (bytes, rss, ms) =>
            this.log.debug(`collected after a burst of ${mib(bytes)} MiB in ${ms.toFixed(1)} ms: resident ${rss.map(mib).join(" -> ")} MiB`),
        })
      : undefined;
  }

  /** Read-only view for the operator: the upstream's state and what the current stream carried. */
  snapshot(): XdsSnapshot {
    const u = this.upstreamState;
    return {
      upstream: { ...u, ...(u.lastError ? { lastError: { ...u.lastError } } : {}) },
      streamsOpened: this.streamsOpened,
      ...(this.stats ? { stream: { ...this.stats.snapshot(), active: this.active !== undefined } } : {}),
    };
  }

  private setUpstream(state: XdsSnapshot["upstream"]["state"], error?: GrpcStatus): void {
    const now = this.wallClock();
    const lastError = error && error.code !== Code.OK ? { message: error.message, code: error.code, atMs: now } : this.upstreamState.lastError;
    this.upstreamState = { address: this.o.upstream.describe, state, sinceMs: now, ...(lastError ? { lastError } : {}) };
  }

  async start(signal: AbortSignal): Promise<void> {
    this.server = new DownstreamServer({
      socketPath: this.o.socketPath,
      authorizer: this.o.authorizer,
      log: this.log,
      maxConcurrentStreams: this.o.maxConcurrentStreams,
      onRejected: () => this.metrics.rejectedPeers.inc(),
      onCall: (call) => this.onCall(call),
    });
    await this.server.listen();
    void this.server.failed.then((e) => this.failure.report(e));
    this.log.info(`xDS proxy listening on ${this.o.socketPath}, upstream ${this.o.upstream.describe}`, ids({ path: this.o.socketPath }));
    let done!: () => void;
    this.stoppedPromise = new Promise((r) => (done = r));
    const stop = async () => {
      // Finish the message in flight, end the stream with a status, let it reach the client; each
      // step within the agent's shutdown budget (the agent stops waiting for us after it).
      await this.active?.shutdown({ code: Code.UNAVAILABLE, message: "agent shutting down" }, SHUTDOWN_BUDGET_MS);
      await this.server?.close(SHUTDOWN_BUDGET_MS).catch(() => {});
      done();
    };
    signal.addEventListener("abort", () => this.burst?.stop(), { once: true });
    if (signal.aborted) await stop();
    else signal.addEventListener("abort", () => void stop(), { once: true });
  }

  stopped(): Promise<void> {
    return this.stoppedPromise;
  }

  /** HealthReporter: send istio.v1.HealthInformation upstream now (if possible) and on every reconnect. */
  reportHealth(error: string | undefined): void {
    this.lastHealth = { typeUrl: HEALTH_INFO_TYPE, error: error === undefined ? undefined : { code: Code.INTERNAL, message: error } };
    this.active?.sendHealth(this.lastHealth);
  }

  private onCall(call: DownstreamCall): DownstreamHandlers {
    if (this.active) {
      this.logLimit.log(this.log, "info", "stream-replaced", "new downstream stream replaces the active one");
      this.active.close({ code: Code.CANCELLED, message: "replaced by a new stream from Envoy" });
    }
    this.logLimit.log(
      this.log,
      "info",
      "stream-opened",
      `Envoy opened ${call.delta ? "Delta" : "SotW"} ADS stream; upstream ${this.o.upstream.describe} is dialed on its first request`,
    );
    this.streamsOpened++;
    const stats = (this.stats = new StreamStats(call.delta, this.wallClock));
    this.setUpstream("connecting");
    const relay = new StreamRelay(call, {
      codec: this.codec,
      internal: this.internal,
      initialRequests: this.initialRequests,
      lastHealth: () => this.lastHealth,
      maxRequestBytes: this.o.maxRequestBytes,
      log: this.log,
      logLimit: this.logLimit,
      metrics: this.metrics,
      onUpstreamConnected: () => {
        this.blocker?.clear();
        if (this.stats === stats) this.setUpstream("connected");
      },
      onUpstreamClosed: (status) => {
        if (this.stats === stats) this.setUpstream("disconnected", status);
      },
      ecds: this.o.ecds,
      stats,
      ...(this.burst ? { received: this.burst } : {}),
    });
    this.active = relay;
    void relay.done.then(() => {
      if (this.stats === stats && this.upstreamState.state !== "disconnected") this.setUpstream("disconnected");
      if (this.active === relay) this.active = undefined;
    });
    return relay.start(this.o.upstream);
  }
}

const mib = (bytes: number) => (bytes / 1048576).toFixed(1);

export interface XdsProxyDeps {
  log: Logger;
  registry: Registry;
  readiness: Readiness;
  nameTables?: NameTableSink;
  trustBundles?: TrustBundleSink;
  /** The DNS proxy is on: subscribe to NDS. */
  dnsEnabled: boolean;
  /** Replace the istiod upstream (LOCAL_XDS_PATH, tests). */
  upstream?: Upstream;
  ecds?: EcdsHook;
  /** Wall-clock milliseconds for the operator's view. */
  wallClock?: () => number;
  /** Resident set and full collection, for burst memory (XdsProxyOptions.memory). */
  memory?: { rss(): number; collect(): void };
  clock?: Pick<Clock, "timer">;
  /** Monotonic milliseconds. */
  now?: () => number;
}

/**
 * Who may connect to the XDS socket. In proxyless mode (DISABLE_ENVOY) the application container,
 * running as its own UID, is the xDS client: unless XDS_AUTHORIZED_UIDS says otherwise every UID
 * is allowed (said once at start); with Envoy the default stays {own UID, 1337, 0}.
 */
export function xdsAuthorizer(cfg: AgentConfig, log: Logger): PeerAuthorizer {
  const proxyless = cfg.env.DISABLE_ENVOY;
  const a = new PeerAuthorizer(cfg.env.XDS_AUTHORIZED_UIDS, cfg.uid, proxyless);
  if (proxyless && cfg.env.XDS_AUTHORIZED_UIDS.trim() === "") {
    log.info("proxyless mode (DISABLE_ENVOY): the XDS socket accepts clients of any UID; set XDS_AUTHORIZED_UIDS to restrict it");
  }
  return a;
}

/** The composition root's factory: everything from AgentConfig. */
export function createXdsProxy(cfg: AgentConfig, deps: XdsProxyDeps): XdsProxy {
  const configPath = resolve(cfg.root, cfg.proxyConfig.configPath ?? "./etc/istio/proxy");
  return new XdsProxy({
    socketPath: join(configPath, "XDS"),
    upstream: deps.upstream ?? new IstiodUpstream(dialConfigFrom(cfg, nodeFiles)),
    authorizer: xdsAuthorizer(cfg, deps.log),
    log: deps.log,
    registry: deps.registry,
    readiness: deps.readiness,
    nameTables: deps.nameTables,
    trustBundles: deps.trustBundles,
    subscribeNds: deps.dnsEnabled,
    subscribePcds: cfg.env.PROXY_CONFIG_XDS_AGENT,
    maxRequestBytes: cfg.env.ISTIO_GPRC_MAXRECVMSGSIZE,
    maxConcurrentStreams: cfg.env.ISTIO_GPRC_MAXSTREAMS,
    ecds: deps.ecds,
    ...(deps.wallClock ? { wallClock: deps.wallClock } : {}),
    ...(deps.memory ? { memory: deps.memory } : {}),
    ...(deps.clock ? { clock: deps.clock } : {}),
    ...(deps.now ? { now: deps.now } : {}),
  });
}
