#!/usr/bin/env bun
// A garbage-heavy workload for the GOMEMLIMIT measurement (test/lib/memlimit.test.ts): about
// 100 MiB stays live while several hundred MiB of short-lived objects churn through. Argument: the
// limit in bytes (0 = no limiter). Prints {"peak": <max RSS bytes>, "collections": <n>}.

import { silentLogger } from "../../src/lib/log.ts";
import { MemoryLimiter } from "../../src/lib/memlimit.ts";

const limit = Number(process.argv[2] ?? 0);
const stop = new AbortController();
const limiter =
  limit > 0
    ? new MemoryLimiter({ limitBytes: limit, rss: () => process.memoryUsage.rss(), collect: () => Bun.gc(true), log: silentLogger(), intervalMs: 50 })
    : undefined;
await limiter?.start(stop.signal);
let peak = 0;
const live: unknown[] = [];
for (let round = 0; round < 40; round++) {
  for (let batch = 0; batch < 60; batch++) {
    const objs: unknown[] = [];
    for (let k = 0; k < 2000; k++) objs.push({ k, s: "x".repeat(50) + k });
    live.push(objs);
    if (live.length > 100) live.shift();
  }
  await Bun.sleep(5);
  peak = Math.max(peak, process.memoryUsage.rss());
}
stop.abort();
process.stdout.write(JSON.stringify({ peak, collections: limiter?.collections ?? 0 }));
process.exit(0);
