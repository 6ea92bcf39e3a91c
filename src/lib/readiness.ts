// Readiness as a list of named conditions (ARCHITECTURE principle 4). A component registers a
// condition with a name (`dns table received`, `terminating`) and clears it when it holds; it may
// record the last error seen while pending. Two kinds:
//   - blockers gate readiness; they are exactly Istio's reasons for the mode (plus conditions of
//     our opt-in features, e.g. `envoy restarting` under ENVOY_RESTART_POLICY=on-failure);
//   - warnings (`xds connected`, `certificate warmed`, `certificate renewal`) never gate: Istio does
//     not check them, so they only explain more in the not-ready body.
// A not-ready answer names every pending blocker and its last error, then the warnings. When a
// condition clears, one line says how long it was pending and how many blockers remain (ztunnel's
// BlockReady), so the log tells the story of a slow start.

import { systemClock } from "./clock.ts";
import type { Logger } from "./log.ts";

/**
 * Every name a readiness condition or check goes by, in one place: these are the words of the
 * not-ready body and of the log, so operators' alerts and runbooks may match on them.
 */
export const READINESS = {
  /** Blocker (DNS proxy on): the first NDS name table has not arrived. */
  dnsTable: "dns table received",
  /** Blocker (local mode): the local xDS file has not loaded. */
  localXdsLoaded: "local xDS file loaded",
  /** Blocker: a signal or /quitquitquit asked the agent to stop. */
  terminating: "terminating",
  /** Blocker (ENVOY_RESTART_POLICY=on-failure): Envoy exited and is being restarted. */
  envoyRestarting: "envoy restarting",
  /** Warning: no upstream xDS stream yet. */
  xdsConnected: "xds connected",
  /** Warning: the first workload certificate and root are not yet in the cache. */
  certificateWarmed: "certificate warmed",
  /** Warning: a workload certificate renewal is overdue. */
  certificateRenewal: "certificate renewal",
  /** Check of the status server: Envoy's own readiness (admin API stats and server state). */
  envoy: "envoy",
  /** Check of the status server: the gRPC xDS bootstrap file (GRPC_XDS_BOOTSTRAP). */
  grpcBootstrap: "grpc bootstrap",
} as const;

export type ReadinessName = (typeof READINESS)[keyof typeof READINESS];

/** `1.3s`: how a pending time is written in the not-ready body and the log. */
export function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/** Why a condition is pending at `now`: its last error, or `pending for 3.2s`. */
export function explainCondition(s: BlockerState, now: number): string {
  return s.lastError ?? `pending for ${formatSeconds(now - s.since)}`;
}

export interface BlockerState {
  name: string;
  since: number;
  lastError?: string;
  /** False for a warning: reported, never gating. */
  gates: boolean;
}

export class Readiness {
  private readonly pending = new Map<string, BlockerState>();
  private readonly changeListeners: (() => void)[] = [];

  /** `log` hears each condition clearing; `now` dates conditions (tests inject). */
  constructor(
    private readonly now: () => number = systemClock.now,
    private readonly log?: Logger,
  ) {}

  /** `fn` runs whenever a condition is raised or cleared (the status thread's cached 200 then ends). */
  onChange(fn: () => void): void {
    this.changeListeners.push(fn);
  }

  private changed(): void {
    for (const fn of this.changeListeners) fn();
  }

  /** Register (or re-register) a blocker; returns a handle to clear it or report errors. */
  block(name: string): Blocker {
    return this.register(name, true);
  }

  /** Register a warning: reported with the blockers but never making the agent unready. */
  warn(name: string): Blocker {
    return this.register(name, false);
  }

  private register(name: string, gates: boolean): Blocker {
    if (!this.pending.has(name)) {
      this.pending.set(name, { name, since: this.now(), gates });
      this.changed();
    }
    return {
      clear: () => this.clear(name),
      fail: (err: string) => {
        const s = this.pending.get(name);
        if (s && s.lastError !== err) {
          s.lastError = err;
          this.changed();
        }
      },
      reblock: () => {
        if (!this.pending.has(name)) {
          this.pending.set(name, { name, since: this.now(), gates });
          this.changed();
        }
      },
    };
  }

  /** Clear a pending condition: one log line with how long it was pending and how many blockers remain. */
  clear(name: string): void {
    const s = this.pending.get(name);
    if (!s) return;
    this.pending.delete(name);
    this.changed();
    const left = this.blockers().length;
    this.log?.info(
      `${s.gates ? "" : "warning "}"${name}" cleared after ${formatSeconds(this.now() - s.since)}, ${left} ${left === 1 ? "blocker" : "blockers"} still pending`,
      { condition: name, pending: left },
    );
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

  /** Why a condition is pending: its last error, or `pending for 3.2s`. */
  explain(s: BlockerState): string {
    return explainCondition(s, this.now());
  }

  /** One line per pending condition: `name: last error` or `name: pending for 3.2s`; warnings say so. */
  describe(): string {
    return [...this.blockers(), ...this.warnings()].map((b) => `${b.gates ? "" : "warning: "}${b.name}: ${this.explain(b)}`).join("\n");
  }
}

export interface Blocker {
  clear(): void;
  fail(err: string): void;
  /** Raise again after having been cleared (e.g. `terminating`). */
  reblock(): void;
}
