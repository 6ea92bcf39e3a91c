// Readiness as a list of named conditions (ARCHITECTURE principle 4). A component registers a
// condition with a name (`dns table received`, `terminating`) and clears it when it holds; it may
// record the last error seen while pending. Two kinds:
//   - blockers gate readiness; they are exactly Istio's reasons for the mode (plus conditions of
//     our opt-in features, e.g. `envoy restarting` under ENVOY_RESTART_POLICY=on-failure);
//   - warnings (`xds connected`, `certificate warmed`, `certificate renewal`) never gate: Istio does
//     not check them, so they only explain more in the not-ready body.
// A not-ready answer names every pending blocker and its last error, then the warnings.

import { systemClock } from "./clock.ts";

export interface BlockerState {
  name: string;
  since: number;
  lastError?: string;
  /** False for a warning: reported, never gating. */
  gates: boolean;
}

export class Readiness {
  private readonly pending = new Map<string, BlockerState>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly now: () => number = systemClock.now) {}

  /** Register (or re-register) a blocker; returns a handle to clear it or report errors. */
  block(name: string): Blocker {
    return this.register(name, true);
  }

  /** Register a warning: reported with the blockers but never making the agent unready. */
  warn(name: string): Blocker {
    return this.register(name, false);
  }

  private register(name: string, gates: boolean): Blocker {
    if (!this.pending.has(name)) this.pending.set(name, { name, since: this.now(), gates });
    this.changed();
    return {
      clear: () => this.clear(name),
      fail: (err: string) => {
        const s = this.pending.get(name);
        if (s) s.lastError = err;
      },
      reblock: () => {
        if (!this.pending.has(name)) {
          this.pending.set(name, { name, since: this.now(), gates });
          this.changed();
        }
      },
    };
  }

  clear(name: string): void {
    if (this.pending.delete(name)) this.changed();
  }

  isReady(): boolean {
    for (const s of this.pending.values()) if (s.gates) return false;
    return true;
  }

  /** Pending conditions that gate readiness. */
  blockers(): BlockerState[] {
    return [...this.pending.values()].filter((s) => s.gates);
  }

  /** Pending conditions that are only reported. */
  warnings(): BlockerState[] {
    return [...this.pending.values()].filter((s) => !s.gates);
  }

  /** One line per pending condition: `name: last error` or `name: pending for 3.2s`; warnings say so. */
  describe(): string {
    return [...this.blockers(), ...this.warnings()]
      .map((b) => `${b.gates ? "" : "warning: "}${b.name}: ${b.lastError ?? `pending for ${((this.now() - b.since) / 1000).toFixed(1)}s`}`)
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
  /** Raise again after having been cleared (e.g. `terminating`). */
  reblock(): void;
}
