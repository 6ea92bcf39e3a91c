// Readiness as named blockers and warnings: registration order, once-only registration, errors,
// reblocking, warnings that never gate, and change notifications (exactly when the set changes).

import { expect, test } from "bun:test";
import { Readiness } from "../../src/lib/readiness.ts";

function clocked(start = 1_000) {
  let t = start;
  const r = new Readiness(() => t);
  return { r, advance: (ms: number) => (t += ms) };
}

test("ready with no blockers; each blocker listed in registration order until cleared", () => {
  const { r } = clocked();
  expect(r.isReady()).toBe(true);
  expect(r.describe()).toBe("");
  const a = r.block("xds connected");
  r.block("certificate warmed");
  expect(r.isReady()).toBe(false);
  expect(r.blockers().map((b) => b.name)).toEqual(["xds connected", "certificate warmed"]);
  a.clear();
  expect(r.blockers().map((b) => b.name)).toEqual(["certificate warmed"]);
  r.clear("certificate warmed");
  expect(r.isReady()).toBe(true);
  expect(r.blockers()).toEqual([]);
});

test("describe: the last error, or how long it has been pending, one line each", () => {
  const { r, advance } = clocked();
  const a = r.block("a");
  advance(3_250);
  r.block("b");
  advance(1_000);
  expect(r.describe()).toBe("a: pending for 4.3s\nb: pending for 1.0s");
  a.fail("connection refused");
  expect(r.describe()).toBe("a: connection refused\nb: pending for 1.0s");
  a.fail("timeout");
  expect(r.describe()).toBe("a: timeout\nb: pending for 1.0s");
});

test("blocking a pending name again keeps its start time and error; fail after clear is ignored", () => {
  const { r, advance } = clocked();
  const a = r.block("a");
  a.fail("e1");
  advance(2_000);
  const again = r.block("a");
  expect(r.blockers()).toEqual([{ name: "a", since: 1_000, lastError: "e1", gates: true }]);
  again.clear();
  a.fail("late");
  expect(r.isReady()).toBe(true);
  expect(r.blockers()).toEqual([]);
});

test("reblock after clear starts a new pending period without the old error; reblock while pending changes nothing", () => {
  const { r, advance } = clocked();
  const t = r.block("terminating");
  t.fail("old");
  t.clear();
  advance(5_000);
  t.reblock();
  expect(r.blockers()).toEqual([{ name: "terminating", since: 6_000, gates: true }]);
  advance(1_000);
  t.reblock();
  expect(r.blockers()).toEqual([{ name: "terminating", since: 6_000, gates: true }]);
});

test("listeners hear each change of the blocker set, and only those; unsubscribe stops them", () => {
  const { r } = clocked();
  let calls = 0;
  const off = r.onChange(() => calls++);
  const a = r.block("a"); // new blocker
  expect(calls).toBe(1);
  a.fail("x"); // error only: not a change of the set
  expect(calls).toBe(1);
  a.reblock(); // already pending
  expect(calls).toBe(1);
  a.clear();
  expect(calls).toBe(2);
  r.clear("a"); // already clear
  expect(calls).toBe(2);
  a.reblock();
  expect(calls).toBe(3);
  off();
  a.clear();
  expect(calls).toBe(3);
});

test("warnings are reported after the blockers and never gate, also when raised again", () => {
  const { r, advance } = clocked();
  const w = r.warn("xds connected");
  expect(r.isReady()).toBe(true);
  expect(r.blockers()).toEqual([]);
  expect(r.warnings()).toEqual([{ name: "xds connected", since: 1_000, gates: false }]);
  r.block("dns table received");
  advance(500);
  w.fail("connection refused");
  expect(r.isReady()).toBe(false);
  expect(r.describe()).toBe("dns table received: pending for 0.5s\nwarning: xds connected: connection refused");
  r.clear("dns table received");
  expect(r.isReady()).toBe(true);
  w.clear();
  w.reblock();
  expect(r.isReady()).toBe(true);
  expect(r.warnings().map((x) => [x.name, x.gates])).toEqual([["xds connected", false]]);
  expect(r.blockers()).toEqual([]);
});
