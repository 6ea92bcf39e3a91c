// EnvoySupervisor's start, drain and stop paths in process (fake launcher, fake admin, manual
// clock): the order of calls, the once-only guards and the log lines, asserted exactly. Found by
// mutation testing (npm run mutate -- envoy-supervisor); supervisor.test.ts covers the same paths
// with a real child process, too slowly to run once per mutant.

import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvoyError } from "../../src/envoy/errors.ts";
import { BINARY, fakeSupervisor, settled, startRunning, until, type Fake, type FakeOptions } from "./mutants-supervisor-harness.ts";

let f: Fake | undefined;
afterEach(() => {
  f?.cleanup();
  f = undefined;
});

const running = (o: FakeOptions = {}): Promise<Fake> => startRunning(o, (x) => (f = x));

describe("start", () => {
  test("logs the drain plan and the on-failure policy, stops a stale Envoy first, records the pid, then runs", async () => {
    f = fakeSupervisor();
    expect(f.sup.name).toBe("envoy");
    expect(f.sup.state).toBe("idle");
    await f.sup.start(new AbortController().signal);
    expect(f.sup.state).toBe("running");
    expect(f.events).toEqual(["pidfile stopStale", "spawn 1001", `pidfile record 1001 ${BINARY}`]);
    expect(f.lines().slice(0, 2)).toEqual([
      "info drain plan on SIGTERM: POST /drain_listeners?inboundonly&graceful; wait terminationDrainDuration 5s; then SIGTERM Envoy, SIGKILL after 1.5s; a second signal skips the wait",
      "info restart policy: on-failure, backoff 1s doubling to 8s, at most 3 restarts within 1m0s",
    ]);
    expect(f.has("info envoy: idle -> starting (start)")).toBe(true);
    expect(f.has("info envoy: starting -> running (Envoy epoch 0 started, pid 1001)")).toBe(true);
    const spec = f.procs[0]!.spec;
    expect(spec.binary).toBe(BINARY);
    expect(spec.env).toEqual({ FAKE: "1" });
    expect(spec.args.slice(0, 2)).toEqual(["-c", f.bootstrap]);
    expect(spec.args).toContain("--disable-hot-restart");
    expect(spec).not.toHaveProperty("uid");
    expect(f.has(`info Envoy command: [${spec.args.join(" ")}]`)).toBe(true);
    expect(f.sup.pids).toEqual([1001]);
    expect(f.sup.ownsPid(1001)).toBe(true);
    expect(f.sup.ownsPid(1002)).toBe(false);
    expect(f.readiness.isReady()).toBe(true);
  });

  test("without a pid file or a reaper: started and stopped all the same, no reaper line", async () => {
    f = fakeSupervisor({ options: { pidFile: undefined } });
    await f.sup.start(new AbortController().signal);
    await f.sup.shutdown({ immediate: true });
    expect(await f.sup.exited).toBe(0);
    expect(f.events.filter((e) => e.startsWith("pidfile"))).toEqual([]);
    expect(f.lines().some((l) => l.includes("reaping orphaned"))).toBe(false);
  });

  test("policy never: Istio's line; runAs is passed to the launcher", async () => {
    f = fakeSupervisor({ restart: { mode: "never" }, options: { runAs: { uid: 1337, gid: 1337 } } });
    await f.sup.start(new AbortController().signal);
    expect(f.lines()[1]).toBe(
      "info restart policy: never (the agent exits when Envoy exits, as Istio's; ENVOY_RESTART_POLICY=on-failure restarts it in-process)",
    );
    expect(f.procs[0]!.spec.uid).toBe(1337);
    expect(f.procs[0]!.spec.gid).toBe(1337);
  });

  test("a drain plan longer than the pod's grace period is warned about at start; one that fits is not", async () => {
    f = fakeSupervisor({ drain: { terminationGraceSeconds: 2 } });
    await f.sup.start(new AbortController().signal);
    expect(f.lines()[1]).toStartWith("warn drain plan needs up to ");
    expect(f.lines()[1]).toContain("more than TERMINATION_GRACE_PERIOD_SECONDS 2s");
    f.cleanup();
    f = fakeSupervisor({ drain: { terminationGraceSeconds: 3600 } });
    await f.sup.start(new AbortController().signal);
    expect(f.lines()[1]).toStartWith("info restart policy:");
    expect(f.lines().some((l) => l.startsWith("warn"))).toBe(false);
  });

  test("a second start is refused, naming the state", async () => {
    await running();
    const err = await f!.sup.start(new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EnvoyError);
    expect((err as EnvoyError).message).toBe("envoy supervisor already started (state running)");
    expect((err as EnvoyError).op).toBe("start");
    expect(f!.procs).toHaveLength(1);
  });

  test("a first start that cannot spawn fails with the launcher's error, exit code 1, no restart even under on-failure", async () => {
    f = fakeSupervisor({ failSpawns: [1] });
    const err = await f.sup.start(new AbortController().signal).catch((e: unknown) => e);
    expect((err as EnvoyError).message).toBe(`Envoy did not start: cannot start Envoy binary ${BINARY}: attempt 1 failed`);
    expect((err as EnvoyError).op).toBe("spawn");
    expect(await f.sup.exited).toBe(1);
    expect(f.sup.state).toBe("exited");
    expect(f.has(`error cannot start Envoy binary ${BINARY}: attempt 1 failed`)).toBe(true);
    expect(f.has("info envoy: starting -> exited (Envoy epoch 0 ended: spawn failed)")).toBe(true);
    expect(f.clock.pending()).toBe(0); // no restart scheduled
    expect(f.events).toEqual(["pidfile stopStale", "spawn failed 1", "pidfile clear"]);
    expect(existsSync(f.bootstrap)).toBe(false);
  });

  test("an already aborted start signal shuts down at once; a later abort shuts down then", async () => {
    f = fakeSupervisor();
    const ac = new AbortController();
    ac.abort();
    await f.sup.start(ac.signal);
    expect(f.sup.state).toBe("draining");
    f.cleanup();
    f = fakeSupervisor();
    const ac2 = new AbortController();
    await f.sup.start(ac2.signal);
    expect(f.sup.state).toBe("running");
    ac2.abort();
    expect(f.sup.state).toBe("draining");
    expect(f.blockers()).toEqual(["terminating"]);
  });
});

