// GcMeter: one collection per `everyBytes` streamed, counted across calls of any size.

import { expect, test } from "bun:test";
import { GcMeter } from "../../src/wasm/gcmeter.ts";

test("a collection after each 8 bytes counted, never before; a large chunk counts once", () => {
  let collections = 0;
  const m = new GcMeter(8, () => collections++);
  for (const n of [3, 4]) m.count(n);
  expect(collections).toBe(0); // 7 bytes
  m.count(1);
  expect(collections).toBe(1); // 8
  m.count(7);
  expect(collections).toBe(1); // 7 since the last
  m.count(100);
  expect(collections).toBe(2);
  m.count(7);
  expect(collections).toBe(2);
});
