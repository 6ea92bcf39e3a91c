// A manual stand-in for the supervisor's timed waits: each sleep stays pending until the test
// releases it (or its signal aborts), so "still draining after N polls" is a fact of the sequence,
// not of how long a sleep on a loaded machine happened to last.

export interface PendingSleep {
  ms: number;
  release(): void;
}

export class ManualSleep {
  private readonly pending: PendingSleep[] = [];
  private readonly waiters: (() => void)[] = [];
  /** Durations of every sleep started, in order. */
  readonly started: number[] = [];

  readonly sleep = (ms: number, signal?: AbortSignal): Promise<boolean> =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve(false);
      const entry: PendingSleep = {
        ms,
        release: () => {
          this.drop(entry);
          signal?.removeEventListener("abort", onAbort);
          resolve(true);
        },
      };
      const onAbort = () => {
        this.drop(entry);
        resolve(false);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.push(entry);
      this.started.push(ms);
      for (const w of this.waiters.splice(0)) w();
    });

  /** The first pending sleep of `ms`, waiting (up to `timeoutMs`) for it to start. */
  async next(ms: number, timeoutMs = 5000): Promise<PendingSleep> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.pending.find((p) => p.ms === ms);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no sleep of ${ms}ms started within ${timeoutMs}ms (pending: ${this.pending.map((p) => p.ms).join(", ") || "none"})`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, Math.min(left, 50));
      });
    }
  }

  /** Pending sleeps, by duration. */
  pendingMs(): number[] {
    return this.pending.map((p) => p.ms);
  }

  private drop(entry: PendingSleep): void {
    const i = this.pending.indexOf(entry);
    if (i >= 0) this.pending.splice(i, 1);
  }
}
