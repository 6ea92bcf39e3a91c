// The envoy area's pure parts, cases found by mutation testing (npm run mutate -- envoy).
// The drain wait (waitForDrain) driven step by step: a scripted sleep and a scripted admin, so the
// order of waits, the consecutive-error counter and its reset, cancellation at each point and
// the log lines (Istio's wording, pkg/envoy/agent.go) are asserted exactly. Found by mutation
// testing (npm run mutate -- envoy): only the supervisor's slower tests reached this code.

import { describe, expect, test } from "bun:test";
import type { EnvoyAdmin } from "../../src/envoy/admin.ts";
import { waitForDrain } from "../../src/envoy/drain.ts";
import { countActiveConnections, knownIstioListeners, resolveDrainPlan, type DrainPlan } from "../../src/envoy/drainplan.ts";
import { decideRestart, parseRestartMode, type RestartPolicy } from "../../src/envoy/restart.ts";
import { describeEvent, isLive, transition, type SupervisorEvent, type SupervisorState, type Transition } from "../../src/envoy/state.ts";
import { memoryLogger } from "../../src/lib/log.ts";

type Step = string | Error | ((abort: () => void) => string);

function harness(stats: Step[], opts: { sleepResults?: boolean[] } = {}) {
  const mem = memoryLogger();
  const sleeps: number[] = [];
  const statCalls: [string, number][] = [];
  const ctl = new AbortController();
  const sleepResults = [...(opts.sleepResults ?? [])];
  const admin: EnvoyAdmin = {
    drainListeners: async () => "",
    ready: async () => ({ status: 200, body: "LIVE" }),
    stats: async (filter, timeoutMs) => {
      statCalls.push([filter, timeoutMs]);
      const s = stats.shift();
      if (s === undefined) throw new Error("test script ran out of stats answers");
      if (s instanceof Error) throw s;
      return typeof s === "function" ? s(() => ctl.abort()) : s;
    },
  };
  const sleep = async (ms: number, signal?: AbortSignal) => {
    sleeps.push(ms);
    // A wait that never ends (a broken loop) fails the test quickly instead of timing out.
    if (sleeps.length > 50) throw new Error("more than 50 waits: the drain loop does not end");
    if (signal?.aborted) return false;
    return sleepResults.length > 0 ? sleepResults.shift()! : true;
  };
  const known = new Set(["listener.admin.downstream_cx_active"]);
  const run = (plan: DrainPlan) => waitForDrain(plan, { admin, knownListeners: known, log: mem.log, sleep }, ctl.signal);
  // Level and message of each line, without the timestamp.
  const lines = () => mem.lines.map((l) => l.split("\t").slice(1).join(" "));
  return { run, sleeps, statCalls, ctl, lines };
}

const waitPlan = resolveDrainPlan({ sidecar: true, exitOnZeroActiveConnections: false, terminationDrainMs: 5000, minimumDrainMs: 0 });
const zeroPlan = resolveDrainPlan({
  sidecar: true,
  exitOnZeroActiveConnections: true,
  terminationDrainMs: 5000,
  minimumDrainMs: 3000,
  pollIntervalMs: 1000,
  pollTimeoutMs: 2000,
});

const active = (n: number) => `listener.0.0.0.0_8080.downstream_cx_active: ${n}\nlistener.admin.downstream_cx_active: 7`;

describe("waitForDrain: terminationDrainDuration", () => {
  test("sleeps the duration once and says so", async () => {
    const h = harness([]);
    expect(await h.run(waitPlan)).toBe("graceful termination period complete");
    expect(h.sleeps).toEqual([5000]);
    expect(h.lines()).toEqual(["info Graceful termination period is 5s, starting..."]);
  });

  test("a sleep cut short is a cancelled wait", async () => {
    const h = harness([], { sleepResults: [false] });
    expect(await h.run(waitPlan)).toBe("drain wait cancelled");
  });

  test("an already aborted signal waits for nothing and logs nothing", async () => {
    const h = harness([]);
    h.ctl.abort();
    expect(await h.run(waitPlan)).toBe("drain wait cancelled");
    expect(await h.run(zeroPlan)).toBe("drain wait cancelled");
    expect(h.sleeps).toEqual([]);
    expect(h.lines()).toEqual([]);
  });
});

