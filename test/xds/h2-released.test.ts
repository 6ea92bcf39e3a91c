// How much of what a stream was given nothing references any more (stream.ts `releasedBytes`,
// the writer's `pushedTotal` / `handedTotal`): the relay frees istiod's chunks by it
// (chunkrelease.ts), so it must never run ahead of what the socket took. On the scripted rig
// (h2-session-out-rig.ts): the test decides how much each write the "socket" takes.

import { describe, expect, test } from "bun:test";
import { GRPC_REQUEST, S, windowUpdate } from "./h2-support.ts";
import { bytes, clientUp } from "./h2-session-out-rig.ts";

/** A client rig whose transport copies what it takes, as Bun's sockets do (the scripted one says it keeps references). */
function copying(peer: [number, number][] = []) {
  const r = clientUp({}, peer);
  Object.defineProperty(r.t, "retainsWrites", { value: false });
  const st = r.s.request(GRPC_REQUEST);
  r.out();
  return { ...r, st };
}

describe("releasedBytes", () => {
  test("nothing before the writer hands the bytes over; all of them once the socket took them", () => {
    const { s, st } = copying();
    st.write(bytes(100, 1));
    st.writev(bytes(5, 2), bytes(200, 3));
    expect(st.writtenTotal).toBe(305);
    expect(st.releasedBytes()).toBe(0); // pumped into the writer, which flushes in a microtask
    s.flush();
    expect(st.releasedBytes()).toBe(305);
  });

  test("a socket that takes part of a write: released up to the last DATA frame wholly taken, the rest after the drain", () => {
    const { s, t, st, out } = copying([[S.MAX_FRAME_SIZE, 16384]]);
    // Two DATA frames of 16384 and one of 7232 (40000 bytes): 9-byte headers between them.
    st.write(bytes(40_000, 1));
    t.room = 9 + 16384 + 9 + 100; // the first frame and 100 bytes of the second
    s.flush();
    expect(st.releasedBytes()).toBe(16384);
    t.room = Infinity;
    t.ev.drain();
    expect(st.releasedBytes()).toBe(40_000);
    expect(out().length).toBe(3);
  });

  test("bytes waiting for the peer's window stay referenced; a reset drops them, and then all count", () => {
    const { s, feed, st } = copying([[S.INITIAL_WINDOW_SIZE, 100]]);
    st.write(bytes(300, 1));
    s.flush();
    expect(st.bufferedBytes).toBe(200);
    expect(st.releasedBytes()).toBe(100);
    feed(windowUpdate(1, 50));
    s.flush();
    expect(st.releasedBytes()).toBe(150);
    st.reset();
    s.flush();
    expect(st.releasedBytes()).toBe(300);
  });

  test("pumped but not yet handed when reset: still referenced until the writer hands it", () => {
    const { s, t, st } = copying();
    t.room = 0;
    st.write(bytes(50, 1));
    s.flush();
    st.reset();
    expect(st.releasedBytes()).toBe(0);
    t.room = Infinity;
    t.ev.drain();
    expect(st.releasedBytes()).toBe(50);
  });

  test("a transport that keeps references (node streams): never released", () => {
    const { s, out } = clientUp();
    const st = s.request(GRPC_REQUEST);
    out();
    st.write(bytes(10, 1));
    s.flush();
    expect(st.writtenTotal).toBe(10);
    expect(st.releasedBytes()).toBe(0);
  });

  test("several streams share the writer: each counts its own bytes, in the writer's order", () => {
    const { s, t, st, out } = copying();
    const other = s.request(GRPC_REQUEST);
    out(); // its HEADERS are out
    st.write(bytes(10, 1));
    other.write(bytes(20, 2));
    st.write(bytes(30, 3));
    t.room = 9 + 10 + 9 + 20; // the first two DATA frames, not the third
    s.flush();
    expect(st.releasedBytes()).toBe(10);
    expect(other.releasedBytes()).toBe(20);
    t.room = Infinity;
    t.ev.drain();
    expect(st.releasedBytes()).toBe(40);
    expect(other.releasedBytes()).toBe(20);
  });
});

describe("marks stay bounded", () => {
  test("a stream nobody asks keeps only the marks of what is still in the writer", () => {
    const { s, st } = copying();
    for (let i = 0; i < 5000; i++) {
      st.write(bytes(10, 1));
      s.flush();
    }
    const marks = (st as unknown as { marks: number[]; marksHead: number }).marks;
    expect(marks.length).toBeLessThanOrEqual(2);
    expect(st.releasedBytes()).toBe(50_000);
  });

  test("thousands of writes in one turn, all but the last handed over: the marks handed are dropped from the array, the count stays exact", () => {
    const { s, t, st } = copying();
    for (let i = 0; i < 3000; i++) st.write(bytes(10, 1)); // each pumped into the writer: one mark each
    t.room = 2999 * (9 + 10); // the socket takes every DATA frame but the last
    s.flush();
    expect(st.releasedBytes()).toBe(29_990);
    const inner = st as unknown as { marks: number[]; marksHead: number };
    expect(inner.marks.length - inner.marksHead).toBe(2); // the last frame's mark
    expect(inner.marks.length).toBeLessThanOrEqual(4); // the 2,999 handed are not kept behind the head
    t.room = Infinity;
    t.ev.drain();
    expect(st.releasedBytes()).toBe(30_000);
  });

  test("behind a transport that keeps references, no marks at all", () => {
    const { s, out } = clientUp();
    const st = s.request(GRPC_REQUEST);
    out();
    for (let i = 0; i < 100; i++) st.write(bytes(10, 1));
    s.flush();
    expect((st as unknown as { marks: number[] }).marks.length).toBe(0);
  });

  test("bytes pumped into the writer when the earlier ones were out are not counted released with them", () => {
    const { s, t, st } = copying();
    st.write(bytes(10, 1));
    s.flush();
    expect(st.releasedBytes()).toBe(10);
    t.room = 0;
    st.write(bytes(20, 2)); // pumped at once (the queue is empty again), not yet handed
    expect(st.bufferedBytes).toBe(0);
    expect(st.releasedBytes()).toBe(10);
    s.flush();
    expect(st.releasedBytes()).toBe(10);
    t.room = Infinity;
    t.ev.drain();
    expect(st.releasedBytes()).toBe(30);
  });
});
