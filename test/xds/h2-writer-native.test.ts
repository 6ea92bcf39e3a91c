// The writer on a transport of Bun's kind (takes what the kernel accepts, keeps no reference):
// batches copied into one reused output buffer, a partial write's rest written first after the
// drain and nothing else handed over before it, large pieces written as they are.

import { expect, test } from "bun:test";
import { BunTransport, type BunSocketLike } from "../../src/xds/h2/transport.ts";
import { H2Writer, QUEUE_LIMIT } from "../../src/xds/h2/writer.ts";

/** A socket that takes at most `room` bytes, recording a copy of each write and the object given. */
class ByteLimitedSocket implements BunSocketLike {
  room = Infinity;
  readonly got: Buffer[] = [];
  readonly given: Uint8Array[] = [];
  ended = false;
  write(data: Uint8Array): number {
    this.given.push(data);
    const n = Math.min(data.length, this.room);
    this.room -= n;
    if (n > 0) this.got.push(Buffer.from(data.subarray(0, n)));
    return n;
  }
  end(): void {
    this.ended = true;
  }
  shutdown(): void {}
  bytes(): Buffer {
    return Buffer.concat(this.got);
  }
}

const tick = () => new Promise((r) => setTimeout(r, 0));
const pattern = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

test("small pieces are copied into one output buffer that every batch reuses", async () => {
  const sock = new ByteLimitedSocket();
  const w = new H2Writer(new BunTransport(sock));
  const pieces: Buffer[] = [];
  for (let turn = 0; turn < 3; turn++) {
    for (let i = 0; i < 20; i++) {
      const p = pattern(9 + 1000 * i, turn * 20 + i);
      pieces.push(p);
      w.push(p);
    }
    await tick();
  }
  expect(sock.bytes().equals(Buffer.concat(pieces))).toBe(true);
  // 3 turns of 20 pieces (~190 KiB each): 2 batches per turn, all in the same memory.
  expect(sock.given.length).toBe(6);
  expect(new Set(sock.given.map((g) => g.buffer)).size).toBe(1);
  expect(Math.max(...sock.given.map((g) => g.length))).toBeLessThanOrEqual(128 * 1024);
});

test("a piece of 128 KiB or more is written as it is, not copied", async () => {
  const sock = new ByteLimitedSocket();
  const w = new H2Writer(new BunTransport(sock));
  const big = pattern(200 * 1024, 1);
  w.push(pattern(9, 2));
  w.push(big);
  await tick();
  expect(sock.given.some((g) => g === big)).toBe(true);
  expect(sock.bytes().equals(Buffer.concat([pattern(9, 2), big]))).toBe(true);
});

test("a partial write: the rest goes first after the drain, nothing is handed over before it, the order holds", async () => {
  const sock = new ByteLimitedSocket();
  const t = new BunTransport(sock);
  const w = new H2Writer(t);
  t.listen({ data: () => {}, drain: () => w.drained(), end: () => {}, close: () => {} });
  sock.room = 1000;
  const a = pattern(5000, 3);
  const b = pattern(300 * 1024, 4);
  w.push(a);
  w.push(b);
  await tick();
  expect(w.blocked).toBe(true);
  expect(sock.bytes().length).toBe(1000);
  const handed = sock.given.length;
  w.push(pattern(10, 5)); // queued while full: not handed over
  await tick();
  expect(sock.given.length).toBe(handed);
  expect(w.unflushedBytes).toBe(5000 + 300 * 1024 + 10 - 1000);
  // The kernel takes 64 KiB per drain.
  while (w.blocked) {
    sock.room = 64 * 1024;
    t.onDrain();
  }
  expect(w.idle).toBe(true);
  expect(w.unflushedBytes).toBe(0);
  expect(sock.bytes().equals(Buffer.concat([a, b, pattern(10, 5)]))).toBe(true);
});

test("once the socket is closed, what is queued is dropped and nothing is written", async () => {
  const sock = new ByteLimitedSocket();
  const t = new BunTransport(sock);
  const w = new H2Writer(t);
  let closed = 0;
  t.listen({ data: () => {}, drain: () => {}, end: () => {}, close: () => closed++ });
  t.onClose();
  t.onClose(); // once only
  w.push(pattern(100, 6));
  await tick();
  expect(sock.given).toEqual([]);
  expect(w.unflushedBytes).toBe(0);
  expect(closed).toBe(1);
});

test("full at QUEUE_LIMIT queued bytes; room is announced once after someone was told full, never otherwise", async () => {
  const sock = new ByteLimitedSocket();
  let rooms = 0;
  const w = new H2Writer(new BunTransport(sock), () => rooms++);
  w.push(pattern(100, 7));
  expect(w.full).toBe(false);
  await tick();
  expect(rooms).toBe(0); // nobody was told "full"
  w.push(pattern(QUEUE_LIMIT - 1, 8));
  expect(w.full).toBe(false);
  w.push(pattern(1, 9));
  expect(w.full).toBe(true);
  expect(w.full).toBe(true);
  await tick();
  expect(rooms).toBe(1);
  w.push(pattern(10, 10));
  await tick();
  expect(rooms).toBe(1);
  expect(sock.bytes().length).toBe(100 + QUEUE_LIMIT + 10);
});