describe("graceful shutdown", () => {
  test("terminating, drain_listeners, terminationDrainDuration on the clock, SIGTERM, exit 0, files cleaned", async () => {
    await running();
    const done = f!.sup.shutdown();
    expect(f!.sup.state).toBe("draining");
    expect(f!.blockers()).toEqual(["terminating"]);
    await f!.clock.whenPending(5000);
    expect(f!.has("info Agent draining Proxy for termination")).toBe(true);
    expect(f!.has("info Graceful termination period is 5s, starting...")).toBe(true);
    f!.clock.advance(4999);
    expect(f!.procs[0]!.signals).toEqual([]);
    f!.clock.advance(1);
    await done;
    expect(await f!.sup.exited).toBe(0);
    expect(f!.events).toEqual([
      "pidfile stopStale",
      "spawn 1001",
      `pidfile record 1001 ${BINARY}`,
      "drain_listeners inboundOnly=true skipExit=false",
      "SIGTERM 1001",
      "exit 1001 0",
      "pidfile clear",
    ]);
    expect(f!.has("info envoy: running -> draining (shutdown requested)")).toBe(true);
    expect(f!.has("info envoy: draining -> stopping (graceful termination period complete)")).toBe(true);
    expect(f!.has("info Envoy (pid 1001) exited normally")).toBe(true);
    expect(f!.fields("Envoy (pid 1001) exited normally")).toEqual({ pid: 1001 });
    expect(f!.has("info envoy: stopping -> exited (Envoy epoch 0 ended: exit code 0)")).toBe(true);
    expect(f!.lines().at(-1)).toBe("info envoy supervisor done; Envoy exit code 0");
    expect(existsSync(f!.bootstrap)).toBe(false);
    await until(() => f!.clock.pending() === 0, "the SIGKILL grace timer cancelled once Envoy exited");
    expect(await settled(f!.sup.failed)).toBe(false); // asked to stop: not a failure
    expect(f!.sup.pids).toEqual([]);
    expect(f!.sup.ownsPid(1001)).toBe(false);
  });

  test("a router drains all listeners; a failing drain_listeners is logged and the drain goes on", async () => {
    await running({ drain: { sidecar: false }, drainError: new Error("connection refused") });
    void f!.sup.shutdown();
    await f!.clock.whenPending(5000);
    expect(f!.events).toContain("drain_listeners inboundOnly=false skipExit=false");
    expect(f!.has("warn Error in invoking drain listeners endpoint: connection refused")).toBe(true);
    f!.clock.advance(5000);
    expect(await f!.sup.exited).toBe(0);
  });

  test("EXIT_ON_ZERO_ACTIVE_CONNECTIONS: the supervisor's clock drives the polls", async () => {
    const active = (n: number) => `listener.0.0.0.0_8080.downstream_cx_active: ${n}`;
    await running({ drain: { exitOnZeroActiveConnections: true }, stats: [active(2), active(0)] });
    void f!.sup.shutdown();
    await f!.clock.whenPending(1000);
    f!.clock.advance(1000); // MINIMUM_DRAIN_DURATION
    await f!.clock.whenPending(1000);
    f!.clock.advance(1000); // first poll: 2 left
    await until(() => f!.has("info There are still 2 active connections"), "first poll");
    await f!.clock.whenPending(1000);
    f!.clock.advance(1000); // second poll: 0
    expect(await f!.sup.exited).toBe(0);
    expect(f!.has("info envoy: draining -> stopping (no more active connections)")).toBe(true);
  });

  test("a second request while draining cancels the wait and stops Envoy at once", async () => {
    await running();
    void f!.sup.shutdown();
    await f!.clock.whenPending(5000);
    await f!.sup.shutdown({ immediate: true });
    expect(await f!.sup.exited).toBe(0);
    expect(f!.clock.pendingMs()).not.toContain(5000);
    expect(f!.has("info envoy: draining -> stopping (shutdown requested, immediate)")).toBe(true);
    // The cancelled wait ends the drain too late to count: its drain-over is ignored.
    await until(() => f!.has("debug envoy: ignored drain-over in state exited: already exited"), "the cancelled drain wait's end");
    expect(f!.lines().filter((l) => l.includes("-> stopping"))).toHaveLength(1);
  });

  test("a third request while stopping SIGKILLs Envoy, which is not reported as an OOM kill", async () => {
    await running({ onTerm: "ignore" });
    void f!.sup.shutdown({ immediate: true });
    expect(f!.sup.state).toBe("stopping");
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM"]);
    await f!.sup.shutdown({ immediate: true });
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM", "SIGKILL"]);
    expect(f!.has("warn second shutdown request while stopping: killing Envoy now")).toBe(true);
    expect(f!.has("info Envoy (pid 1001) was killed by signal SIGKILL")).toBe(true);
    expect(f!.lines().some((l) => l.includes("OOM"))).toBe(false);
    expect(await f!.sup.exited).toBe(0);
  });

  test("a non-immediate request while stopping changes nothing", async () => {
    await running({ onTerm: "ignore" });
    void f!.sup.shutdown({ immediate: true });
    void f!.sup.shutdown();
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM"]);
    expect(f!.has("debug envoy: stopping (shutdown requested)")).toBe(true);
    f!.procs[0]!.exit({ code: 0, signal: null });
    expect(await f!.sup.exited).toBe(0);
  });

  test("an Envoy ignoring SIGTERM is SIGKILLed after the grace, not before", async () => {
    await running({ onTerm: "ignore" });
    void f!.sup.shutdown({ immediate: true });
    await f!.clock.whenPending(1500);
    f!.clock.advance(1499);
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM"]);
    f!.clock.advance(1);
    expect(await f!.sup.exited).toBe(0);
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM", "SIGKILL"]);
    expect(f!.has("warn Envoy did not exit within 1.5s of SIGTERM: sending SIGKILL")).toBe(true);
    expect(f!.lines().some((l) => l.includes("OOM"))).toBe(false);
  });

  test("a SIGKILL from outside after our SIGTERM is still reported as a possible OOM kill", async () => {
    await running({ onTerm: "ignore" });
    void f!.sup.shutdown({ immediate: true });
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM"]);
    f!.procs[0]!.exit({ code: null, signal: "SIGKILL" });
    expect(await f!.sup.exited).toBe(0);
    expect(f!.has("warn Envoy (pid 1001) was killed by SIGKILL: possibly OOM-killed; check memory usage and limits")).toBe(true);
  });

  test("an Envoy exiting at the very moment the grace ends gets no SIGKILL and no warning", async () => {
    await running({ onTerm: "ignore" });
    void f!.sup.shutdown({ immediate: true });
    await f!.clock.whenPending(1500);
    f!.clock.timer(1500, () => f!.procs[0]!.exit({ code: 0, signal: null })); // due with the grace timer, after it
    f!.clock.advance(1500);
    expect(await f!.sup.exited).toBe(0);
    // Every step from here is a promise reaction (the clock is manual, there is no I/O): one
    // macrotask later all of them have run, including the stop's own end after the grace.
    await new Promise((r) => setTimeout(r, 0));
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM"]);
    expect(f!.lines().some((l) => l.includes("sending SIGKILL"))).toBe(false);
  });

  test("an Envoy that dies of SIGTERM while stopping is logged at info, not as a failure", async () => {
    await running({ onTerm: "signal" });
    await f!.sup.shutdown({ immediate: true });
    expect(f!.has("info Envoy (pid 1001) was killed by signal SIGTERM")).toBe(true);
    expect(f!.fields("Envoy (pid 1001) was killed by signal SIGTERM")).toEqual({ pid: 1001 });
    expect(await f!.sup.exited).toBe(0);
  });

  test("an Envoy that exits non-zero while stopping is a warning and the exit code stays 0", async () => {
    await running({ onTerm: "ignore" });
    void f!.sup.shutdown({ immediate: true });
    f!.procs[0]!.crash(7);
    expect(await f!.sup.exited).toBe(0);
    expect(f!.has("warn Envoy (pid 1001) exited with exit code 7")).toBe(true);
    expect(f!.fields("Envoy (pid 1001) exited with exit code 7")).toEqual({ pid: 1001 });
    expect(f!.lines().some((l) => l.includes("Envoy exited with error"))).toBe(false);
  });
});

