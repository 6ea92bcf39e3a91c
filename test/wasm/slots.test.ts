// DownloadSlots: at most `max` downloads run; the rest wait in arrival order; a waiter whose
// deadline passes leaves the queue with an error naming the slots; a slot frees however its
// download ends.

import { expect, test } from "bun:test";
import { DownloadSlots } from "../../src/wasm/slots.ts";

function gate() {
  let open!: () => void;
  let fail!: (e: Error) => void;
  const p = new Promise<void>((r, j) => ((open = r), (fail = j)));
  return { p, open, fail };
}

test("two slots: the third and fourth wait, then start in arrival order as slots free", async () => {
  const slots = new DownloadSlots(2);
  const started: number[] = [];
  const gates = [gate(), gate(), gate(), gate()];
  const runs = gates.map((g, i) => slots.run(new AbortController().signal, async () => (started.push(i), await g.p, i)));
  await Bun.sleep(0);
  expect(started).toEqual([0, 1]);
  expect([slots.active, slots.queued]).toEqual([2, 2]);
  gates[1]!.fail(new Error("download failed"));
  await expect(runs[1]!).rejects.toThrow("download failed");
  await Bun.sleep(0);
  expect(started).toEqual([0, 1, 2]);
  gates[0]!.open();
  await Bun.sleep(0);
  expect(started).toEqual([0, 1, 2, 3]);
  gates[2]!.open();
  gates[3]!.open();
  expect(await Promise.all([runs[0], runs[2], runs[3]])).toEqual([0, 2, 3]);
  expect([slots.active, slots.queued]).toEqual([0, 0]);
});

test("a waiter whose deadline passes leaves the queue with an error; the next waiter gets the slot", async () => {
  const slots = new DownloadSlots(1);
  const g = gate();
  const first = slots.run(new AbortController().signal, () => g.p);
  const ac = new AbortController();
  let ran = false;
  const second = slots.run(ac.signal, async () => void (ran = true));
  const third = slots.run(new AbortController().signal, async () => "third");
  ac.abort();
  await expect(second).rejects.toThrow("deadline passed while waiting for one of the 1 Wasm download slots (all busy with other modules)");
  expect(slots.queued).toBe(1);
  g.open();
  await first;
  expect(await third).toBe("third");
  expect(ran).toBe(false);
});

test("an already-aborted signal never takes a free slot's place in the queue", async () => {
  const slots = new DownloadSlots(1);
  const g = gate();
  const first = slots.run(new AbortController().signal, () => g.p);
  await expect(slots.run(AbortSignal.abort(), async () => 1)).rejects.toThrow("deadline passed");
  expect(slots.queued).toBe(0);
  g.open();
  await first;
  expect(slots.active).toBe(0);
});
