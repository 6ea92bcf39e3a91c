// A manual clock for rotation and backoff tests: time moves only when the test says so.

import type { Clock, TimerHandle } from "../../src/sds/clock.ts";

export class FakeClock implements Clock {
  private t: number;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private ids = 0;

  constructor(start = Date.parse("2026-11-21T00:00:00Z")) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  timer(ms: number, fn: () => void): TimerHandle {
    const id = ++this.ids;
    this.timers.push({ at: this.t + Math.max(0, ms), fn, id });
    return { cancel: () => (this.timers = this.timers.filter((x) => x.id !== id)) };
  }

  /** Earliest pending timer's due time. */
  nextAt(): number | undefined {
    return this.timers.length ? Math.min(...this.timers.map((x) => x.at)) : undefined;
  }

  pending(): number {
    return this.timers.length;
  }

  /** Move time forward, firing due timers in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = this.timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((x) => x.id !== due.id);
      this.t = Math.max(this.t, due.at);
      due.fn();
    }
    this.t = end;
  }
}

/** Let promises and I/O settle until `cond` holds (real time, bounded). */
export async function until(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
