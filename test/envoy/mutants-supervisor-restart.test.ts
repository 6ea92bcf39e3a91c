// EnvoySupervisor's restart paths in process (fake launcher, manual clock): the backoff on the
// clock, the restart history kept across restarts, the `envoy restarting` blocker raised again on
// every crash, spawn failures counted as crashes after the first start, the exit codes and
// Istio's exit lines. Found by mutation testing (npm run mutate -- envoy-supervisor).

import { afterEach, describe, expect, test } from "bun:test";
import { EnvoyError } from "../../src/envoy/errors.ts";
import { settled, startRunning, until, type Fake, type FakeOptions } from "./mutants-supervisor-harness.ts";

let f: Fake | undefined;
afterEach(() => {
  f?.cleanup();
  f = undefined;
});

const running = (o: FakeOptions = {}): Promise<Fake> => startRunning(o, (x) => (f = x));

/** Crash the newest Envoy and wait for the restart to be scheduled with `delayMs`. */
async function crashAndWait(f: Fake, delayMs: number, code = 3): Promise<void> {
  f.procs.at(-1)!.crash(code);
  await f.clock.whenPending(delayMs);
  expect(f.sup.state).toBe("restarting");
}

/** Move the clock by `ms` and wait for Envoy start number `n`. */
async function advanceToStart(f: Fake, ms: number, n: number): Promise<void> {
  f.clock.advance(ms);
  await until(() => f.procs.length === n && f.sup.state === "running", `Envoy start ${n}`);
}

describe("on-failure", () => {
  test("backoff doubles per restart in the window, the blocker is raised on every crash and cleared on every start", async () => {
    await running();
    await crashAndWait(f!, 1000);
    expect(f!.has("error Envoy (pid 1001) exited with exit code 3")).toBe(true);
    expect(f!.fields("Envoy (pid 1001) exited with exit code 3")).toEqual({ pid: 1001 });
    expect(f!.has("info envoy: running -> restarting (Envoy epoch 0 ended: exit code 3)")).toBe(true);
    expect(f!.has("info restarting Envoy in 1s (restart 1 of 3 within 1m0s)")).toBe(true);
    expect(f!.blockers()).toEqual(["envoy restarting"]);
    f!.clock.advance(999);
    expect(f!.clock.pendingMs()).toEqual([1000]); // not yet due
    expect(f!.procs).toHaveLength(1);
    await advanceToStart(f!, 1, 2);
    expect(f!.has("info envoy: restarting -> starting (restart-due)")).toBe(true);
    expect(f!.readiness.isReady()).toBe(true);
    expect(f!.procs[1]!.spec.args).toContain("--disable-hot-restart");

    await crashAndWait(f!, 2000);
    expect(f!.blockers()).toEqual(["envoy restarting"]); // raised again after having been cleared
    expect(f!.has("info restarting Envoy in 2s (restart 2 of 3 within 1m0s)")).toBe(true);
    await advanceToStart(f!, 2000, 3);
    expect(f!.readiness.isReady()).toBe(true);

    await crashAndWait(f!, 4000);
    await advanceToStart(f!, 4000, 4);

    f!.procs[3]!.crash(3);
    expect(await f!.sup.exited).toBe(3);
    expect(f!.has("error not restarting Envoy: restart budget exhausted: 3 restarts within 1m0s (ENVOY_RESTART_BUDGET=3)")).toBe(true);
    expect(f!.has("info envoy: running -> exited (Envoy epoch 0 ended: exit code 3)")).toBe(true);
    const err = await f!.sup.failed;
    expect(err).toBeInstanceOf(EnvoyError);
    expect(err.message).toBe("Envoy exited on its own (exit code 3)");
    expect((err as EnvoyError).op).toBe("exit");
    expect(f!.lines().at(-1)).toBe("info envoy supervisor done; Envoy exit code 3");
  });

  test("restarts older than the window no longer count: the backoff starts over", async () => {
    await running();
    await crashAndWait(f!, 1000);
    await advanceToStart(f!, 1000, 2);
    f!.clock.advance(60_000);
    await crashAndWait(f!, 1000);
    expect(f!.has("info restarting Envoy in 1s (restart 1 of 3 within 1m0s)")).toBe(true);
    expect(f!.lines().filter((l) => l.includes("restart 2 of 3"))).toEqual([]);
  });

  test("a signal death is a crash: restarted, and when the budget is out the exit code is 128 + the signal", async () => {
    await running({ restart: { budget: 1 } });
    f!.procs[0]!.exit({ code: null, signal: "SIGSEGV" });
    await f!.clock.whenPending(1000);
    expect(f!.has("warn Envoy (pid 1001) was killed by signal SIGSEGV")).toBe(true);
    expect(f!.fields("Envoy (pid 1001) was killed by signal SIGSEGV")).toEqual({ pid: 1001 });
    await advanceToStart(f!, 1000, 2);
    f!.procs[1]!.exit({ code: null, signal: "SIGSEGV" });
    expect(await f!.sup.exited).toBe(139);
  });

  test("a SIGKILL we did not send is reported as a possible OOM kill", async () => {
    await running();
    f!.procs[0]!.exit({ code: null, signal: "SIGKILL" });
    await f!.clock.whenPending(1000);
    expect(f!.has("warn Envoy (pid 1001) was killed by SIGKILL: possibly OOM-killed; check memory usage and limits")).toBe(true);
    expect(f!.fields("Envoy (pid 1001) was killed by SIGKILL")).toEqual({ pid: 1001 });
  });

  test("Envoy exiting 0 on its own is not restarted: the agent ends with 0 and reports it", async () => {
    await running();
    f!.procs[0]!.exit({ code: 0, signal: null });
    expect(await f!.sup.exited).toBe(0);
    expect(f!.procs).toHaveLength(1);
    expect(f!.has("info Envoy (pid 1001) exited normally")).toBe(true);
    expect(f!.has("info Envoy exited normally")).toBe(true);
    const err = await f!.sup.failed;
    expect(err.message).toBe("Envoy exited on its own (exit code 0)");
    expect((err as EnvoyError).op).toBe("exit");
  });

  test("a restart that cannot spawn counts as a crash: backed off again, then running", async () => {
    await running({ failSpawns: [2] });
    await crashAndWait(f!, 1000);
    f!.clock.advance(1000);
    await until(() => f!.events.at(-1) === "spawn failed 2", "the failed spawn");
    expect(f!.has("info envoy: starting -> restarting (Envoy epoch 0 ended: spawn failed)")).toBe(true);
    await f!.clock.whenPending(2000);
    expect(f!.has("info restarting Envoy in 2s (restart 2 of 3 within 1m0s)")).toBe(true);
    expect(f!.blockers()).toEqual(["envoy restarting"]);
    await advanceToStart(f!, 2000, 2);
    expect(f!.sup.state).toBe("running");
    expect(f!.readiness.isReady()).toBe(true);
  });

  test("restarts that cannot spawn use up the budget: exit code 1", async () => {
    await running({ failSpawns: [2, 3], restart: { budget: 2 } });
    await crashAndWait(f!, 1000);
    f!.clock.advance(1000);
    await f!.clock.whenPending(2000);
    f!.clock.advance(2000);
    expect(await f!.sup.exited).toBe(1);
    expect(f!.events.filter((e) => e.startsWith("spawn failed"))).toEqual(["spawn failed 2", "spawn failed 3"]);
    expect(f!.has("info envoy: starting -> exited (Envoy epoch 0 ended: spawn failed)")).toBe(true);
  });

  test("shutdown during the backoff: no new Envoy, the backoff is cancelled, exit 0", async () => {
    await running();
    await crashAndWait(f!, 1000);
    await f!.sup.shutdown();
    expect(await f!.sup.exited).toBe(0);
    expect(f!.clock.pending()).toBe(0);
    expect(f!.procs).toHaveLength(1);
    expect(f!.has("info envoy: restarting -> stopping (shutdown requested)")).toBe(true);
    expect(f!.has("info envoy: stopping -> exited (Envoy epoch -1 ended: no Envoy running)")).toBe(true);
    expect(await settled(f!.sup.failed)).toBe(false);
  });

  test("POST /drain during the backoff: the restart that falls due is ignored; a later shutdown ends with 0", async () => {
    await running();
    await crashAndWait(f!, 1000);
    await f!.sup.drain();
    expect(f!.sup.state).toBe("drained");
    f!.clock.advance(1000);
    await until(() => f!.has("debug envoy: ignored restart-due in state drained: no restart pending in state drained"), "the restart falling due");
    expect(f!.has("debug envoy: ignored restart-due in state drained: no restart pending in state drained")).toBe(true);
    expect(f!.procs).toHaveLength(1);
    await f!.sup.shutdown();
    expect(await f!.sup.exited).toBe(0);
  });
});

