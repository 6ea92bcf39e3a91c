// sleep() with delays past what a timer holds: setTimeout turns anything over 2^31-1 ms into 1 ms,
// so terminationDrainDuration: 1000h would end the drain at once instead of waiting.
import { expect, test } from "bun:test";
import { MAX_TIMER_MS, sleep } from "../../src/lib/component.ts";

test("a sleep longer than a timer holds waits (capped at 2^31-1 ms) instead of ending at once", async () => {
  expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
  const stop = new AbortController();
  let longDone: boolean | undefined;
  void sleep(3_600_000_000, stop.signal).then((v) => (longDone = v));
  // The sentinel: a 100 ms sleep started after it has ended; the long one must still be pending.
  expect(await sleep(100)).toBe(true);
  await new Promise((r) => setImmediate(r));
  expect(longDone).toBeUndefined();
  stop.abort();
  await new Promise((r) => setImmediate(r));
  expect(longDone).toBe(false);
});