describe("POST /quitquitquit and POST /drain", () => {
  test("quit: no drain, SIGTERM at once, exit 0", async () => {
    await running();
    f!.sup.quit();
    expect(await f!.sup.exited).toBe(0);
    expect(f!.has("info quit requested: stopping Envoy without draining")).toBe(true);
    expect(f!.events.filter((e) => e.startsWith("drain_listeners"))).toEqual([]);
    expect(f!.procs[0]!.signals).toEqual(["SIGTERM"]);
    expect(f!.has("info envoy: running -> stopping (quit)")).toBe(true);
  });

  test("drain: skip_exit, readiness kept; the shutdown that follows stops without waiting", async () => {
    await running();
    await f!.sup.drain();
    expect(f!.sup.state).toBe("drained");
    expect(f!.events.at(-1)).toBe("drain_listeners inboundOnly=true skipExit=true");
    expect(f!.has("info Envoy listeners draining (skip_exit); a later SIGTERM stops Envoy immediately")).toBe(true);
    expect(f!.readiness.isReady()).toBe(true);
    await f!.sup.drain(); // a second drain is refused: no second call
    expect(f!.events.filter((e) => e.startsWith("drain_listeners"))).toHaveLength(1);
    expect(f!.has("debug envoy: ignored drain in state drained: cannot drain in state drained")).toBe(true);
    await f!.sup.shutdown();
    expect(f!.has("info envoy: drained -> stopping (shutdown requested, already drained)")).toBe(true);
    expect(f!.clock.pendingMs()).not.toContain(5000);
    expect(f!.blockers()).toEqual(["terminating"]);
    expect(await f!.sup.exited).toBe(0);
  });

  test("drain: a failing drain_listeners is a warning", async () => {
    await running({ drainError: new Error("admin down") });
    await f!.sup.drain();
    expect(f!.has("warn Error in invoking drain listeners endpoint: admin down")).toBe(true);
    expect(f!.has("info Envoy listeners draining (skip_exit); a later SIGTERM stops Envoy immediately")).toBe(false);
  });

  test("drain while draining makes no call (the sentinel: the drain wait is pending)", async () => {
    await running();
    void f!.sup.shutdown();
    await f!.clock.whenPending(5000);
    await f!.sup.drain();
    expect(f!.events.filter((e) => e.startsWith("drain_listeners"))).toEqual(["drain_listeners inboundOnly=true skipExit=false"]);
  });

  test("Envoy exiting while drained under policy never: Istio's exit code 0", async () => {
    await running({ restart: { mode: "never" } });
    await f!.sup.drain();
    f!.procs[0]!.crash(3);
    expect(await f!.sup.exited).toBe(0);
    expect(f!.has("error Envoy exited with error: exit status 3")).toBe(true);
  });

  test("Envoy exiting while drained is its own end: exit code passed on, not reported as a failure, no restart", async () => {
    await running();
    await f!.sup.drain();
    f!.procs[0]!.crash(3);
    expect(await f!.sup.exited).toBe(3);
    expect(f!.procs).toHaveLength(1);
    expect(await settled(f!.sup.failed)).toBe(false);
    expect(f!.has("error Envoy exited with error: exit status 3")).toBe(true);
    expect(f!.has("error Envoy (pid 1001) exited with exit code 3")).toBe(true);
  });
});

