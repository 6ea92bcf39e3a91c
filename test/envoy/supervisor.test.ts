import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { harness, index, within, type Harness } from "./harness.ts";
import { lifecycleRoutes } from "../../src/envoy/routes.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { until } from "../sds/fake-clock.ts";

let h: Harness | undefined;
afterEach(() => {
  h?.cleanup();
  h = undefined;
});

const isCall = (path: string) => (r: { event: string; path?: string }) => r.event === "call" && r.path === path;
const isSignal = (sig: string) => (r: { event: string; signal?: string }) => r.event === "signal" && r.signal === sig;

describe("EnvoySupervisor with a fake Envoy", () => {
  test("Envoy exiting 0 ends the supervisor with 0 and removes envoy-rev.json", async () => {
    h = await harness();
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    const start = h.records().find((r) => r.event === "start")!;
    expect(start.argv!.slice(0, 2)).toEqual(["-c", h.bootstrap]);
    expect(start.argv).toContain("--disable-hot-restart");
    expect(start.argv!.slice(-2)).toEqual(["--concurrency", "2"]);
    await h.admin("/fake/exit?code=0");
    expect(await within(h.sup.exited, 5000, "exit")).toBe(0);
    expect(existsSync(h.bootstrap)).toBe(false);
    expect(h.sup.state).toBe("exited");
    expect(h.lines.some((l) => l.includes("envoy: starting -> running"))).toBe(true);
    expect(h.lines.some((l) => l.includes("envoy: running -> exited"))).toBe(true);
  });

  test("SIGTERM path: terminating, drain_listeners, wait terminationDrainDuration, then SIGTERM Envoy", async () => {
    const clock = new ManualClock();
    h = await harness({ drain: { terminationDrainMs: 400 }, options: { clock } });
    const ac = new AbortController();
    await h.sup.start(ac.signal);
    await h.waitReady();
    expect(h.lines.some((l) => l.includes("drain plan on SIGTERM: POST /drain_listeners?inboundonly&graceful; wait terminationDrainDuration 400ms"))).toBe(
      true,
    );
    ac.abort(); // the composition root aborts on the first signal
    await until(() => h!.readiness.blockers().some((b) => b.name === "terminating"), "the terminating blocker");
    // The 400ms wait starts only after the drain call has been answered (the sentinel for the
    // absence of a SIGTERM so far).
    await clock.whenPending(400);
    const drain = index(h.records(), isCall("/drain_listeners"));
    expect(drain).toBeGreaterThanOrEqual(0);
    clock.advance(399);
    expect(h.sup.state).toBe("draining");
    expect(h.records().some(isSignal("SIGTERM"))).toBe(false);
    clock.advance(1);
    expect(await within(h.sup.exited, 5000, "exit")).toBe(0);
    const rec = h.records();
    const term = index(rec, isSignal("SIGTERM"));
    expect(rec[drain]!.query).toBe("inboundonly&graceful");
    expect(rec[drain]!.method).toBe("POST");
    expect(term).toBeGreaterThan(drain);
    expect(h.lines.some((l) => l.includes("envoy: running -> draining"))).toBe(true);
    expect(h.lines.some((l) => l.includes("envoy: draining -> stopping (graceful termination period complete)"))).toBe(true);
  });

  test("a second shutdown request skips the drain wait", async () => {
    const clock = new ManualClock();
    h = await harness({ drain: { terminationDrainMs: 30_000 }, options: { clock } });
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    void h.sup.shutdown();
    await clock.whenPending(30_000); // in the terminationDrainDuration wait, which never ends by itself
    expect(h.sup.state).toBe("draining");
    await h.sup.shutdown({ immediate: true });
    expect(await h.sup.exited).toBe(0);
    expect(clock.pendingMs()).not.toContain(30_000); // the wait was cancelled, not served
    const rec = h.records();
    expect(index(rec, isSignal("SIGTERM"))).toBeGreaterThan(index(rec, isCall("/drain_listeners")));
  });

  test("router: drain_listeners?graceful, and EXIT_ON_ZERO_ACTIVE_CONNECTIONS polls until 0", async () => {
    const clock = new ManualClock();
    h = await harness({
      fakeEnv: { FAKE_ENVOY_CONNECTIONS: "2" },
      drain: { sidecar: false, exitOnZeroActiveConnections: true, minimumDrainMs: 700, pollIntervalMs: 100, terminationDrainMs: 60_000 },
      options: { clock },
    });
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    void h.sup.shutdown();
    await clock.whenPending(700);
    clock.advance(700); // minimum drain over
    expect(h.records().filter(isCall("/stats"))).toHaveLength(0); // no poll before it
    // Two polls see 2 connections; each is followed by the next poll interval (the sentinel that
    // the answer was handled and did not end the drain).
    for (let i = 1; i <= 2; i++) {
      await clock.whenPending(100);
      clock.advance(100);
      await until(() => h!.lines.filter((l) => l.includes("There are still 2 active connections")).length === i, `poll ${i} handled`);
      await clock.whenPending(100);
      expect(h.sup.state).toBe("draining");
    }
    const polls = h.records().filter(isCall("/stats"));
    expect(polls).toHaveLength(2);
    expect(polls[0]!.query).toBe("usedonly&filter=downstream_cx_active%24");
    expect(h.records().some(isSignal("SIGTERM"))).toBe(false);
    await h.admin("/fake/connections?n=0");
    clock.advance(100);
    expect(await within(h.sup.exited, 5000, "exit")).toBe(0);
    const rec = h.records();
    expect(rec.find(isCall("/drain_listeners"))!.query).toBe("graceful");
    expect(h.lines.some((l) => l.includes("draining -> stopping (no more active connections)"))).toBe(true);
    expect(index(rec, isSignal("SIGTERM"))).toBeGreaterThan(rec.findLastIndex(isCall("/stats")));
  });

  test("zero-connections poller stops after more than 4 consecutive errors", async () => {
    h = await harness({
      fakeEnv: { FAKE_ENVOY_NO_ADMIN: "1" },
      drain: { exitOnZeroActiveConnections: true, minimumDrainMs: 50, pollIntervalMs: 50, pollTimeoutMs: 200 },
    });
    await h.sup.start(new AbortController().signal);
    await Bun.sleep(100);
    await h.sup.shutdown();
    expect(h.lines.filter((l) => l.includes("unable to get listener stats from Envoy")).length).toBe(5);
    expect(h.lines.some((l) => l.includes("max retry 5 exceeded"))).toBe(true);
  });

  test("POST /quitquitquit: no drain, Envoy stopped at once, exit 0", async () => {
    h = await harness({ drain: { terminationDrainMs: 30_000 } });
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    const routes = lifecycleRoutes(h.sup);
    const res = routes(new Request("http://127.0.0.1:15020/quitquitquit", { method: "POST" }), "127.0.0.1")!;
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("OK");
    expect(await within(h.sup.exited, 5000, "exit after quit")).toBe(0);
    const rec = h.records();
    expect(rec.some(isCall("/drain_listeners"))).toBe(false);
    expect(rec.some(isSignal("SIGTERM"))).toBe(true);
  });

  test("POST /drain then SIGTERM: drain with skip_exit, later shutdown does not wait", async () => {
    const clock = new ManualClock();
    h = await harness({ drain: { terminationDrainMs: 30_000 }, options: { clock } });
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    await h.sup.drain();
    expect(h.sup.state).toBe("drained");
    expect(h.readiness.isReady()).toBe(true); // as Istio's DrainNow: /drain alone does not fail readiness
    const drain = h.records().find(isCall("/drain_listeners"))!;
    expect(drain.query).toBe("inboundonly&graceful&skip_exit");
    // Envoy kept running while drained (the drain call above is the sentinel): no SIGTERM yet.
    expect(h.records().some(isSignal("SIGTERM"))).toBe(false);
    const t0 = clock.now();
    // Time never moves here: a shutdown that waited terminationDrainDuration would never end.
    await within(h.sup.shutdown(), 5000, "shutdown after drain");
    expect(h.records().filter(isSignal("SIGTERM"))).toHaveLength(1);
    expect(clock.now()).toBe(t0);
    expect(h.records().filter(isCall("/drain_listeners"))).toHaveLength(1);
    expect(h.lines.some((l) => l.includes("drained -> stopping (shutdown requested, already drained)"))).toBe(true);
    expect(h.readiness.blockers().map((b) => b.name)).toContain("terminating");
  });

  test("an Envoy ignoring SIGTERM is SIGKILLed after the grace", async () => {
    const clock = new ManualClock();
    h = await harness({ fakeEnv: { FAKE_ENVOY_HANG: "1" }, drain: { stopGraceMs: 300 }, options: { clock } });
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    const stopped = h.sup.shutdown({ immediate: true });
    await until(() => h!.records().some(isSignal("SIGTERM")), "SIGTERM reaching Envoy");
    await clock.whenPending(300);
    clock.advance(299);
    expect(h.lines.some((l) => l.includes("sending SIGKILL"))).toBe(false);
    clock.advance(1);
    await within(stopped, 5000, "shutdown");
    expect(h.lines.some((l) => l.includes("Envoy did not exit within 300ms of SIGTERM: sending SIGKILL"))).toBe(true);
    expect(h.lines.some((l) => l.includes("possibly OOM-killed"))).toBe(false); // we killed it
    expect(await h.sup.exited).toBe(0);
  });
});

