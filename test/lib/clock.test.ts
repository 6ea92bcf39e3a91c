import { describe, expect, test } from "bun:test";
import { ManualClock, systemClock } from "../../src/lib/clock.ts";

describe("ManualClock", () => {
  test("time moves only on advance, from the given start", () => {
    const c = new ManualClock(1_000);
    expect(c.now()).toBe(1_000);
    c.advance(250);
    expect(c.now()).toBe(1_250);
  });

  test("timers due at the same instant fire in the order they were set", () => {
    const c = new ManualClock(0);
    const fired: string[] = [];
    c.timer(100, () => fired.push("a"));
    c.timer(100, () => fired.push("b"));
    c.timer(50, () => fired.push("early"));
    c.timer(100, () => fired.push("c"));
    c.advance(100);
    expect(fired).toEqual(["early", "a", "b", "c"]);
  });

  test("advancing past several timers fires each at its own time, and a timer set by one fires too", () => {
    const c = new ManualClock(0);
    const seen: [string, number][] = [];
    c.timer(30, () => seen.push(["t30", c.now()]));
    c.timer(10, () => {
      seen.push(["t10", c.now()]);
      c.timer(5, () => seen.push(["t10+5", c.now()]));
    });
    c.timer(200, () => seen.push(["t200", c.now()]));
    c.advance(100);
    expect(seen).toEqual([
      ["t10", 10],
      ["t10+5", 15],
      ["t30", 30],
    ]);
    expect(c.now()).toBe(100);
    expect(c.pending()).toBe(1);
    expect(c.nextAt()).toBe(200);
  });

  test("a timer is not fired one millisecond early, and fires exactly at its due time", () => {
    const c = new ManualClock(0);
    let fired = 0;
    c.timer(100, () => fired++);
    c.advance(99);
    expect(fired).toBe(0);
    c.advance(1);
    expect(fired).toBe(1);
    c.advance(1_000);
    expect(fired).toBe(1); // once only
  });

  test("a cancelled timer never fires; the others still do", () => {
    const c = new ManualClock(0);
    const fired: string[] = [];
    const a = c.timer(10, () => fired.push("a"));
    c.timer(10, () => fired.push("b"));
    a.cancel();
    expect(c.pendingMs()).toEqual([10]);
    c.advance(10);
    expect(fired).toEqual(["b"]);
  });

  test("sleep resolves true when time passes, false when its signal aborts (and its timer is gone)", async () => {
    const c = new ManualClock(0);
    const done = c.sleep(40);
    c.advance(40);
    expect(await done).toBe(true);
    const ac = new AbortController();
    const cut = c.sleep(40, ac.signal);
    expect(c.pendingMs()).toEqual([40]);
    ac.abort();
    expect(await cut).toBe(false);
    expect(c.pending()).toBe(0);
    const pre = new AbortController();
    pre.abort();
    expect(await c.sleep(40, pre.signal)).toBe(false);
    expect(c.pending()).toBe(0);
  });

  test("whenPending resolves once a timer of that duration is set", async () => {
    const c = new ManualClock(0);
    const order: string[] = [];
    const waited = c.whenPending(70).then(() => order.push("70 pending"));
    c.timer(20, () => {});
    await Promise.resolve();
    order.push("20 set");
    c.timer(70, () => {});
    await waited;
    expect(order).toEqual(["20 set", "70 pending"]);
    await c.whenPending(); // any timer: already true
  });
});

describe("systemClock", () => {
  test("sleep with an aborted signal resolves false at once", async () => {
    const ac = new AbortController();
    ac.abort();
    expect(await systemClock.sleep(60_000, ac.signal)).toBe(false);
  });

  test("a cancelled real timer does not fire before a later one", async () => {
    const fired: string[] = [];
    systemClock.timer(1, () => fired.push("cancelled")).cancel();
    await new Promise<void>((r) => systemClock.timer(5, () => r()));
    expect(fired).toEqual([]);
  });
});

describe("systemClock beyond setTimeout's range", () => {
  test("a sleep longer than 2^31-1 ms does not end at once", async () => {
    const ac = new AbortController();
    let ended: boolean | undefined;
    const long = systemClock.sleep(1000 * 3_600_000, ac.signal).then((v) => (ended = v));
    // Sentinel: a 1 ms timer set after it. setTimeout turns an overflowing delay into 1 ms, and
    // timers due at the same time fire in the order they were set, so it would have fired first.
    await systemClock.sleep(1);
    expect(ended).toBeUndefined();
    ac.abort();
    await long;
    expect(ended).toBe(false);
  });
});
