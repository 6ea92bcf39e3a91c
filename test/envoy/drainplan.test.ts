import { expect, test } from "bun:test";
import {
  countActiveConnections,
  describeDrainPlan,
  drainListenersPath,
  drainPlanWarning,
  knownIstioListeners,
  resolveDrainPlan,
} from "../../src/envoy/drainplan.ts";

// Istio's pkg/envoy/agent_test.go TestActiveConnections vectors (status port 15021, prometheus 15009).
const known = knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15009 });

const positive = [
  "http.admin.downstream_cx_active: 2 ",
  "http.agent.downstream_cx_active: 0 ",
  "http.inbound_0.0.0.0_8080.downstream_cx_active: 0 ",
  "listener.0.0.0.0_15001.downstream_cx_active: 0 ",
  "listener.0.0.0.0_15006.downstream_cx_active: 0 ",
  "listener.0.0.0.0_15021.downstream_cx_active: 0 ",
  "listener.0.0.0.0_8443.downstream_cx_active: 6 ",
  "listener.0.0.0.0_9093.downstream_cx_active: 8 ",
  "listener.10.112.32.70_9043.downstream_cx_active: 1 ",
  "listener.10.112.33.230_2181.downstream_cx_active: 0 ",
  "listener.10.112.40.186_2181.downstream_cx_active: 1 ",
  "listener.10.112.43.239_9043.downstream_cx_active: 2 ",
  "listener.10.112.49.68_9043.downstream_cx_active: 1 ",
  "listener.admin.downstream_cx_active: 2 ",
  "listener.admin.main_thread.downstream_cx_active: 2 ",
  "listener.envoy_internal_connect_originate.downstream_cx_active: 2 ",
  "listener.envoy_internal_connect_originate.worker_0.downstream_cx_active: 2 ",
  "listener.envoy_internal_main_internal.downstream_cx_active: 3 ",
  "listener.envoy_internal_inner_connect_originate.downstream_cx_active: 1 ",
  "listener.envoy_internal_outer_connect_originate.downstream_cx_active: 1",
].join("\n");

const zero = [
  "http.admin.downstream_cx_active: 2 ",
  "listener.0.0.0.0_15021.downstream_cx_active: 1 ",
  "listener.0.0.0.0_8443.downstream_cx_active: 0 ",
  "listener.10.112.49.68_9043.downstream_cx_active: 0",
  "listener.admin.downstream_cx_active: 2 ",
  "listener.admin.main_thread.downstream_cx_active: 2 ",
  "listener.envoy_internal_connect_originate.downstream_cx_active: 5 ",
  "listener.envoy_internal_main_internal.downstream_cx_active: 3",
].join("\n");

const ambientOnly = [
  "listener.0.0.0.0_15021.downstream_cx_active: 1 ",
  "listener.0.0.0.0_15009.downstream_cx_active: 1 ",
  "listener.admin.downstream_cx_active: 1 ",
  "listener.admin.main_thread.downstream_cx_active: 1 ",
  "listener.envoy_internal_connect_originate.downstream_cx_active: 2 ",
  "listener.envoy_internal_connect_terminate.downstream_cx_active: 4 ",
  "listener.envoy_internal_main_internal.downstream_cx_active: 3",
].join("\n");

test("countActiveConnections on Istio's vectors", () => {
  expect(countActiveConnections("", known).count).toBe(-1);
  expect(countActiveConnections(positive, known).count).toBe(19);
  expect(countActiveConnections(zero, known).count).toBe(0);
  expect(countActiveConnections(ambientOnly, known).count).toBe(0);
});

test("IPv6 wildcard status listener and secure ports are excluded; bad lines reported", () => {
  const k = knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090, secureMetricsPort: 15091 });
  const stats =
    "listener.[__]_15021.downstream_cx_active: 4\nlistener.0.0.0.0_15091.downstream_cx_active: 2\nlistener.[__]_80.downstream_cx_active: 3\nlistener.x.downstream_cx_active: abc\nno separator here";
  const r = countActiveConnections(stats, k);
  expect(r.count).toBe(3);
  expect(r.problems).toHaveLength(2);
});

test("drain_listeners paths", () => {
  expect(drainListenersPath(true, false)).toBe("/drain_listeners?inboundonly&graceful");
  expect(drainListenersPath(false, false)).toBe("/drain_listeners?graceful");
  expect(drainListenersPath(true, true)).toBe("/drain_listeners?inboundonly&graceful&skip_exit");
  expect(drainListenersPath(false, true)).toBe("/drain_listeners?graceful&skip_exit");
});