describe("restart policy", () => {
  test("crash then recover: restarted with backoff, then runs", async () => {
    const clock = new ManualClock();
    h = await harness({ fakeEnv: { FAKE_ENVOY_EXIT_CODE: "3", FAKE_ENVOY_FAIL_FIRST: "2" }, options: { clock } });
    await h.sup.start(new AbortController().signal);
    const starts = () => h!.records().filter((r) => r.event === "start").length;
    // Backoff 50ms then 100ms: no restart until its delay has passed.
    await clock.whenPending(50);
    clock.advance(49);
    expect(h.sup.state).toBe("restarting");
    expect(starts()).toBe(1);
    clock.advance(1);
    await clock.whenPending(100);
    clock.advance(99);
    expect(h.sup.state).toBe("restarting");
    expect(starts()).toBe(2);
    clock.advance(1);
    await h.waitReady();
    expect(h.sup.state).toBe("running");
    expect(starts()).toBe(3);
    expect(h.lines.some((l) => l.includes("restarting Envoy in 50ms (restart 1 of 3"))).toBe(true);
    expect(h.lines.some((l) => l.includes("restarting Envoy in 100ms (restart 2 of 3"))).toBe(true);
    expect(h.readiness.isReady()).toBe(true);
    await h.sup.shutdown({ immediate: true });
  });

  test("budget exhausted: gives up with Envoy's exit code", async () => {
    h = await harness({ fakeEnv: { FAKE_ENVOY_EXIT_CODE: "3" } });
    await h.sup.start(new AbortController().signal);
    expect(await within(h.sup.exited, 10_000, "give up")).toBe(3);
    expect(h.records().filter((r) => r.event === "start")).toHaveLength(4); // first start + budget 3
    expect(h.lines.some((l) => l.includes("not restarting Envoy: restart budget exhausted: 3 restarts within 1m0s"))).toBe(true);
    expect(existsSync(h.bootstrap)).toBe(false);
  });

  test("Envoy exit under policy never (Istio's default): a SIGKILL ends the agent with exit code 0, Istio's OOM hint and error line", async () => {
    h = await harness({ options: { restart: { mode: "never", baseMs: 1, maxMs: 1, budget: 10, windowMs: 1000 } } });
    await h.sup.start(new AbortController().signal);
    await h.waitReady();
    await h.admin("/fake/crash?signal=SIGKILL");
    expect(await within(h.sup.exited, 5000, "exit")).toBe(0);
    expect(h.records().filter((r) => r.event === "start")).toHaveLength(1);
    expect(h.lines.some((l) => l.includes("was killed by SIGKILL: possibly OOM-killed"))).toBe(true);
    expect(h.lines.some((l) => l.includes("Envoy may have been out of memory killed. Check memory usage and limits."))).toBe(true);
    expect(h.lines.some((l) => l.includes("Envoy exited with error: signal: killed"))).toBe(true);
    expect(h.lines.some((l) => l.includes("not restarting Envoy"))).toBe(false);
  });

  test("Envoy exit under policy never: exit status 3 is logged as Istio's (no OOM hint) and the agent exits 0", async () => {
    h = await harness({ fakeEnv: { FAKE_ENVOY_EXIT_CODE: "3" }, options: { restart: { mode: "never", baseMs: 1, maxMs: 1, budget: 10, windowMs: 1000 } } });
    await h.sup.start(new AbortController().signal);
    expect(await within(h.sup.exited, 5000, "exit")).toBe(0);
    expect(h.lines.some((l) => l.includes("Envoy exited with error: exit status 3"))).toBe(true);
    expect(h.lines.some((l) => l.includes("out of memory"))).toBe(false);
    expect(h.records().filter((r) => r.event === "start")).toHaveLength(1);
  });

  test("a missing binary fails start with an error naming it", async () => {
    h = await harness({ options: { binaryPath: "/nonexistent/envoy" } });
    await expect(h.sup.start(new AbortController().signal)).rejects.toThrow(/\/nonexistent\/envoy/);
    expect(await h.sup.exited).toBe(1);
  });

  test("shutdown during the restart backoff stops without starting Envoy again", async () => {
    h = await harness({
      fakeEnv: { FAKE_ENVOY_EXIT_CODE: "1" },
      options: { restart: { mode: "on-failure", baseMs: 5000, maxMs: 5000, budget: 3, windowMs: 60_000 } },
    });
    await h.sup.start(new AbortController().signal);
    const deadline = Date.now() + 5000;
    while (h.sup.state !== "restarting" && Date.now() < deadline) await Bun.sleep(20);
    expect(h.sup.state).toBe("restarting");
    expect(h.readiness.blockers().map((b) => b.name)).toContain("envoy restarting");
    await within(h.sup.shutdown(), 3000, "shutdown");
    expect(await h.sup.exited).toBe(0);
    expect(h.records().filter((r) => r.event === "start")).toHaveLength(1);
  });
});