describe("the end", () => {
  test("a cleanup file that cannot be removed is a warning naming it; the others are still removed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "envoy-mut-cleanup-"));
    const blocked = join(dir, "dir-not-file");
    mkdirSync(blocked);
    writeFileSync(join(blocked, "x"), "x");
    const after = join(dir, "after.json");
    writeFileSync(after, "{}");
    try {
      await running({ options: { cleanupFiles: [blocked, after] } });
      await f!.sup.shutdown({ immediate: true });
      expect(await f!.sup.exited).toBe(0);
      expect(f!.lines().some((l) => l.startsWith(`warn Failed to delete config file ${blocked}: `))).toBe(true);
      expect(f!.fields(`Failed to delete config file ${blocked}: `)).toEqual({ path: blocked });
      expect(existsSync(after)).toBe(false);
      expect(f!.lines().at(-1)).toBe("info envoy supervisor done; Envoy exit code 0");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a cleanup file already gone is no warning", async () => {
    await running({ options: { cleanupFiles: ["/nonexistent/envoy-rev.json"] } });
    await f!.sup.shutdown({ immediate: true });
    expect(f!.lines().at(-1)).toBe("info envoy supervisor done; Envoy exit code 0");
    expect(f!.lines().some((l) => l.startsWith("warn"))).toBe(false);
  });

  test("stopped() resolves (with nothing) only once the supervisor has ended", async () => {
    await running();
    const stopped = f!.sup.stopped();
    expect(await settled(stopped)).toBe(false);
    await f!.sup.shutdown({ immediate: true });
    expect(await stopped).toBeUndefined();
  });

  test("shutdown before start ends at once with 0", async () => {
    f = fakeSupervisor();
    await f.sup.shutdown();
    expect(await f.sup.exited).toBe(0);
    expect(f.procs).toHaveLength(0);
    expect(f.sup.state).toBe("exited");
  });
});