describe("never (Istio's default)", () => {
  test("a crash ends the agent with 0, Istio's error line, and a failure report", async () => {
    await running({ restart: { mode: "never" } });
    f!.procs[0]!.crash(3);
    expect(await f!.sup.exited).toBe(0);
    expect(f!.procs).toHaveLength(1);
    expect(f!.has("error Envoy exited with error: exit status 3")).toBe(true);
    expect(f!.lines().some((l) => l.includes("not restarting"))).toBe(false);
    expect(f!.lines().some((l) => l.includes("out of memory"))).toBe(false);
    expect((await f!.sup.failed).message).toBe("Envoy exited on its own (exit code 3)");
    expect(f!.clock.pending()).toBe(0);
  });

  test("an outside SIGKILL: Istio's OOM hint before its error line", async () => {
    await running({ restart: { mode: "never" } });
    f!.procs[0]!.exit({ code: null, signal: "SIGKILL" });
    expect(await f!.sup.exited).toBe(0);
    const l = f!.lines();
    const hint = l.indexOf("warn Envoy may have been out of memory killed. Check memory usage and limits.");
    expect(hint).toBeGreaterThan(0);
    expect(l[hint + 1]).toBe("error Envoy exited with error: signal: killed");
    expect((await f!.sup.failed).message).toBe("Envoy exited on its own (signal SIGKILL)");
  });

  test("exit 0 on its own: info line, exit 0", async () => {
    await running({ restart: { mode: "never" } });
    f!.procs[0]!.exit({ code: 0, signal: null });
    expect(await f!.sup.exited).toBe(0);
    expect(f!.has("info Envoy exited normally")).toBe(true);
    expect(f!.lines().some((l) => l.includes("Envoy exited with error"))).toBe(false);
  });
});

describe("exit while stopping", () => {
  test("a crash during the drain wait is not restarted and ends the agent with 0", async () => {
    await running();
    void f!.sup.shutdown();
    await f!.clock.whenPending(5000);
    f!.procs[0]!.crash(3);
    expect(await f!.sup.exited).toBe(0);
    expect(f!.procs).toHaveLength(1);
    expect(f!.has("warn Envoy (pid 1001) exited with exit code 3")).toBe(true);
    expect(f!.lines().some((l) => l.includes("Envoy exited with error"))).toBe(false);
    expect(await settled(f!.sup.failed)).toBe(false);
    await until(() => f!.clock.pending() === 0, "the drain wait cancelled");
  });
});
