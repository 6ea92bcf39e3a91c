import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { MAX_WAIT_MS, QUIET_MS, STILL_MS, StartupMemory } from "../../src/lib/startupmemory.ts";

function setup() {
  const clock = new ManualClock();
  const readiness = new Readiness(() => clock.now());
  const { log, lines } = memoryLogger();
  const calls: string[] = [];
  let rss = 100 * 1048576;
  const m = new StartupMemory({
    readiness,
    clock,
    shrink: () => calls.push("shrink"),
    collect: () => {
      calls.push("collect");
      rss = 98 * 1048576;
    },
    rss: () => rss,
    now: () => clock.now(),
    log,
  });
  return { clock, readiness, lines, calls, m };
}

describe("start-up code is released once the agent has settled", () => {
  test("5 s after readiness clears: the shrink, then on the next turn the collection, once", () => {
    const { clock, readiness, lines, calls, m } = setup();
    const cert = readiness.warn("certificate warmed");
    const envoy = readiness.block("envoy ready");
    m.start(new AbortController().signal);
    clock.advance(STILL_MS - 1000);
    expect(calls).toEqual([]); // still starting
    cert.clear();
    clock.advance(QUIET_MS);
    expect(calls).toEqual([]); // a blocker is still pending
    envoy.clear();
    clock.advance(QUIET_MS - 1);
    expect(calls).toEqual([]);
    clock.advance(1);
    expect(calls).toEqual(["shrink", "collect"]);
    expect(m.released).toBe(true);
    expect(lines.some((l) => l.includes("start-up code released") && l.includes("resident 100.0 -> 98.0 MiB"))).toBe(true);
    // Later changes (an upstream reconnecting) do not run it again.
    readiness.warn("xds connected").clear();
    clock.advance(10 * MAX_WAIT_MS);
    expect(calls).toEqual(["shrink", "collect"]);
    expect(clock.pending()).toBe(0);
  });

  test("a condition raised during the quiet time restarts it", () => {
    const { clock, readiness, calls, m } = setup();
    m.start(new AbortController().signal);
    clock.advance(QUIET_MS - 1000);
    const x = readiness.warn("xds connected");
    clock.advance(QUIET_MS);
    expect(calls).toEqual([]);
    x.clear();
    clock.advance(QUIET_MS - 1);
    expect(calls).toEqual([]);
    clock.advance(1);
    expect(calls).toEqual(["shrink", "collect"]);
  });

  test("readiness that stays unclear but still (a proxyless pod with no client yet, a CA that never answers): released 20 s after its last change", () => {
    const { clock, readiness, calls, m } = setup();
    readiness.warn("xds connected");
    const cert = readiness.warn("certificate warmed");
    m.start(new AbortController().signal);
    clock.advance(3000);
    cert.clear(); // the last change: "xds connected" stays pending
    clock.advance(STILL_MS - 1);
    expect(calls).toEqual([]);
    clock.advance(1);
    expect(calls).toEqual(["shrink", "collect"]);
    expect(clock.pending()).toBe(0);
  });

  test("readiness that keeps changing: released 60 s after start all the same", () => {
    const { clock, readiness, calls, m } = setup();
    const x = readiness.warn("certificate warmed");
    m.start(new AbortController().signal);
    for (let t = 0; t < MAX_WAIT_MS - 1000; t += 1000) {
      x.fail(`attempt ${t}`);
      clock.advance(1000);
    }
    expect(calls).toEqual([]);
    clock.advance(1000);
    expect(calls).toEqual(["shrink", "collect"]);
    expect(clock.pending()).toBe(0);
  });

  test("an agent stopping before it settles releases nothing and leaves no timer", () => {
    const { clock, readiness, calls, m } = setup();
    const stop = new AbortController();
    m.start(stop.signal);
    readiness.block("terminating");
    stop.abort();
    clock.advance(10 * MAX_WAIT_MS);
    expect(calls).toEqual([]);
    expect(clock.pending()).toBe(0);
  });
});
