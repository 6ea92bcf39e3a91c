// Repeated log lines, rate-limited per key: the first `burst` lines of a key in each window of
// `windowMs` are written; the rest are counted, and the next line written for that key carries
// `suppressed=<n>`. A client that opens and resets thousands of streams costs a few lines, not one
// per stream. Keys are few and fixed (one per call site), so the map stays small.

import type { Fields, Logger } from "./log.ts";

export interface LogLimitOptions {
  burst: number;
  windowMs: number;
  now: () => number;
}

export const DEFAULT_LOG_LIMIT = { burst: 10, windowMs: 10_000 };

interface Window {
  start: number;
  written: number;
  suppressed: number;
}

export class LogLimiter {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly o: LogLimitOptions) {}

  /** Write `msg` at `level` unless `key` used up its burst in this window. */
  log(log: Logger, level: "debug" | "info" | "warn" | "error", key: string, msg: string, fields?: Fields): void {
    const now = this.o.now();
    let w = this.windows.get(key);
    if (!w || now - w.start >= this.o.windowMs) {
      const carried = w?.suppressed ?? 0;
      w = { start: now, written: 0, suppressed: carried };
      this.windows.set(key, w);
    }
    if (w.written >= this.o.burst) {
      w.suppressed++;
      return;
    }
    w.written++;
    if (w.suppressed > 0) {
      fields = { ...fields, suppressed: w.suppressed };
      w.suppressed = 0;
    }
    log[level](msg, fields);
  }
}
