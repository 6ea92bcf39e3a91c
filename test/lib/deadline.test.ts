// The istiod dial's deadline on a clock the test drives timer by timer: it expires one loop turn
// after its time when the timer was on time, grants again the time a late timer lost (a stalled
// process), at most the original budget in all, and never fires after cancel.
import { describe, expect, test } from "bun:test";
import { stallTolerantDeadline } from "../../src/lib/deadline.ts";

/** Wall time set by the test; timers run only when `runNext` is called, whenever that is. */
class SteppedClock {
  t = 1_000_000;
  private timers: { ms: number; fn: () => void; id: number }[] = [];
  private ids = 0;
  now(): number {
    return this.t;
  }
  timer(ms: number, fn: () => void) {
    const id = ++this.ids;
    this.timers.push({ ms, fn, id });
    return { cancel: () => (this.timers = this.timers.filter((x) => x.id !== id)) };
  }
  /** Delays of the pending timers. */
  pending(): number[] {
    return this.timers.map((x) => x.ms);
  }
  /** Let `wallMs` pass, then run the oldest pending timer (late when wallMs exceeds its delay). */
  runNext(wallMs: number): void {
    this.t += wallMs;
    const x = this.timers.shift();
    if (!x) throw new Error("no timer pending");
    x.fn();
  }
}

describe("stallTolerantDeadline", () => {
  test("on time: expires one zero-delay turn after its 5000 ms, not at them", () => {
    const c = new SteppedClock();
    let fired = 0;
    stallTolerantDeadline(c, 5000, () => fired++);
    expect(c.pending()).toEqual([5000]);
    c.runNext(5000);
    expect({ fired, pending: c.pending() }).toEqual({ fired: 0, pending: [0] });
    c.runNext(0);
    expect({ fired, pending: c.pending() }).toEqual({ fired: 1, pending: [] });
  });

  test("cancelled before its time, or between its time and the extra turn: never fires", () => {
    const c = new SteppedClock();
    let fired = 0;
    stallTolerantDeadline(c, 5000, () => fired++).cancel();
    expect(c.pending()).toEqual([]);
    const d = stallTolerantDeadline(c, 5000, () => fired++);
    c.runNext(5000);
    d.cancel();
    expect(c.pending()).toEqual([]);
    expect(fired).toBe(0);
  });

  test("a timer that ran 2000 ms late (the process was held) grants those 2000 ms again", () => {
    const c = new SteppedClock();
    let fired = 0;
    stallTolerantDeadline(c, 5000, () => fired++);
    c.runNext(7000);
    expect({ fired, pending: c.pending() }).toEqual({ fired: 0, pending: [2000] });
    c.runNext(2000);
    c.runNext(0);
    expect(fired).toBe(1);
  });

  test("the grants are at most the original budget in all, however often the process is held", () => {
    const c = new SteppedClock();
    let fired = 0;
    stallTolerantDeadline(c, 1000, () => fired++);
    c.runNext(1800);
    expect(c.pending()).toEqual([800]);
    c.runNext(1700);
    expect(c.pending()).toEqual([200]); // 1000 - 800 left to grant
    c.runNext(5200);
    expect(c.pending()).toEqual([0]); // budget spent: only the extra turn
    c.runNext(0);
    expect(fired).toBe(1);
  });

  test("lateness under 50 ms is jitter, not a stall: no grant", () => {
    const c = new SteppedClock();
    let fired = 0;
    stallTolerantDeadline(c, 5000, () => fired++);
    c.runNext(5049);
    expect(c.pending()).toEqual([0]);
    c.runNext(0);
    expect(fired).toBe(1);
  });
});
