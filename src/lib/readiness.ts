// Readiness as a list of named blockers (ARCHITECTURE principle 4). A component registers a
// blocker with a name (`xds connected`, `certificate warmed`, `dns table received`) and clears it
// when the condition holds; it may record the last error seen while blocked. A not-ready answer
// names every pending blocker and its last error.

export interface BlockerState {
  name: string;
  since: number;
  lastError?: string;
}

export class Readiness {
  private readonly pending = new Map<string, BlockerState>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Register (or re-register) a blocker; returns a handle to clear it or report errors. */
  block(name: string): Blocker {
    if (!this.pending.has(name)) this.pending.set(name, { name, since: this.now() });
    this.changed();
    return {
      clear: () => this.clear(name),
      fail: (err: string) => {
        const s = this.pending.get(name);
        if (s) s.lastError = err;
      },
      reblock: () => {
        if (!this.pending.has(name)) {
          this.pending.set(name, { name, since: this.now() });
          this.changed();
        }
      },
    };
  }

  clear(name: string): void {
    if (this.pending.delete(name)) this.changed();
  }

  isReady(): boolean {
    return this.pending.size === 0;
  }

  blockers(): BlockerState[] {
    return [...this.pending.values()];
  }

  /** One line per pending blocker: `name: last error` or `name: pending for 3.2s`. */
  describe(): string {
    return this.blockers()
      .map((b) => `${b.name}: ${b.lastError ?? `pending for ${((this.now() - b.since) / 1000).toFixed(1)}s`}`)
      .join("\n");
  }

  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }
}

export interface Blocker {
  clear(): void;
  fail(err: string): void;
  /** Block again after having been cleared (e.g. `terminating`). */
  reblock(): void;
}
