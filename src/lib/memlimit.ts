// GOMEMLIMIT, which Istio's injector sets on every proxy container (the container's memory limit
// in bytes), honoured as the agent's own soft memory cap. Go treats it as a soft limit: the
// garbage collector works harder as the heap nears it. Bun offers no heap limit setting at run
// time (JavaScriptCore's options are fixed before the VM starts), so the closest equivalent is
// done here: the resident set size is sampled every interval, and a full, synchronous collection
// runs when the next interval's growth would carry it past SOFT_FRACTION of the limit. Like Go's
// pacer, which starts a cycle early enough to finish before the goal at the current allocation
// rate, the trigger leads by the growth seen lately: a limiter that waited for the threshold
// itself lets one interval's allocations overshoot the limit (issue 35: 210.8 MiB against a
// 200 MiB limit, read from the kernel's high-water mark). Like Go's, the limit is soft: the agent
// never fails or exits because of it; staying above it after a collection is logged once per
// crossing. Syntax as Go's: bytes with an optional B, KiB, MiB, GiB or TiB suffix; "off" or
// empty means no limit.

import type { Component } from "./component.ts";
import { systemClock } from "./clock.ts";
import type { Logger } from "./log.ts";

/** Collect when the resident set passes this fraction of the limit. */
export const SOFT_FRACTION = 0.9;
/** The smallest limit accepted (below it the agent could not run at all). */
export const MIN_LIMIT_BYTES = 16 * 1024 * 1024;
/** Each interval the remembered growth keeps this share of itself, so one burst is not assumed forever. */
export const GROWTH_DECAY = 0.5;

export class MemLimitError extends Error {
  override name = "MemLimitError";
}

const UNITS: Record<string, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, TiB: 1024 ** 4 };

/** Bytes, or undefined for no limit. Throws MemLimitError naming GOMEMLIMIT for a bad value. */
export function parseGoMemLimit(raw: string): number | undefined {
  const v = raw.trim();
  if (v === "" || v === "off") return undefined;
  const m = /^(\d+)(B|KiB|MiB|GiB|TiB)?$/.exec(v);
  if (!m) throw new MemLimitError(`GOMEMLIMIT="${raw}": want bytes with an optional B, KiB, MiB, GiB or TiB suffix, or "off"`);
  const bytes = Number(m[1]) * UNITS[m[2] ?? "B"]!;
  if (!Number.isSafeInteger(bytes)) throw new MemLimitError(`GOMEMLIMIT="${raw}": too large`);
  if (bytes < MIN_LIMIT_BYTES) throw new MemLimitError(`GOMEMLIMIT="${raw}": below the minimum of ${MIN_LIMIT_BYTES} bytes`);
  return bytes;
}

export interface MemoryLimiterOptions {
  limitBytes: number;
  /** Resident set size now, in bytes. */
  rss: () => number;
  /** A full, synchronous garbage collection. */
  collect: () => void;
  log: Logger;
  intervalMs?: number;
}

export class MemoryLimiter implements Component {
  readonly name = "memlimit";
  /** Full collections run because of the limit (for tests and /debug). */
  collections = 0;
  private over = false;
  /** The resident set at the end of the last check (after its collection, if one ran). */
  private last: number | undefined;
  /** The largest growth over one interval seen lately, decaying by GROWTH_DECAY per check. */
  private growth = 0;

  constructor(private readonly o: MemoryLimiterOptions) {}

  async start(signal: AbortSignal): Promise<void> {
    this.o.log.info(`GOMEMLIMIT: soft memory limit ${this.o.limitBytes} bytes (full GC above ${Math.round(SOFT_FRACTION * 100)}% of it)`);
    void this.loop(signal);
  }

  /** One check; exposed for tests. */
  check(): void {
    const limit = this.o.limitBytes;
    const rss = this.o.rss();
    this.growth = Math.max(rss - (this.last ?? rss), this.growth * GROWTH_DECAY);
    if (rss + this.growth < limit * SOFT_FRACTION) {
      this.last = rss;
      this.over = false;
      return;
    }
    this.o.collect();
    this.collections++;
    const after = this.o.rss();
    this.last = after;
    if (after >= limit && !this.over) {
      this.over = true;
      this.o.log.warn(`GOMEMLIMIT: resident memory ${after} bytes is above the soft limit of ${limit} bytes after a full GC`);
    } else if (after < limit) {
      this.over = false;
    }
  }

  private async loop(signal: AbortSignal): Promise<void> {
    while (await systemClock.sleep(this.o.intervalMs ?? 1000, signal)) this.check();
  }
}
