// The composition root: builds every component from the one AgentConfig, starts them in
// Istio's order (DNS, SDS, xDS proxy, gRPC bootstrap, status server, Envoy) and owns shutdown:
// graceful first (abort the shared signal, let each component finish), forced after a deadline.

import type { AgentConfig } from "./config/agentconfig.ts";
import type { Component } from "./lib/component.ts";
import type { LogSink, Logger } from "./lib/log.ts";
import { newRegistry, type Registry } from "./lib/metrics.ts";
import { Readiness } from "./lib/readiness.ts";

export interface AgentDeps {
  sink: LogSink;
  now?: () => number;
}

/** Upper bound on a graceful stop beyond the configured drain, before the agent exits anyway. */
const STOP_GRACE_MS = 10_000;

export class Agent {
  readonly registry: Registry;
  readonly readiness: Readiness;
  readonly components: Component[] = [];
  /** Resolves with the process exit code once the agent has stopped. */
  readonly done: Promise<number>;
  private readonly log: Logger;
  private readonly now: () => number;
  private resolveDone!: (code: number) => void;
  private exitCode = 0;

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

  /** Build and start every component; resolves once all are serving. */
  async start(signal: AbortSignal): Promise<void> {
    const t0 = this.now();
    signal.addEventListener("abort", () => void this.shutdown(), { once: true });
    for (const c of this.components) {
      if (signal.aborted) break;
      try {
        await c.start(signal);
      } catch (e) {
        this.log.error(`${c.name}: failed to start: ${(e as Error).message}`);
        this.exitCode = 1;
        void this.shutdown();
        return;
      }
    }
    this.log.info(`Agent started in ${(this.now() - t0).toFixed(1)}ms`, { components: this.components.map((c) => c.name).join(",") || "none" });
  }

  /** A component that ends the agent by itself (Envoy exited) reports its exit code here. */
  finish(code: number): void {
    this.exitCode = code;
    void this.shutdown();
  }

  /** Second signal: stop waiting for anything. */
  forceStop(): void {
    this.resolveDone(this.exitCode);
  }

  private shuttingDown = false;
  private async shutdown(): Promise<void> {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    const waits = this.components.map((c) => c.stopped?.() ?? Promise.resolve());
    const deadline = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), STOP_GRACE_MS).unref?.());
    const result = await Promise.race([Promise.allSettled(waits).then(() => "ok" as const), deadline]);
    if (result === "timeout") this.log.warn(`components did not stop within ${STOP_GRACE_MS}ms; exiting anyway`);
    this.log.info("Agent stopped");
    this.resolveDone(this.exitCode);
  }
}
