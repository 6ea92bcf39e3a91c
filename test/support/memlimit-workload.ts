#!/usr/bin/env bun
// A garbage-heavy workload for the GOMEMLIMIT measurement (test/lib/memlimit.test.ts): about
// 55 MiB of objects stay live (85 MiB resident after a full collection) while several hundred MiB
// of short-lived objects churn through. Argument: the limit in bytes (0 = no limiter). Prints
// {"hwm": <the kernel's VmHWM in bytes>, "collections": <n>}.
// It returns to the event loop every 6 batches (about 3 MiB allocated), as the agent does
// between messages; the limiter, like every timer, runs only then.

import { readFileSync } from "node:fs";
import { silentLogger } from "../../src/lib/log.ts";
import { MemoryLimiter } from "../../src/lib/memlimit.ts";

const limit = Number(process.argv[2] ?? 0);
const stop = new AbortController();
const limiter =
  limit > 0
    ? new MemoryLimiter({ limitBytes: limit, rss: () => process.memoryUsage.rss(), collect: () => Bun.gc(true), log: silentLogger(), intervalMs: 50 })
    : undefined;
await limiter?.start(stop.signal);
const live: unknown[] = [];
for (let round = 0; round < 40; round++) {
  for (let batch = 0; batch < 60; batch++) {
    const objs: unknown[] = [];
    for (let k = 0; k < 2000; k++) objs.push({ k, s: "x".repeat(50) + k });
    live.push(objs);
    if (live.length > 100) live.shift();
    if (batch % 6 === 5) await Bun.sleep(1);
  }
}
stop.abort();
// The kernel's high-water mark of the resident set: every page ever resident at once, not a sample.
const hwmKiB = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
if (hwmKiB === undefined) throw new Error("no VmHWM line in /proc/self/status");
process.stdout.write(JSON.stringify({ hwm: Number(hwmKiB) * 1024, collections: limiter?.collections ?? 0 }));
process.exit(0);
