// How many Wasm downloads run at once. Each running download holds one connection of fetch()'s
// process-wide pool, a few 16 KiB chunks and up to two scratch files; the rest wait here, in
// arrival order, until a slot frees or their own deadline passes. So one ECDS push naming many
// modules (or many pushes) cannot take every socket of the pool, nor multiply memory.

export class DownloadSlotError extends Error {
  override name = "DownloadSlotError";
}

export class DownloadSlots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly max: number) {}

  get active(): number {
    return this.running;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Run `f` in a slot; waiting for one ends with an error when `signal` fires first. */
  async run<T>(signal: AbortSignal, f: () => Promise<T>): Promise<T> {
    await this.acquire(signal);
    try {
      return await f();
    } finally {
      this.release();
    }
  }

  private acquire(signal: AbortSignal): Promise<void> {
    if (this.running < this.max) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener("abort", onAbort);
        this.running++;
        resolve();
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(
          new DownloadSlotError(
            `deadline passed while waiting for one of the ${this.max} Wasm download slots (all busy with other modules); it is retried on the next push, or give the WasmPlugin's fetch a longer timeout`,
          ),
        );
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  private release(): void {
    this.running--;
    this.waiting.shift()?.();
  }
}
