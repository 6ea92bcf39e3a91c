// ChunkReleaser (src/xds/chunkrelease.ts): istiod's chunks are freed (their ArrayBuffer detached)
// only once the bytes written downstream up to their mark are out, oldest first, after the turn
// that delivered them; views and shared buffers are never touched.

import { expect, test } from "bun:test";
import { ChunkReleaser, MAX_HELD_CHUNKS } from "../../src/xds/chunkrelease.ts";

function source() {
  const s = { written: 0, out: 0 };
  return { s, r: new ChunkReleaser({ mark: () => s.written, released: () => s.out }) };
}
const chunk = (n: number) => new Uint8Array(new ArrayBuffer(n));
const turn = () => new Promise<void>((r) => setTimeout(r, 0));

test("held with the bytes written so far; freed after the turn once those are out, not before", async () => {
  const { s, r } = source();
  const a = chunk(100);
  s.written = 40; // a's views: the first 40 bytes written downstream
  r.hold(a);
  s.out = 40;
  expect(a.buffer.detached).toBe(false); // not inside the turn that delivered it
  await turn();
  expect(a.buffer.detached).toBe(true);
  expect(r.releasedBytes).toBe(100);
  expect(r.held).toBe(0);
});

test("oldest first: a chunk whose bytes are not all out stops the ones after it", async () => {
  const { s, r } = source();
  const a = chunk(10);
  const b = chunk(20);
  const c = chunk(30);
  s.written = 100;
  r.hold(a);
  s.written = 250;
  r.hold(b);
  s.written = 300;
  r.hold(c);
  s.out = 249;
  await turn();
  expect([a, b, c].map((x) => x.buffer.detached)).toEqual([true, false, false]);
  s.out = 300;
  r.check();
  expect([a, b, c].map((x) => x.buffer.detached)).toEqual([true, true, true]);
  expect(r.releasedBytes).toBe(60);
});

test("a view, a part of a larger buffer or an empty chunk is never held", async () => {
  const { s, r } = source();
  const big = new ArrayBuffer(100);
  const parts = [new Uint8Array(big, 10, 50), new Uint8Array(big, 0, 50), new Uint8Array(0)];
  for (const p of parts) r.hold(p);
  s.out = 1e9;
  await turn();
  expect(r.held).toBe(0);
  expect(big.detached).toBe(false);
});

test("drop forgets what is held: nothing is freed after it", async () => {
  const { s, r } = source();
  const a = chunk(10);
  r.hold(a);
  r.drop();
  s.out = 10;
  await turn();
  r.check();
  expect(a.buffer.detached).toBe(false);
});

test(`at most ${MAX_HELD_CHUNKS} chunks held: the oldest are left to the collector`, async () => {
  const { s, r } = source();
  const all = Array.from({ length: MAX_HELD_CHUNKS + 2 }, () => chunk(1));
  for (const c of all) r.hold(c);
  expect(r.held).toBe(MAX_HELD_CHUNKS);
  s.out = 0;
  await turn();
  expect(all.filter((c) => c.buffer.detached).length).toBe(MAX_HELD_CHUNKS);
  expect(all[0]!.buffer.detached).toBe(false);
  expect(all[1]!.buffer.detached).toBe(false);
});
