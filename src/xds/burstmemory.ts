// Burst memory: what relaying a large push leaves resident, handed back once the push is over.
// Every socket read in Bun arrives as a fresh buffer (node:net, node:tls and Bun's own sockets
// alike; node:net's `onread` buffer is filled from one), so relaying N MiB allocates N MiB that is
// garbage as soon as it is written on. The collector runs late and the allocator (mimalloc) keeps
// freed pages until something asks it to return them: after a burst the agent stayed 17-32 % above
// its idle RSS for many seconds (docs/memory.md, "Burst memory").
//
// So the relay tells this meter how many bytes it received from istiod. Once nothing has arrived
// for QUIET_MS after at least MIN_BURST_BYTES, and the resident set is still MIN_GROWTH_BYTES above
// its level after the last collections (the runtime's own collections often got there first:
// then nothing is paid), it runs one full collection (Bun.gc(true): JSC's
// synchronous full collection, then mimalloc's collect), and a second one SETTLE_MS later, when
// the allocator's purge delay (100 ms in Bun's mimalloc) has passed for what the first one freed.
// Collections during a burst were measured and not kept: each costs ~10 ms on the main thread, and
// one per 12 MiB cut the 1 MiB-push peak by ~10 MiB but halved throughput.
// Nothing runs at rest: the timer is armed only while bytes arrive, and fires at most twice per burst.

import type { Clock, TimerHandle } from "../lib/clock.ts";

/** A burst smaller than this leaves nothing worth a collection. */
export const MIN_BURST_BYTES = 4 * 1024 * 1024;
/** Collect only when the resident set is this far above its level after the last collections (or before the first burst). */
export const MIN_GROWTH_BYTES = 4 * 1024 * 1024;
/** No bytes for this long: the burst is over. */
export const QUIET_MS = 1000;
/** The second collection, once the allocator's purge delay has passed for what the first freed. */
export const SETTLE_MS = 300;

export interface BurstMemoryOptions {
  /** Resident set size now, in bytes. */
  rss(): number;
  /** A full, synchronous collection that also returns the allocator's free pages (Bun.gc(true)). */
  collect(): void;
  /** Timers (the quiet wait). */
  clock: Pick<Clock, "timer">;
  /** Monotonic milliseconds. */
  now(): number;
  /** Told after a burst's collections: the bytes of the burst, the resident set before, after the first and after the second, the time they took. */
  onCollect?(burstBytes: number, rss: [number, number, number], ms: number): void;
  minBurstBytes?: number;
  minGrowthBytes?: number;
  quietMs?: number;
  settleMs?: number;
}

export class BurstMemory {
  /** Collections run (for tests and the debug log). */
  collections = 0;
  private readonly minBytes: number;
  private readonly minGrowth: number;
  /** The resident set after the last collections, or when the first bytes arrived. */
  private floor: number | undefined;
  private readonly quietMs: number;
  private readonly settleMs: number;
  /** Bytes received since the last burst's collections. */
  private burstBytes = 0;
  private lastAt = 0;
  private timer: TimerHandle | undefined;

  constructor(private readonly o: BurstMemoryOptions) {
    this.minBytes = o.minBurstBytes ?? MIN_BURST_BYTES;
    this.minGrowth = o.minGrowthBytes ?? MIN_GROWTH_BYTES;
    this.quietMs = o.quietMs ?? QUIET_MS;
    this.settleMs = o.settleMs ?? SETTLE_MS;
  }

  /** `bytes` were received from the network. */
  count(bytes: number): void {
    this.floor ??= this.o.rss();
    this.burstBytes += bytes;
    this.lastAt = this.o.now();
    if (!this.timer && this.burstBytes >= this.minBytes) this.waitQuiet(this.quietMs);
  }

  /** Stop the timer (shutdown). */
  stop(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }

  private waitQuiet(ms: number): void {
    this.timer = this.o.clock.timer(ms, () => {
      this.timer = undefined;
      const idle = this.o.now() - this.lastAt;
      if (idle < this.quietMs) return this.waitQuiet(this.quietMs - idle);
      const bytes = this.burstBytes;
      this.burstBytes = 0;
      const before = this.o.rss();
      // The runtime's own collections already brought it back: nothing to pay for.
      if (before - (this.floor ?? 0) < this.minGrowth) return;
      const t0 = this.o.now();
      this.collect();
      const first = this.o.now() - t0;
      const mid = this.o.rss();
      this.timer = this.o.clock.timer(this.settleMs, () => {
        this.timer = undefined;
        const t1 = this.o.now();
        this.collect();
        const ms = first + this.o.now() - t1;
        const after = this.o.rss();
        this.floor = after;
        this.o.onCollect?.(bytes, [before, mid, after], ms);
        // Bytes that came in meanwhile start the next burst's wait.
        if (this.burstBytes >= this.minBytes) this.waitQuiet(this.quietMs - (this.o.now() - this.lastAt));
      });
    });
  }

  private collect(): void {
    this.o.collect();
    this.collections++;
  }
}
