// The composition root: builds every component from the one AgentConfig and starts them in
// Istio's order — status server, DNS proxy, secrets (SDS), xDS relay, gRPC bootstrap, Envoy
// bootstrap, Envoy — and owns shutdown. On the first signal Envoy drains while everything else
// keeps serving (Envoy still needs config, certificates and its health route); when Envoy has
// exited the other components stop. A second signal stops waiting.

import type { AgentConfig } from "./config/agentconfig.ts";
import type { Component } from "./lib/component.ts";
import type { LogSink, Logger } from "./lib/log.ts";
import type { LifecycleControl } from "./lib/interfaces.ts";
import { newRegistry, type Registry } from "./lib/metrics.ts";
import { Readiness } from "./lib/readiness.ts";
import { createStatusServer } from "./status/create.ts";
import { createDnsProxy, dnsProxyEnabled } from "./dns/factory.ts";
import type { DnsProxy } from "./dns/proxy.ts";
import { createSecretManager, type SecretManager } from "./sds/manager.ts";
import { writeBootstrap, writeGrpcBootstrap } from "./bootstrap/index.ts";
import { createEnvoySupervisor, type EnvoyComponent } from "./envoy/index.ts";
import { createIptablesTracer } from "./iptables/tracer.ts";
import { createUpstreamSide, type UpstreamSide } from "./agent-upstream.ts";

export interface AgentDeps {
  sink: LogSink;
  /** Monotonic clock in ms (tests inject). */
  now?: () => number;
  /** `--log_as_json`, so Envoy's own log matches. */
  logAsJson?: boolean;
  /** Milliseconds since the process started (for the start-up log line). */
  uptimeMs?: () => number;
}

/** After Envoy exits, how long the other components get to stop before the agent exits anyway. */
const STOP_GRACE_MS = 5_000;

export class Agent {
  readonly registry: Registry;
  readonly readiness: Readiness;
  /** Resolves with the process exit code once the agent has stopped. */
  readonly done: Promise<number>;
  dns?: DnsProxy;
  secrets?: SecretManager;
  upstream?: UpstreamSide;
  envoy?: EnvoyComponent;
  private readonly components: Component[] = [];
  private readonly log: Logger;
  private readonly now: () => number;
  /** Aborted once Envoy is gone: stops everything but Envoy. */
  private readonly stopAll = new AbortController();
  private resolveDone!: (code: number) => void;
  private exitCode = 0;
  private finishing = false;

  constructor(
    readonly config: AgentConfig,
    private readonly deps: AgentDeps,
  ) {
    this.log = deps.sink.logger();
    this.now = deps.now ?? (() => performance.now());
    this.registry = newRegistry({ processMetrics: true });
    this.readiness = new Readiness();
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  /** Build and start every component; resolves once all are serving and Envoy is spawned. */
  async start(signal: AbortSignal): Promise<void> {
    const t0 = this.now();
    const cfg = this.config;
    const env = cfg.env;
    const sink = this.deps.sink;
    const common = { registry: this.registry, readiness: this.readiness };
    const envoyEnabled = !env.DISABLE_ENVOY;
    const stop = this.stopAll.signal;

    const lifecycle: LifecycleControl = {
      quit: () => (this.envoy ? this.envoy.quit() : this.finish(0)),
      drain: async () => {
        if (this.envoy) await this.envoy.drain();
      },
    };
    signal.addEventListener("abort", () => (this.envoy ? undefined : this.finish(0)), { once: true });

    try {
      if (dnsProxyEnabled(cfg)) this.dns = createDnsProxy(cfg, { log: sink.logger("dns"), ...common });
      this.secrets = createSecretManager(cfg, { log: sink.logger("sds"), ...common });
      this.upstream = createUpstreamSide(cfg, { sink, ...common, nameTables: this.dns, trustBundles: this.secrets, dnsEnabled: !!this.dns });
      const statusPort = cfg.proxyConfig.statusPort ?? 0;
      const status =
        statusPort > 0
          ? createStatusServer(cfg, {
              log: sink.logger("status"),
              ...common,
              lifecycle,
              ndsz: this.dns ? () => this.dns!.ndsz() : undefined,
              health: this.upstream.health,
              envoyEnabled,
              shutdown: signal,
            })
          : undefined;
      if (!status) this.log.info("status server disabled (statusPort 0)");

      // Istio starts the status server before the agent, then DNS, SDS, the xDS proxy.
      for (const c of [status, this.dns, this.secrets, ...this.upstream.components, createIptablesTracer(cfg, sink.logger("iptables"))]) {
        if (!c || signal.aborted) continue;
        await c.start(stop);
        this.components.push(c);
      }

      const sdsMode = this.secrets.mode;
      const ctx = { customCredentialsFileExists: sdsMode?.kind === "files-only" };
      const grpcPath = await writeGrpcBootstrap(cfg, ctx);
      this.log.info(`gRPC xDS bootstrap written to ${grpcPath}`);

      if (envoyEnabled && !signal.aborted) {
        const bootstrap = await writeBootstrap(cfg, { ...ctx, logAsJson: this.deps.logAsJson });
        for (const p of bootstrap.problems) this.log.warn(p);
        this.envoy = createEnvoySupervisor(cfg, {
          log: sink.logger("envoy"),
          readiness: this.readiness,
          bootstrapPath: bootstrap.path,
          ...(bootstrap.configYaml !== undefined ? { configYaml: bootstrap.configYaml } : {}),
        });
        await this.envoy.start(signal);
        void this.envoy.exited.then((code) => this.finish(code));
      } else if (!envoyEnabled) {
        this.log.info("DISABLE_ENVOY: proxyless mode, Envoy is not started");
      }
    } catch (e) {
      this.log.error(`agent failed to start: ${(e as Error).message}`);
      this.exitCode = 1;
      this.envoy?.shutdown({ immediate: true });
      this.finish(1);
      return;
    }
    const up = this.deps.uptimeMs ? `, ${this.deps.uptimeMs().toFixed(1)}ms after process start` : "";
    this.log.info(`Agent started in ${(this.now() - t0).toFixed(1)}ms${up}`, { components: [...this.components.map((c) => c.name), ...(this.envoy ? ["envoy"] : [])].join(",") });
  }

  /** Second signal: stop Envoy at once and stop waiting for anything. */
  forceStop(): void {
    this.log.warn("forced stop");
    void this.envoy?.shutdown({ immediate: true });
    this.finish(this.exitCode);
    setTimeout(() => this.resolveDone(this.exitCode), 1000).unref?.();
  }

  /** Envoy is gone (or there is none): stop the other components, then resolve `done`. */
  private finish(code: number): void {
    if (this.finishing) return;
    this.finishing = true;
    if (code !== 0) this.exitCode = code;
    this.stopAll.abort();
    const waits = this.components.map((c) => c.stopped?.() ?? Promise.resolve());
    const deadline = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), STOP_GRACE_MS).unref?.());
    void Promise.race([Promise.allSettled(waits).then(() => "ok" as const), deadline]).then((result) => {
      if (result === "timeout") this.log.warn(`components did not stop within ${STOP_GRACE_MS}ms; exiting anyway`);
      this.log.info("Agent stopped");
      this.resolveDone(this.exitCode);
    });
  }
}