describe("waitForDrain: EXIT_ON_ZERO_ACTIVE_CONNECTIONS", () => {
  test("minimum drain, then polls every interval until 0, counting only client listeners", async () => {
    const h = harness([active(3), active(1), active(0)]);
    expect(await h.run(zeroPlan)).toBe("no more active connections");
    expect(h.sleeps).toEqual([3000, 1000, 1000, 1000]);
    expect(h.statCalls).toEqual([
      ["downstream_cx_active$", 2000],
      ["downstream_cx_active$", 2000],
      ["downstream_cx_active$", 2000],
    ]);
    expect(h.lines()).toEqual([
      "info Agent draining proxy for 3s, then waiting for active connections to terminate...",
      "info Checking for active connections...",
      "info There are still 3 active connections",
      "info There are still 1 active connections",
    ]);
  });

  test("the minimum drain cut short polls nothing", async () => {
    const h = harness([], { sleepResults: [false] });
    expect(await h.run(zeroPlan)).toBe("drain wait cancelled");
    expect(h.statCalls).toEqual([]);
  });

  test("a poll interval cut short ends the wait", async () => {
    const h = harness([active(2)], { sleepResults: [true, true, false] });
    expect(await h.run(zeroPlan)).toBe("drain wait cancelled");
    expect(h.statCalls.length).toBe(1);
  });

  test("empty stats: Envoy has none, stop waiting", async () => {
    const h = harness([""]);
    expect(await h.run(zeroPlan)).toBe("downstream_cx_active not available (no connections yet or stats disabled)");
  });

  test("lines that cannot be parsed are warned about and the rest still counts", async () => {
    const h = harness(["garbage\n" + active(0)]);
    expect(await h.run(zeroPlan)).toBe("no more active connections");
    expect(h.lines()).toContain("warn envoy stat line is missing separator: garbage");
  });

  test("four failed polls are retried; the fifth consecutive one ends the wait", async () => {
    const boom = () => new Error("connection refused");
    const h = harness([boom(), boom(), boom(), boom(), boom()]);
    expect(await h.run(zeroPlan)).toBe("error while obtaining downstream_cx_active stat (max retry 5 exceeded)");
    expect(h.statCalls.length).toBe(5);
    const lines = h.lines();
    expect(lines.filter((l) => l === "error unable to get listener stats from Envoy: connection refused").length).toBe(5);
    expect(lines.filter((l) => l.startsWith("warn Retrying"))).toEqual([
      "warn Retrying (1 attempt) to obtain active connections...",
      "warn Retrying (2 attempt) to obtain active connections...",
      "warn Retrying (3 attempt) to obtain active connections...",
      "warn Retrying (4 attempt) to obtain active connections...",
    ]);
  });

  test("a successful poll resets the error count", async () => {
    const boom = () => new Error("timeout");
    const h = harness([boom(), boom(), boom(), boom(), active(2), boom(), boom(), boom(), boom(), active(0)]);
    expect(await h.run(zeroPlan)).toBe("no more active connections");
    expect(h.statCalls.length).toBe(10);
    expect(
      h
        .lines()
        .filter((l) => l.startsWith("warn Retrying"))
        .at(-1),
    ).toBe("warn Retrying (4 attempt) to obtain active connections...");
  });

  test("a signal arriving during a poll ends the wait before its answer is used", async () => {
    const h = harness([(abort) => (abort(), active(0))]);
    expect(await h.run(zeroPlan)).toBe("drain wait cancelled");
    expect(h.lines()).not.toContain("info There are still 0 active connections");
  });
});

describe("state machine: refusals say why, and the rows the transition table did not have", () => {
  const spawned: SupervisorEvent = { type: "spawned", epoch: 1, pid: 2 };
  const shutdown: SupervisorEvent = { type: "shutdown", immediate: false, skipDrain: false };
  test.each([
    ["exited", { type: "start" }, { ok: false, why: "already exited" }],
    ["running", { type: "start" }, { ok: false, why: "already started" }],
    ["idle", spawned, { ok: false, why: "not started" }],
    ["stopping", spawned, { ok: true, to: "stopping" }],
    ["draining", spawned, { ok: true, to: "draining" }],
    ["running", { type: "restart-due" }, { ok: false, why: "no restart pending in state running" }],
    ["starting", { type: "drain" }, { ok: true, to: "drained" }],
    ["draining", { type: "drain" }, { ok: false, why: "cannot drain in state draining" }],
    ["stopping", shutdown, { ok: true, to: "stopping" }],
    ["idle", { type: "quit" }, { ok: true, to: "exited" }],
    ["restarting", { type: "quit" }, { ok: true, to: "stopping" }],
    ["stopping", { type: "drain-over", why: "x" }, { ok: false, why: "not draining (state stopping)" }],
  ] as [SupervisorState, SupervisorEvent, Transition][])("%s + %o", (from, ev, want) => {
    expect(transition(from, ev)).toEqual(want);
  });

  test("live states", () => {
    const all: SupervisorState[] = ["idle", "starting", "running", "restarting", "drained", "draining", "stopping", "exited"];
    expect(all.filter(isLive)).toEqual(["starting", "running", "restarting", "drained", "draining", "stopping"]);
  });

  test("the transition log's words for each event", () => {
    expect(describeEvent({ type: "spawned", epoch: 2, pid: 42 })).toBe("Envoy epoch 2 started, pid 42");
    expect(describeEvent({ type: "exited", epoch: 1, last: true, restart: false, status: "exit code 1" })).toBe("Envoy epoch 1 ended: exit code 1");
    expect(describeEvent({ type: "exited", epoch: 0, last: false, restart: false, status: "signal SIGKILL" })).toBe(
      "Envoy epoch 0 ended: signal SIGKILL; other epochs still running",
    );
    expect(describeEvent({ type: "shutdown", immediate: true, skipDrain: false })).toBe("shutdown requested, immediate");
    expect(describeEvent({ type: "shutdown", immediate: false, skipDrain: true })).toBe("shutdown requested, already drained");
    expect(describeEvent({ type: "shutdown", immediate: false, skipDrain: false })).toBe("shutdown requested");
    expect(describeEvent({ type: "drain-over", why: "no more active connections" })).toBe("no more active connections");
    expect(describeEvent({ type: "start" })).toBe("start");
    expect(describeEvent({ type: "quit" })).toBe("quit");
  });
});

