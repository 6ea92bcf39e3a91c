import { describe, expect, test } from "bun:test";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { ManualClock } from "../../src/lib/clock.ts";

describe("log limiter", () => {
  test("burst lines per key per window, then counted; the next written line says how many were dropped", () => {
    let now = 0;
    const { sink, lines } = memoryLogger("all:debug");
    const log = sink.logger();
    const lim = new LogLimiter({ burst: 2, windowMs: 1000, now: () => now });
    for (let i = 0; i < 5; i++) lim.log(log, "info", "a", `a${i}`);
    lim.log(log, "warn", "b", "b0");
    expect(lines.map((l) => l.split("\t").slice(1).join(" "))).toEqual(["info a0", "info a1", "warn b0"]);
    now = 999; // same window: still suppressed
    lim.log(log, "info", "a", "a5");
    expect(lines.length).toBe(3);
    now = 1000; // new window: written, carrying the count of the 4 dropped (a2, a3, a4, a5)
    lim.log(log, "info", "a", "a6");
    lim.log(log, "info", "a", "a7");
    lim.log(log, "info", "a", "a8");
    expect(lines.slice(3).map((l) => l.split("\t").slice(1).join(" "))).toEqual(["info a6 suppressed=4", "info a7"]);
    now = 2000; // the count restarts: a8 was dropped, reported once
    lim.log(log, "info", "a", "a9");
    lim.log(log, "info", "a", "a10");
    expect(lines.slice(5).map((l) => l.split("\t").slice(1).join(" "))).toEqual(["info a9 suppressed=1", "info a10"]);
  });

  test("with a timer: a window that suppressed lines ends by writing the last of them with the count of the others, once", () => {
    const clock = new ManualClock(0);
    const { sink, lines } = memoryLogger("all:debug");
    const log = sink.logger();
    const lim = new LogLimiter({ burst: 2, windowMs: 1000, now: () => clock.now(), timer: (ms, fn) => clock.timer(ms, fn) });
    const text = () => lines.map((l) => l.split("\t").slice(1).join(" "));
    for (let i = 0; i < 6; i++) lim.log(log, "warn", "a", `a${i}`, { n: i });
    expect(text()).toEqual(["warn a0 n=0", "warn a1 n=1"]);
    expect(clock.pendingMs()).toEqual([1000]); // one report, however many lines were dropped
    clock.advance(999);
    expect(lines.length).toBe(2);
    clock.advance(1);
    expect(text().slice(2)).toEqual(["warn a5 n=5 suppressed=3"]);
    lim.log(log, "warn", "a", "a6"); // a new window: written, nothing left to carry
    expect(text().slice(3)).toEqual(["warn a6"]);
    clock.advance(5000);
    expect(lines.length).toBe(4);
  });

  test("with a timer: a line in the next window before the report ran carries the count instead; it is never written twice", () => {
    let now = 0;
    const timers: (() => void)[] = [];
    const { sink, lines } = memoryLogger("all:debug");
    const log = sink.logger();
    const lim = new LogLimiter({
      burst: 1,
      windowMs: 1000,
      now: () => now,
      timer: (_ms, fn) => {
        let live = true;
        timers.push(() => live && fn());
        return { cancel: () => (live = false) };
      },
    });
    lim.log(log, "info", "a", "a0");
    lim.log(log, "info", "a", "a1");
    lim.log(log, "info", "a", "a2");
    now = 1500; // the report's timer is late (a busy loop); the next line comes first
    lim.log(log, "info", "a", "a3");
    for (const t of timers) t();
    expect(lines.map((l) => l.split("\t").slice(1).join(" "))).toEqual(["info a0", "info a3 suppressed=2"]);
  });

  test("close() cancels pending reports", () => {
    const clock = new ManualClock(0);
    const { sink } = memoryLogger("all:debug");
    const lim = new LogLimiter({ burst: 0, windowMs: 1000, now: () => clock.now(), timer: (ms, fn) => clock.timer(ms, fn) });
    lim.log(sink.logger(), "info", "a", "a0");
    expect(clock.pending()).toBe(1);
    lim.close();
    expect(clock.pending()).toBe(0);
  });
});
