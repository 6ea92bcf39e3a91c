import { describe, expect, test } from "bun:test";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import { memoryLogger } from "../../src/lib/log.ts";

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
});
