// Nothing per message outlives its message: thousands of pushes through the real relay (istiod ->
// upstream session -> relay -> downstream session -> Envoy) leave the heap's live object counts
// where they were after a warm-up. A relay that kept one object per push (a view, a closure, a
// queue entry, a metric label) would show thousands more of that type. Counts, not RSS: RSS moves
// with the collector and the allocator; live objects after a full collection do not.

import { afterEach, expect, test } from "bun:test";
import { heapStats } from "bun:jsc";
import { CDS, harnessScope } from "./harness.ts";

const scope = harnessScope(afterEach);

/** Live objects per type after a full, synchronous collection. */
function liveCounts(): Record<string, number> {
  Bun.gc(true);
  Bun.gc(true);
  return { ...heapStats().objectTypeCounts };
}

const PUSHES = 4_000;
const BATCH = 500;

test(`${PUSHES} pushes through the relay leave no per-push object behind`, async () => {
  scope.h = await import("./harness.ts").then((m) => m.startHarness());
  const envoy = scope.client();
  envoy.send({ typeUrl: CDS });
  const up = await scope.h.istiod.nextStream();
  const msg = up.encode({ typeUrl: CDS, versionInfo: "1", nonce: "n", resources: [{ typeUrl: CDS, value: Buffer.alloc(3000, 7) }] });
  const push = async (n: number) => {
    for (let done = 0; done < n; done += BATCH) {
      const want = envoy.received.length + BATCH;
      for (let i = 0; i < BATCH; i++) up.sendRaw(msg);
      await envoy.waitFor(want, 20_000);
      expect(envoy.received.at(-1)!.equals(msg)).toBe(true);
      envoy.received.length = 0; // the client keeps nothing either
    }
  };
  await push(1_000); // warm-up: pools, caches, JIT
  const before = liveCounts();
  await push(PUSHES);
  const after = liveCounts();
  const grown = Object.entries(after)
    .map(([type, n]) => [type, n - (before[type] ?? 0)] as const)
    .filter(([, d]) => d >= PUSHES / 4);
  expect(grown).toEqual([]);
}, 60_000);
