// Time as the secret cache sees it: injected so tests drive rotation, backoff and expiry without
// waiting. `systemClock` is the real one.

export type TimerHandle = { cancel(): void };

export interface Clock {
  now(): number;
  /** Run `fn` after `ms`; the handle cancels it. */
  timer(ms: number, fn: () => void): TimerHandle;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  timer(ms, fn) {
    const t = setTimeout(fn, Math.max(0, Math.min(ms, 2_147_483_647)));
    t.unref?.();
    return { cancel: () => clearTimeout(t) };
  },
};

/** Sleep on a clock; resolves false when the signal aborts first. */
export function clockSleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<boolean> {
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
