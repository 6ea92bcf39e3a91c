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

  // Measured, not assumed: the same garbage-heavy workload in a real Bun process, once without a
  // limit and once with GOMEMLIMIT-style limiting; the limited run's peak stays under the limit
  // and below the unlimited run's peak.
  test("measured: peak resident memory stays under the limit that an unlimited run exceeds", async () => {
    const run = async (limit: number) => {
      const p = Bun.spawn([process.execPath, join(import.meta.dir, "../support/memlimit-workload.ts"), String(limit)], { stdout: "pipe", stderr: "inherit" });
      const out = await new Response(p.stdout).text();
      expect(await p.exited).toBe(0);
      return JSON.parse(out) as { peak: number; collections: number };
    };
    const limit = 200 * 1024 * 1024;
    const free = await run(0);
    const capped = await run(limit);
    expect(free.peak).toBeGreaterThan(limit);
    expect(capped.collections).toBeGreaterThan(0);
    expect(capped.peak).toBeLessThan(limit);
  }, 120_000);
});
