// The writer's edges, on a scripted transport: `idle` before the first flush and while a rest is
// pending, a transport that was ended or destroyed (nothing written, everything dropped, idle),
// a batch of exactly WRITE_BATCH bytes, and a piece of exactly WRITE_BATCH followed by an empty
// one (handed over as it is, not copied).

import { expect, test } from "bun:test";
import type { H2Transport } from "../../src/xds/h2/transport.ts";
import { H2Writer } from "../../src/xds/h2/writer.ts";

/** A transport that takes at most `room` bytes per write and records what it was given. */
class ScriptedTransport implements H2Transport {
  room = Infinity;
  retainsWrites = false;
  destroyed = false;
  ended = false;
  readonly given: Uint8Array[] = [];
  readonly sizes: number[] = [];
  write(data: Uint8Array): number {
    this.given.push(data);
    const n = Math.min(data.length, this.room);
    this.room -= n;
    this.sizes.push(n);
    return n;
  }
  end(): void {
    this.ended = true;
  }
  shutdown(): void {}
  destroy(): void {
    this.destroyed = true;
  }
  listen(): void {}
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test("not idle with a piece queued and not yet flushed, nor with a partial write's rest pending; idle once all is out", async () => {
  const t = new ScriptedTransport();
  const w = new H2Writer(t);
  expect(w.idle).toBe(true);
  w.push(new Uint8Array(10));
  expect(w.idle).toBe(false); // queued, the flush is still to come
  t.room = 4;
  await tick();
  expect(t.sizes).toEqual([4]);
  expect(w.blocked).toBe(true);
  expect(w.idle).toBe(false); // six bytes pending, nothing queued
  expect(w.unflushedBytes).toBe(6);
  t.room = Infinity;
  w.drained();
  expect(t.sizes).toEqual([4, 6]);
  expect(w.idle).toBe(true);
});

for (const gone of ["ended", "destroyed"] as const) {
  test(`a transport that was ${gone}: nothing is written, what was queued is dropped, the writer is idle`, async () => {
    const t = new ScriptedTransport();
    const w = new H2Writer(t);
    w.push(new Uint8Array(100));
    t[gone] = true;
    await tick();
    expect(t.given).toEqual([]);
    expect(w.unflushedBytes).toBe(0);
    expect(w.idle).toBe(true);
  });
}

test("pieces adding up to exactly WRITE_BATCH (128 KiB) go out in one write", async () => {
  const t = new ScriptedTransport();
  const w = new H2Writer(t);
  w.push(new Uint8Array(64 * 1024).fill(1));
  w.push(new Uint8Array(64 * 1024).fill(2));
  w.push(new Uint8Array(1).fill(3));
  await tick();
  expect(t.sizes).toEqual([131072, 1]);
  expect(t.given[0]![65535]).toBe(1);
  expect(t.given[0]![65536]).toBe(2);
});

test("a piece of exactly WRITE_BATCH followed by an empty one is handed over as it is, not copied", async () => {
  const t = new ScriptedTransport();
  const w = new H2Writer(t);
  const big = new Uint8Array(128 * 1024).fill(7);
  w.push(big);
  w.push(new Uint8Array(0));
  await tick();
  expect(t.given[0]).toBe(big);
});
