// Time, injected. Every part of the agent that waits, times out or stamps a moment gets a Clock
// from the composition root, so tests move time themselves instead of sleeping (ztunnel's paused
// tokio time). `systemClock` is the only place that reads the real clock; `ManualClock` is the
// fake whose time moves only on `advance()`.

export type TimerHandle = { cancel(): void };

export interface Clock {
  /** Milliseconds since the Unix epoch (certificate expiry, restart history, "pending for"). */
  now(): number;
  /** Run `fn` once after `ms`; the handle cancels it. */
  timer(ms: number, fn: () => void): TimerHandle;
  /** Resolves true after `ms`, or false as soon as `signal` aborts (at once if already aborted). */
  sleep(ms: number, signal?: AbortSignal): Promise<boolean>;
}

/** The longest delay a timer takes (2^31-1 ms, about 24.8 days); setTimeout fires a longer one at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Sleep on any clock's timers; resolves false when the signal aborts first. */
export function clockSleep(clock: Pick<Clock, "timer">, ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      h.cancel();
      resolve(false);
    };
    const h = clock.timer(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A real timer; `keepAlive` says whether it holds the process open until it fires. */
function realTimer(ms: number, fn: () => void, keepAlive: boolean): TimerHandle {
  const t = setTimeout(fn, Math.max(0, Math.min(ms, MAX_TIMER_MS)));
  if (!keepAlive) t.unref?.();
  return { cancel: () => clearTimeout(t) };
}

/**
 * The real clock. Its timers (rotation, expiry: background work) do not keep the process alive; a
 * sleep does, since someone awaits it (`agent wait`, iptables validation).
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  timer: (ms, fn) => realTimer(ms, fn, false),
  sleep: (ms, signal) => clockSleep({ timer: (d, fn) => realTimer(d, fn, true) }, ms, signal),
};

interface ManualTimer {
  at: number;
  ms: number;
  fn: () => void;
  id: number;
}

/**
 * A clock for tests: time moves only when `advance` is called, firing due timers in due-time
 * order (timers due at the same instant fire in the order they were set).
 */
export class ManualClock implements Clock {
  private t: number;
  private timers: ManualTimer[] = [];
  private ids = 0;
  private readonly waiters: { ms: number | undefined; resolve: () => void }[] = [];

  constructor(start = Date.parse("2026-11-21T00:00:00Z")) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  timer(ms: number, fn: () => void): TimerHandle {
    const id = ++this.ids;
    const d = Math.max(0, ms);
    this.timers.push({ at: this.t + d, ms: d, fn, id });
    for (const w of this.waiters.filter((x) => x.ms === undefined || x.ms === d)) {
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve();
    }
    return { cancel: () => (this.timers = this.timers.filter((x) => x.id !== id)) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
    return clockSleep(this, ms, signal);
  }

  /** Earliest pending timer's due time. */
  nextAt(): number | undefined {
    return this.timers.length ? Math.min(...this.timers.map((x) => x.at)) : undefined;
  }

  /** Number of timers set and neither fired nor cancelled. */
  pending(): number {
    return this.timers.length;
  }

  /** Durations of the pending timers, in the order they were set. */
  pendingMs(): number[] {
    return this.timers.map((x) => x.ms);
  }

  /** Resolves once a timer of `ms` (any duration when omitted) is pending. */
  whenPending(ms?: number): Promise<void> {
    if (this.timers.some((x) => ms === undefined || x.ms === ms)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ ms, resolve }));
  }

  /** Move time forward by `ms`, firing every timer due by then, earliest first. */
  advance(ms: number): void {
    const end = this.t + Math.max(0, ms);
    for (;;) {
      let due: ManualTimer | undefined;
      for (const x of this.timers) if (x.at <= end && (!due || x.at < due.at)) due = x;
      if (!due) break;
      this.timers = this.timers.filter((x) => x.id !== due.id);
      this.t = Math.max(this.t, due.at);
      due.fn();
    }
    this.t = end;
  }
}
