import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { MemoryLimiter, parseGoMemLimit } from "../../src/lib/memlimit.ts";

describe("GOMEMLIMIT is honoured as the agent's own memory cap", () => {
  test.each([
    ["1073741824", 1073741824],
    ["536870912B", 536870912],
    ["512MiB", 536870912],
    ["2GiB", 2147483648],
    ["65536KiB", 67108864],
    ["1TiB", 1099511627776],
  ])("parses %p as Go does", (raw, bytes) => {
    expect(parseGoMemLimit(raw)).toBe(bytes);
  });

  test.each(["", "off"])("%p means no limit", (raw) => {
    expect(parseGoMemLimit(raw)).toBeUndefined();
  });

  test.each([
    ["1GB", "want bytes with an optional B, KiB, MiB, GiB or TiB suffix"],
    ["-5", "want bytes"],
    ["1.5GiB", "want bytes"],
    ["1KiB", "below the minimum of 16777216 bytes"],
  ])("rejects %p naming GOMEMLIMIT", (raw, why) => {
    expect(() => parseGoMemLimit(raw)).toThrow(`GOMEMLIMIT="${raw}": ${why}`);
  });

  test("a full GC runs above 90% of the limit; staying above the limit is logged once per crossing", () => {
    const { log, lines } = memoryLogger();
    let rss = 0;
    let gcs = 0;
    const afterGc: number[] = [];
    const m = new MemoryLimiter({ limitBytes: 1000, rss: () => rss, collect: () => (gcs++, (rss = afterGc.shift() ?? rss)), log });
    rss = 899;
    m.check();
    expect(gcs).toBe(0);
    rss = 900; // 90%: collect, and the collection brings it down
    afterGc.push(500);
    m.check();
    expect([gcs, lines.filter((l) => l.includes("above the soft limit")).length]).toEqual([1, 0]);
    rss = 1200; // above the limit even after a collection: one warning...
    m.check();
    m.check();
    expect(gcs).toBe(3);
    expect(lines.filter((l) => l.includes("above the soft limit")).length).toBe(1);
    rss = 100; // ...back under: the next crossing warns again
    m.check();
    rss = 1500;
    m.check();
    expect(lines.filter((l) => l.includes("GOMEMLIMIT: resident memory 1500 bytes is above the soft limit of 1000 bytes after a full GC")).length).toBe(1);
    expect(m.collections).toBe(4);
  });

  test("a collection runs one interval early, led by the growth seen over the last interval", () => {
    const { log } = memoryLogger();
    let rss = 0;
    let gcs = 0;
    const m = new MemoryLimiter({ limitBytes: 1000, rss: () => rss, collect: () => gcs++, log });
    for (const r of [100, 300, 500]) {
      rss = r; // +200 per interval: 500 + 200 = 700, under 900
      m.check();
    }
    expect(gcs).toBe(0);
    rss = 700; // 700 + 200 reaches 900 before the next check could see it: collect now
    m.check();
    expect(gcs).toBe(1);
  });

  test("a burst's growth is remembered at half strength per interval, not for ever", () => {
    const { log } = memoryLogger();
    let rss = 0;
    let gcs = 0;
    const afterGc: number[] = [];
    const m = new MemoryLimiter({ limitBytes: 1000, rss: () => rss, collect: () => (gcs++, (rss = afterGc.shift() ?? rss)), log });
    rss = 100;
    m.check();
    rss = 600; // a burst of 500: 600 + 500 passes 900
    afterGc.push(100);
    m.check();
    expect(gcs).toBe(1);
    // growth remembered: 250 (150 + 250 = 400), then 350 (500 + 350 = 850), then 175 (560 + 175 = 735)
    for (const r of [150, 500, 560]) {
      rss = r;
      m.check();
    }
    expect(gcs).toBe(1);
    rss = 720; // +160, remembered 160: 880, still under
    m.check();
    expect(gcs).toBe(1);
    rss = 745; // +25, remembered 80: 825; a GC here would mean the lead grew without growth
    m.check();
    expect(gcs).toBe(1);
  });

  // Measured, not assumed: the same garbage-heavy workload in a real Bun process, once without a
  // limit and once with the limiter as the agent runs it. The promise (docs/compat.md) is Go's
  // soft limit kept by sampling: garbage is collected before it carries the resident set past
  // the limit, for a process that returns to its event loop as the agent does (the workload
  // yields every few hundred KiB, as the agent does between messages). The peak is the kernel's
  // own high-water mark (VmHWM), not a sample: a sampled peak missed the overshoot that issue 35
  // saw (210.8 MiB against 200 MiB while samples said 193).
  test("measured: the kernel's high-water mark stays under the limit that an unlimited run exceeds", async () => {
    const run = async (limit: number) => {
      const p = Bun.spawn([process.execPath, join(import.meta.dir, "../support/memlimit-workload.ts"), String(limit)], { stdout: "pipe", stderr: "inherit" });
      const out = await new Response(p.stdout).text();
      expect(await p.exited).toBe(0);
      return JSON.parse(out) as { hwm: number; collections: number };
    };
    const limit = 200 * 1024 * 1024;
    const free = await run(0);
    const capped = await run(limit);
    expect(free.hwm).toBeGreaterThan(limit);
    expect(capped.collections).toBeGreaterThan(0);
    expect(capped.hwm).toBeLessThan(limit);
  }, 120_000);
});
