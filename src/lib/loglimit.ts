// Repeated log lines, rate-limited per key: the first `burst` lines of a key in each window of
// `windowMs` are written; the rest are counted, and the next line written for that key carries
// `suppressed=<n>`. A client that opens and resets thousands of streams costs a few lines, not one
// per stream. Keys are few and fixed (one per call site), so the map stays small. With `timer`,
// a window that suppressed lines ends by writing the last of them, with `suppressed=<n>` for the
// others, so a flood that stops is still counted: nothing is lost silently.

import type { TimerHandle } from "./clock.ts";
import type { Fields, Logger } from "./log.ts";

export interface LogLimitOptions {
  burst: number;
  windowMs: number;
  now: () => number;
  /** Report a window's suppressed lines when it ends (otherwise: with the key's next line). */
  timer?: (ms: number, fn: () => void) => TimerHandle;
}

export const DEFAULT_LOG_LIMIT = { burst: 10, windowMs: 10_000 };

interface Window {
  start: number;
  written: number;
  suppressed: number;
  /** The end-of-window report, when one is due. */
  report?: TimerHandle;
  last?: { log: Logger; level: Level; msg: string; fields?: Fields };
}

type Level = "debug" | "info" | "warn" | "error";

export class LogLimiter {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly o: LogLimitOptions) {}

  /** Write `msg` at `level` unless `key` used up its burst in this window. */
  log(log: Logger, level: Level, key: string, msg: string, fields?: Fields): void {
    const now = this.o.now();
    let w = this.windows.get(key);
    if (!w || now - w.start >= this.o.windowMs) {
      const carried = w?.suppressed ?? 0;
      w?.report?.cancel(); // its count is carried into this window's first line
      w = { start: now, written: 0, suppressed: carried };
      this.windows.set(key, w);
    }
    if (w.written >= this.o.burst) {
      w.suppressed++;
      if (this.o.timer) {
        w.last = { log, level, msg, fields };
        w.report ??= this.o.timer(Math.max(0, w.start + this.o.windowMs - now), () => this.report(w));
      }
      return;
    }
    w.written++;
    if (w.suppressed > 0) {
      fields = { ...fields, suppressed: w.suppressed };
      w.suppressed = 0;
    }
    log[level](msg, fields);
  }

  /** Stop pending end-of-window reports (their counts are then written with the key's next line). */
  close(): void {
    for (const w of this.windows.values()) {
      w.report?.cancel();
      w.report = undefined;
    }
  }

  private report(w: Window): void {
    w.report = undefined;
    const last = w.last;
    if (w.suppressed === 0 || !last) return;
    // The last suppressed line itself is written now, carrying the count of the others.
    const others = w.suppressed - 1;
    last.log[last.level](last.msg, others > 0 ? { ...last.fields, suppressed: others } : last.fields);
    w.suppressed = 0;
    w.last = undefined;
  }
}
