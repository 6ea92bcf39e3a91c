// Stopping with one budget (ztunnel's drain.rs: a DrainTrigger, DrainWatchers that hold the drain
// open until released, and a deadline after which the drain ends anyway). The composition root
// owns one trigger; each part that must finish something on shutdown registers a watcher, hears
// the drain through the watcher's signal, and releases the watcher when done. `start()` tells
// every watcher and resolves when all have released or the deadline has passed, naming the ones
// still pending, so a slow part is reported instead of silently cut off.

import type { Clock } from "./clock.ts";

/**
 * The agent's one shutdown budget: how long the parts get to stop once asked (components after
 * Envoy has exited, the xDS relay's last stream, Envoy between SIGTERM and SIGKILL). Istio uses 5s
 * in each of those places.
 */
export const SHUTDOWN_BUDGET_MS = 5_000;

export interface DrainWatcher {
  readonly name: string;
  /** Aborted when the drain starts (at once for a watcher registered after it started). */
  readonly signal: AbortSignal;
  /** This part has finished; idempotent. */
  release(): void;
}

export interface DrainOutcome {
  /** True when every watcher released before the deadline. */
  complete: boolean;
  /** Names of the watchers still holding the drain when it ended (empty when complete). */
  pending: string[];
}

export interface DrainOptions {
  clock: Clock;
  /** How long `start()` waits for the watchers (default SHUTDOWN_BUDGET_MS). */
  deadlineMs?: number;
}

export class DrainTrigger {
  private readonly ac = new AbortController();
  private readonly holding = new Map<number, string>();
  private ids = 0;
  private outcome: Promise<DrainOutcome> | undefined;
  private settle: ((o: DrainOutcome) => void) | undefined;
  readonly deadlineMs: number;

  constructor(private readonly o: DrainOptions) {
    this.deadlineMs = o.deadlineMs ?? SHUTDOWN_BUDGET_MS;
  }

  /** Aborted when the drain starts. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Whether `start()` has been called. */
  get started(): boolean {
    return this.outcome !== undefined;
  }

  /** Names of the watchers not yet released, in registration order. */
  pending(): string[] {
    return [...this.holding.values()];
  }

  /**
   * A watcher that holds the drain open until released. Registered after the drain started, it
   * is told at once and still held for, unless the drain has already ended.
   */
  watch(name: string): DrainWatcher {
    const id = ++this.ids;
    const ended = this.outcome !== undefined && this.settle === undefined;
    if (!ended) this.holding.set(id, name);
    return {
      name,
      signal: this.ac.signal,
      release: () => {
        if (this.holding.delete(id)) this.check();
      },
    };
  }

  /** A watcher released when `done` settles (fulfilled or rejected). */
  track(name: string, done: Promise<unknown>): DrainWatcher {
    const w = this.watch(name);
    void done.then(w.release, w.release);
    return w;
  }

  /** Start the drain (once; later calls return the same outcome) and wait for it to end. */
  start(): Promise<DrainOutcome> {
    if (this.outcome) return this.outcome;
    this.outcome = new Promise((resolve) => (this.settle = resolve));
    const deadline = this.o.clock.timer(this.deadlineMs, () => this.end(false));
    void this.outcome.then(() => deadline.cancel());
    this.ac.abort();
    this.check();
    return this.outcome;
  }

  private check(): void {
    if (this.settle && this.holding.size === 0) this.end(true);
  }

  private end(complete: boolean): void {
    const settle = this.settle;
    if (!settle) return;
    this.settle = undefined;
    settle({ complete, pending: complete ? [] : this.pending() });
  }
}
