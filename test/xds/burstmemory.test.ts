// The burst-memory meter's decisions (src/xds/burstmemory.ts): when a burst counts as over, when
// it is worth a collection, and that nothing runs at rest. Time is a ManualClock; the resident set
// and the collection are fakes, so every expectation is a literal.

import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { BurstMemory } from "../../src/xds/burstmemory.ts";

const MiB = 1024 * 1024;

function rig(opts: { rss?: number[]; collectFreesMiB?: number } = {}) {
  const clock = new ManualClock(0);
  let rss = 60 * MiB;
  const log: string[] = [];
  const seen: { bytes: number; rss: number[] }[] = [];
  const m = new BurstMemory({
    rss: () => rss,
    collect: () => {
      log.push(`collect@${clock.now()}`);
      rss -= (opts.collectFreesMiB ?? 10) * MiB;
    },
    clock,
    now: () => clock.now(),
    onCollect: (bytes, r) => seen.push({ bytes, rss: r.map((x) => x / MiB) }),
  });
  return {
    clock,
    m,
    log,
    seen,
    setRss: (mib: number) => (rss = mib * MiB),
  };
}

describe("BurstMemory", () => {
  test("collects twice once the burst has been quiet for 1 s: at the end of the wait and 300 ms later", () => {
    const r = rig({ collectFreesMiB: 5 });
    r.m.count(1 * MiB); // floor: 60 MiB
    r.setRss(90);
    for (let i = 0; i < 9; i++) {
      r.clock.advance(100);
      r.m.count(1 * MiB);
    }
    // 900 ms after the first chunk; the last one came at 900.
    r.clock.advance(999);
    expect(r.log).toEqual([]);
    r.clock.advance(1);
    expect(r.log).toEqual(["collect@1900"]);
    r.clock.advance(299);
    expect(r.log).toEqual(["collect@1900"]);
    r.clock.advance(1);
    expect(r.log).toEqual(["collect@1900", "collect@2200"]);
    expect(r.seen).toEqual([{ bytes: 10 * MiB, rss: [90, 85, 80] }]);
    expect(r.m.collections).toBe(2);
    expect(r.clock.pending()).toBe(0);
  });

  test("a burst that keeps arriving is never collected in its middle", () => {
    const r = rig();
    r.m.count(1);
    r.setRss(200);
    for (let i = 0; i < 100; i++) {
      r.m.count(1 * MiB);
      r.clock.advance(900);
    }
    // The last chunk came at 89,100 ms.
    expect(r.log).toEqual([]);
    r.clock.advance(99);
    expect(r.log).toEqual([]);
    r.clock.advance(1);
    expect(r.log).toEqual(["collect@90100"]);
  });

  test("fewer than 4 MiB received: no timer, no collection", () => {
    const r = rig();
    r.m.count(1);
    r.setRss(100);
    r.m.count(4 * MiB - 2);
    expect(r.clock.pending()).toBe(0);
    r.clock.advance(10_000);
    expect(r.log).toEqual([]);
  });

  test("bytes add up across pushes until a quiet second follows 4 MiB", () => {
    const r = rig();
    r.m.count(1 * MiB);
    r.setRss(80);
    r.m.count(2 * MiB);
    r.clock.advance(5000);
    expect(r.clock.pending()).toBe(0);
    r.m.count(1 * MiB);
    expect(r.clock.pending()).toBe(1);
    r.clock.advance(1000);
    expect(r.log).toEqual(["collect@6000"]);
  });

  test("no collection when the runtime already brought the resident set back within 4 MiB of the floor", () => {
    const r = rig();
    r.m.count(1 * MiB); // floor 60
    r.setRss(100);
    r.m.count(8 * MiB);
    r.setRss(63.9); // the runtime's own collections got there first
    r.clock.advance(1000);
    expect(r.log).toEqual([]);
    expect(r.clock.pending()).toBe(0);
    // The next burst is measured against the same floor.
    r.m.count(8 * MiB);
    r.setRss(64);
    r.clock.advance(1000);
    expect(r.log).toEqual(["collect@2000"]);
  });

  test("the floor is the resident set after the last collections", () => {
    const r = rig({ collectFreesMiB: 5 });
    r.m.count(1 * MiB); // floor 60
    r.setRss(100);
    r.m.count(8 * MiB);
    r.clock.advance(1300); // collections at 1000 and 1300: 100 -> 95 -> 90, floor 90
    expect(r.log.length).toBe(2);
    r.setRss(93.9);
    r.m.count(8 * MiB);
    r.clock.advance(1300);
    expect(r.log.length).toBe(2);
    r.setRss(94);
    r.m.count(8 * MiB);
    r.clock.advance(1300);
    expect(r.log.length).toBe(4);
  });

  test("bytes that arrive between the two collections start the next wait after the second", () => {
    const r = rig();
    r.m.count(1);
    r.setRss(100);
    r.m.count(8 * MiB);
    r.clock.advance(1000);
    expect(r.log).toEqual(["collect@1000"]);
    r.clock.advance(100);
    r.m.count(8 * MiB); // at 1100
    r.setRss(100);
    r.clock.advance(200); // second collection at 1300, then the wait for the new bytes
    expect(r.log).toEqual(["collect@1000", "collect@1300"]);
    expect(r.clock.pendingMs()).toEqual([800]);
    r.setRss(100); // the new burst grew it again above the floor of 90
    r.clock.advance(800); // 1 s after 1100
    expect(r.log).toEqual(["collect@1000", "collect@1300", "collect@2100"]);
  });

  test("stop() cancels a pending wait", () => {
    const r = rig();
    r.m.count(1);
    r.setRss(100);
    r.m.count(8 * MiB);
    r.m.stop();
    r.clock.advance(10_000);
    expect(r.log).toEqual([]);
  });
});
