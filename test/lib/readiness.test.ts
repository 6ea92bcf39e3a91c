// Readiness as named blockers and warnings: registration order, once-only registration, errors,
// reblocking, warnings that never gate, and the line logged when a condition clears (once).

import { expect, test } from "bun:test";
import { memoryLogger } from "../../src/lib/log.ts";
import { READINESS, Readiness } from "../../src/lib/readiness.ts";

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

test("clearing a condition logs how long it was pending and how many blockers remain, once", () => {
  let t = 1_000;
  const { lines, log } = memoryLogger();
  const r = new Readiness(() => t, log.child("readiness"));
  const dns = r.block("dns table received");
  r.block("terminating");
  const xds = r.warn("xds connected");
  t = 2_300;
  dns.clear();
  t = 2_550;
  xds.clear();
  // Clearing again (or a fail after clearing) is not a change: no second line.
  dns.clear();
  r.clear("dns table received");
  dns.fail("late");
  t = 4_000;
  r.clear("terminating");
  const logged = lines.map((l) => l.split("\t").slice(1).join("\t"));
  expect(logged).toEqual([
    'info\treadiness\t"dns table received" cleared after 1.3s, 1 blocker still pending\tcondition=dns table received\tpending=1',
    'info\treadiness\twarning "xds connected" cleared after 1.6s, 1 blocker still pending\tcondition=xds connected\tpending=1',
    'info\treadiness\t"terminating" cleared after 3.0s, 0 blockers still pending\tcondition=terminating\tpending=0',
  ]);
});

test("a reblocked condition is timed from the reblock, and its clear is logged again", () => {
  let t = 0;
  const { lines, log } = memoryLogger();
  const r = new Readiness(() => t, log);
  const b = r.block("envoy restarting");
  t = 200;
  b.clear();
  t = 10_000;
  b.reblock();
  t = 10_450;
  b.clear();
  expect(lines.map((l) => l.split("\t")[2])).toEqual([
    '"envoy restarting" cleared after 0.2s, 0 blockers still pending',
    '"envoy restarting" cleared after 0.5s, 0 blockers still pending',
  ]);
});

test("the blocker names are Istio's words and ours, spelled once", () => {
  expect(READINESS).toEqual({
    dnsTable: "dns table received",
    localXdsLoaded: "local xDS file loaded",
    terminating: "terminating",
    envoyRestarting: "envoy restarting",
    xdsConnected: "xds connected",
    certificateWarmed: "certificate warmed",
    certificateRenewal: "certificate renewal",
    envoy: "envoy",
    grpcBootstrap: "grpc bootstrap",
  });
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

test("onChange hears each real change once: raised, failed with a new error, cleared, raised again; repeats are silent", () => {
  const { r } = clocked();
  const heard: string[] = [];
  r.onChange(() => heard.push(r.describe() || "ready"));
  const b = r.block("dns table received");
  r.block("dns table received"); // already pending
  b.fail("no table");
  b.fail("no table"); // same error
  b.fail("still none");
  b.clear();
  b.clear(); // already clear
  r.clear("never raised");
  b.reblock();
  b.reblock(); // already pending
  r.warn("xds connected");
  expect(heard).toEqual([
    "dns table received: pending for 0.0s",
    "dns table received: no table",
    "dns table received: still none",
    "ready",
    "dns table received: pending for 0.0s",
    "dns table received: pending for 0.0s\nwarning: xds connected: pending for 0.0s",
  ]);
});
