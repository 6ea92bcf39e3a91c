// The hot-restart file watcher: a change is reported once its new content has been seen on two
// consecutive polls, polls run on the supervisor's clock, and a content flip back is no change.

import { expect, test } from "bun:test";
import { FileChangeWatcher } from "../../src/envoy/filewatch.ts";
import { ManualClock } from "../../src/lib/clock.ts";

function rig() {
  const clock = new ManualClock(0);
  const files = new Map<string, string | undefined>([
    ["/etc/istio/custom.yaml", "a"],
    ["/etc/certs/cert.pem", "x"],
  ]);
  const reported: string[][] = [];
  let reads = 0;
  const watcher = new FileChangeWatcher({
    files: [...files.keys()],
    intervalMs: 1000,
    clock,
    onChange: (c) => reported.push(c),
    read: async (p) => {
      reads++;
      const v = files.get(p);
      return v === undefined ? undefined : new TextEncoder().encode(v);
    },
  });
  return { clock, files, reported, watcher, reads: () => reads };
}

test("a change counts after two consecutive polls see it; a flip back before that is nothing", async () => {
  const { files, reported, watcher } = rig();
  await watcher.start(new AbortController().signal);
  files.set("/etc/istio/custom.yaml", "b");
  expect(await watcher.poll()).toEqual([]); // seen once: maybe mid-write
  expect(await watcher.poll()).toEqual(["/etc/istio/custom.yaml"]);
  expect(reported).toEqual([["/etc/istio/custom.yaml"]]);
  expect(await watcher.poll()).toEqual([]); // reported once only
  files.set("/etc/certs/cert.pem", "y");
  expect(await watcher.poll()).toEqual([]);
  files.set("/etc/certs/cert.pem", "x"); // back to the settled content
  expect(await watcher.poll()).toEqual([]);
  expect(await watcher.poll()).toEqual([]);
  files.set("/etc/certs/cert.pem", undefined); // removed: a change too
  await watcher.poll();
  expect(await watcher.poll()).toEqual(["/etc/certs/cert.pem"]);
  expect(reported).toEqual([["/etc/istio/custom.yaml"], ["/etc/certs/cert.pem"]]);
});

test("polls run on the injected clock every intervalMs and stop when the signal aborts", async () => {
  const { clock, files, reported, watcher, reads } = rig();
  const stop = new AbortController();
  await watcher.start(stop.signal);
  expect(reads()).toBe(2); // the baseline
  await clock.whenPending(1000);
  files.set("/etc/istio/custom.yaml", "b");
  clock.advance(999);
  expect(reads()).toBe(2);
  clock.advance(1);
  await clock.whenPending(1000); // one poll done, the next sleep set
  expect(reads()).toBe(4);
  expect(reported).toEqual([]);
  clock.advance(1000);
  await clock.whenPending(1000);
  expect(reported).toEqual([["/etc/istio/custom.yaml"]]);
  stop.abort();
  expect(clock.pending()).toBe(0);
  clock.advance(60_000);
  expect(reads()).toBe(6);
});