describe("drain plan and stats parsing", () => {
  test("resolved plans, with Istio's defaults and negative durations clamped", () => {
    expect(resolveDrainPlan({ sidecar: false, exitOnZeroActiveConnections: false, terminationDrainMs: -1, minimumDrainMs: -1 })).toEqual({
      mode: "wait",
      inboundOnly: false,
      terminationDrainMs: 0,
      minimumDrainMs: 0,
      pollIntervalMs: 1000,
      pollTimeoutMs: 2000,
      maxPollErrors: 4,
      stopGraceMs: 5000,
      componentStopMs: 5000,
    });
    expect(
      resolveDrainPlan({
        sidecar: true,
        exitOnZeroActiveConnections: true,
        terminationDrainMs: 5000,
        minimumDrainMs: 7000,
        pollIntervalMs: 10,
        pollTimeoutMs: 20,
        stopGraceMs: 30,
      }),
    ).toEqual({
      mode: "zero-connections",
      inboundOnly: true,
      terminationDrainMs: 5000,
      minimumDrainMs: 7000,
      pollIntervalMs: 10,
      pollTimeoutMs: 20,
      maxPollErrors: 4,
      stopGraceMs: 30,
      componentStopMs: 5000,
    });
  });

  test("Istio's own listeners: status and Prometheus ports, plus each secure metrics port given", () => {
    const base = knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090 });
    expect([...base].sort()).toEqual([
      "listener.0.0.0.0_15021.downstream_cx_active",
      "listener.0.0.0.0_15090.downstream_cx_active",
      "listener.[__]_15021.downstream_cx_active",
      "listener.[__]_15090.downstream_cx_active",
      "listener.admin.downstream_cx_active",
      "listener.admin.main_thread.downstream_cx_active",
    ]);
    const secure = knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090, secureMetricsPort: 15091 });
    expect(secure.size).toBe(8);
    expect(secure.has("listener.0.0.0.0_15091.downstream_cx_active")).toBe(true);
    const merged = knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090, secureMergedMetricsPort: 15092 });
    expect(merged.size).toBe(8);
    expect(merged.has("listener.[__]_15092.downstream_cx_active")).toBe(true);
  });

  test("counting: empty is -1 with no problems; blank lines are no problem; bad lines and values are named", () => {
    const none = new Set<string>();
    expect(countActiveConnections("", none)).toEqual({ count: -1, problems: [] });
    expect(countActiveConnections("listener.a.downstream_cx_active: 12\n   \n\nlistener.b.downstream_cx_active: 3", none)).toEqual({ count: 15, problems: [] });
    expect(
      countActiveConnections("garbage\nlistener.a.downstream_cx_active: x5\nlistener.b.downstream_cx_active: 5x\nlistener.c.downstream_cx_active: 2", none),
    ).toEqual({
      count: 2,
      problems: [
        "envoy stat line is missing separator: garbage",
        "failed parsing Envoy stat listener.a.downstream_cx_active: x5",
        "failed parsing Envoy stat listener.b.downstream_cx_active: 5x",
      ],
    });
  });
});

describe("restart policy", () => {
  const policy: RestartPolicy = { mode: "on-failure", baseMs: 200, maxMs: 1000, budget: 4, windowMs: 60_000 };
  test("ENVOY_RESTART_POLICY spellings", () => {
    expect(parseRestartMode(" On-Failure ")).toEqual({ mode: "on-failure" });
    expect(parseRestartMode("onfailure")).toEqual({ mode: "on-failure" });
    expect(parseRestartMode("NEVER")).toEqual({ mode: "never" });
    expect(parseRestartMode("no")).toEqual({ mode: "never" });
  });

  test("a restart exactly one window ago no longer counts; the attempt number counts the ones that do", () => {
    const d = decideRestart(policy, [0, 30_000], 60_000);
    expect(d).toEqual({ restart: true, delayMs: 400, attempt: 2, history: [30_000, 60_000] });
  });

  test("policy never says so", () => {
    expect(decideRestart({ ...policy, mode: "never" }, [], 0)).toEqual({ restart: false, reason: "ENVOY_RESTART_POLICY=never", history: [] });
  });
});
