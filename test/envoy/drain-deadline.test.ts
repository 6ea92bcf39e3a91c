// EXIT_ON_ZERO_ACTIVE_CONNECTIONS bounded by the pod's grace period (beyond Istio, istio#44690):
// the poll deadline's arithmetic, and the wait driven on a scripted clock (each sleep advances it).

import { expect, test } from "bun:test";
import type { EnvoyAdmin } from "../../src/envoy/admin.ts";
import { waitForDrain } from "../../src/envoy/drain.ts";
import { describeDrainPlan, resolveDrainPlan } from "../../src/envoy/drainplan.ts";
import { memoryLogger } from "../../src/lib/log.ts";

const base = { sidecar: true, exitOnZeroActiveConnections: true, terminationDrainMs: 5000, minimumDrainMs: 1000 };

test("the poll deadline is the grace period less the SIGKILL grace and the component stop, never below MINIMUM_DRAIN_DURATION", () => {
  expect(resolveDrainPlan({ ...base, terminationGraceSeconds: 30 }).pollDeadlineMs).toBe(20_000);
  expect(resolveDrainPlan({ ...base, terminationGraceSeconds: 13 }).pollDeadlineMs).toBe(3000);
  expect(resolveDrainPlan({ ...base, terminationGraceSeconds: 5 }).pollDeadlineMs).toBe(1000);
  // Unknown grace period, or the plain terminationDrainDuration wait: Istio's unbounded behaviour.
  expect(resolveDrainPlan(base).pollDeadlineMs).toBeUndefined();
  expect(resolveDrainPlan({ ...base, terminationGraceSeconds: 0 }).pollDeadlineMs).toBeUndefined();
  expect(resolveDrainPlan({ ...base, exitOnZeroActiveConnections: false, terminationGraceSeconds: 30 }).pollDeadlineMs).toBeUndefined();
  expect(describeDrainPlan(resolveDrainPlan({ ...base, terminationGraceSeconds: 30 }))).toContain(
    "until 0 or 20s after SIGTERM (TERMINATION_GRACE_PERIOD_SECONDS less the stop budget)",
  );
});

function run(terminationGraceSeconds: number | undefined, answers: string[]) {
  const mem = memoryLogger();
  let clock = 100_000;
  const polledAt: number[] = [];
  const admin: EnvoyAdmin = {
    drainListeners: async () => "",
    ready: async () => ({ status: 200, body: "LIVE" }),
    stats: async () => {
      polledAt.push(clock - 100_000);
      const a = answers.shift();
      if (a === undefined) throw new Error("ran out of answers");
      return a;
    },
  };
  const sleep = async (ms: number) => {
    if (polledAt.length > 60) throw new Error("the drain loop does not end");
    clock += ms;
    return true;
  };
  const plan = resolveDrainPlan({ ...base, ...(terminationGraceSeconds ? { terminationGraceSeconds } : {}) });
  const known = new Set<string>();
  const why = waitForDrain(plan, { admin, knownListeners: known, log: mem.log, sleep, now: () => clock, startedAt: 100_000 }, new AbortController().signal);
  return { why, polledAt, lines: () => mem.lines.map((l) => l.split("\t").slice(1).join(" ")) };
}

const three = "listener.0.0.0.0_15006.downstream_cx_active: 3";

test("connections that never close: the polling ends at the deadline and says how many were left", async () => {
  const r = run(13, [three, three, three]);
  expect(await r.why).toBe("pod's termination grace period nearly over (3 connections still active)");
  // Minimum drain 1s, polls every 1s: one poll at 2s, the deadline (3s) reached before the next.
  expect(r.polledAt).toEqual([2000]);
  expect(r.lines()).toContain("warn Stopping Envoy with 3 connections still active: the pod's termination grace period leaves only the stop budget");
});

test("connections that close before the deadline end the wait as in Istio", async () => {
  const r = run(30, [three, "listener.0.0.0.0_15006.downstream_cx_active: 0"]);
  expect(await r.why).toBe("no more active connections");
  expect(r.polledAt).toEqual([2000, 3000]);
});

test("no grace period known: polling goes on past any deadline, as Istio's", async () => {
  const r = run(undefined, Array.from({ length: 40 }, () => three).concat("listener.0.0.0.0_15006.downstream_cx_active: 0"));
  expect(await r.why).toBe("no more active connections");
  expect(r.polledAt.length).toBe(41);
});
