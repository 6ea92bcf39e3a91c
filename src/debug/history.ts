// The readiness conditions' story for the operator's view (/debug/config_dump, the /debug/ page):
// each condition raised, failed (a new last error) and cleared, with when. Built from the
// Readiness change notifications by comparing what is pending before and after, so the readiness
// module itself keeps no history. Bounded: the oldest events go first past MAX_EVENTS.

import type { BlockerState, Readiness } from "../lib/readiness.ts";

export const MAX_EVENTS = 200;

export interface ReadinessEvent {
  atMs: number;
  name: string;
  event: "raised" | "failed" | "cleared";
  /** False for a warning (never gates readiness). */
  gates: boolean;
  error?: string;
}

export class ReadinessHistory {
  private readonly events: ReadinessEvent[] = [];
  private pending = new Map<string, BlockerState>();
  /** Events dropped past MAX_EVENTS. */
  private dropped = 0;

  constructor(
    private readonly readiness: Readiness,
    private readonly now: () => number,
  ) {
    this.observe();
    readiness.onChange(() => this.observe());
  }

  private observe(): void {
    const next = new Map<string, BlockerState>();
    for (const s of [...this.readiness.blockers(), ...this.readiness.warnings()]) next.set(s.name, { ...s });
    const at = this.now();
    for (const [name, s] of next) {
      const before = this.pending.get(name);
      if (!before) this.add({ atMs: at, name, event: "raised", gates: s.gates, ...(s.lastError ? { error: s.lastError } : {}) });
      else if (s.lastError !== undefined && s.lastError !== before.lastError) this.add({ atMs: at, name, event: "failed", gates: s.gates, error: s.lastError });
    }
    for (const [name, s] of this.pending) if (!next.has(name)) this.add({ atMs: at, name, event: "cleared", gates: s.gates });
    this.pending = next;
  }

  private add(e: ReadinessEvent): void {
    this.events.push(e);
    if (this.events.length > MAX_EVENTS) {
      this.events.shift();
      this.dropped++;
    }
  }

  /** Oldest first; `dropped` counts the events that no longer fit. */
  snapshot(): { events: ReadinessEvent[]; dropped: number } {
    return { events: this.events.map((e) => ({ ...e })), dropped: this.dropped };
  }
}