test("the drain plan is one line naming what SIGTERM does", () => {
  const wait = describeDrainPlan(resolveDrainPlan({ sidecar: true, exitOnZeroActiveConnections: false, terminationDrainMs: 5000, minimumDrainMs: 5000 }));
  expect(wait).not.toContain("\n");
  expect(wait).toContain("POST /drain_listeners?inboundonly&graceful");
  expect(wait).toContain("wait terminationDrainDuration 5s");
  const zeroPlan = describeDrainPlan(resolveDrainPlan({ sidecar: false, exitOnZeroActiveConnections: true, terminationDrainMs: 5000, minimumDrainMs: 7000 }));
  expect(zeroPlan).toContain("POST /drain_listeners?graceful;");
  expect(zeroPlan).toContain("MINIMUM_DRAIN_DURATION 7s");
  expect(zeroPlan).toContain("downstream_cx_active");
});

test("the drain plan's default SIGKILL grace and component stop are the one 5s shutdown budget", () => {
  const p = resolveDrainPlan({ sidecar: true, exitOnZeroActiveConnections: false, terminationDrainMs: 5000, minimumDrainMs: 5000 });
  expect(p.stopGraceMs).toBe(5000);
  expect(p.componentStopMs).toBe(5000);
  expect(describeDrainPlan(p)).toContain("then SIGTERM Envoy, SIGKILL after 5s");
});

test("TERMINATION_GRACE_PERIOD_SECONDS: a warning only when the plan cannot fit in it", () => {
  const plan = (terminationGraceSeconds: number | undefined, over: { exitOnZeroActiveConnections?: boolean; terminationDrainMs?: number } = {}) =>
    resolveDrainPlan({
      sidecar: true,
      exitOnZeroActiveConnections: false,
      terminationDrainMs: 5000,
      minimumDrainMs: 7000,
      ...over,
      ...(terminationGraceSeconds !== undefined ? { terminationGraceSeconds } : {}),
    });
  // Unknown (unset or 0): no warning, whatever the plan.
  expect(drainPlanWarning(plan(undefined, { terminationDrainMs: 600_000 }))).toBeUndefined();
  expect(drainPlanWarning(plan(0, { terminationDrainMs: 600_000 }))).toBeUndefined();
  // 5s wait + 5s SIGKILL grace + 5s component stop = 15s: fits in Kubernetes' default 30s, and exactly in 15s.
  expect(drainPlanWarning(plan(30))).toBeUndefined();
  expect(drainPlanWarning(plan(15))).toBeUndefined();
  expect(drainPlanWarning(plan(14))).toBe(
    "drain plan needs up to 15s (terminationDrainDuration 5s + SIGKILL grace 5s + component stop 5s), more than TERMINATION_GRACE_PERIOD_SECONDS 14s: kubelet may kill the pod before the drain ends",
  );
  // EXIT_ON_ZERO_ACTIVE_CONNECTIONS: MINIMUM_DRAIN_DURATION (7s) is the bounded part of the wait.
  expect(drainPlanWarning(plan(16, { exitOnZeroActiveConnections: true }))).toBe(
    "drain plan needs up to 17s (MINIMUM_DRAIN_DURATION 7s + SIGKILL grace 5s + component stop 5s), more than TERMINATION_GRACE_PERIOD_SECONDS 16s: kubelet may kill the pod before the drain ends",
  );
  expect(drainPlanWarning(plan(17, { exitOnZeroActiveConnections: true }))).toBeUndefined();
});

test("a gauge gone below zero in Envoy (2^64-1) counts as 0 with a warning; large real counts still count (istio#49229)", () => {
  const stats = [
    "listener.0.0.0.0_15006.downstream_cx_active: 18446744073709551615",
    "listener.0.0.0.0_15001.downstream_cx_active: 18446744073709551614",
    "listener.0.0.0.0_8080.downstream_cx_active: 2",
  ].join("\n");
  const r = countActiveConnections(stats, known);
  expect(r.count).toBe(2);
  expect(r.problems).toEqual([
    "Envoy stat listener.0.0.0.0_15006.downstream_cx_active is 18446744073709551615, a gauge gone below zero in Envoy: counted as 0",
    "Envoy stat listener.0.0.0.0_15001.downstream_cx_active is 18446744073709551614, a gauge gone below zero in Envoy: counted as 0",
  ]);
  // 2^63 - 1 is not an underflow; 19 digits below it are counted as they are.
  expect(countActiveConnections("listener.a.downstream_cx_active: 1000000000000000000", known)).toEqual({ count: 1e18, problems: [] });
  expect(countActiveConnections("listener.a.downstream_cx_active: 9223372036854775808", known).count).toBe(0);
});
