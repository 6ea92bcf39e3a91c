// EnvoySupervisor's hot-restart epochs in process (fake launcher, manual clock; the watched file is
// real and polled every few milliseconds): epoch numbering, at most two epochs, the newest epoch's
// crash taking the older one down and starting over at epoch 0, changes ignored unless running, and
// the reaper told which pids are Envoy's. Found by mutation testing (npm run mutate -- envoy-supervisor).

import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProcEntry } from "../../src/envoy/reaper.ts";
import { fakeSupervisor, until, type Fake, type FakeOptions } from "./mutants-supervisor-harness.ts";

let f: Fake | undefined;
const dirs: string[] = [];
afterEach(async () => {
  if (f && f.sup.state !== "exited" && f.sup.state !== "idle") {
    void f.sup.shutdown({ immediate: true });
    await f.sup.shutdown({ immediate: true }); // SIGKILL for an epoch that ignores SIGTERM
  }
  f?.cleanup();
  f = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function hot(o: FakeOptions = {}): Promise<{ f: Fake; cert: string; key: string }> {
  const dir = mkdtempSync(join(tmpdir(), "envoy-mut-hot-"));
  dirs.push(dir);
  const cert = join(dir, "cert-chain.pem");
  const key = join(dir, "key.pem");
  writeFileSync(cert, "0");
  writeFileSync(key, "0");
  f = fakeSupervisor({ ...o, options: { hotRestart: { watchFiles: [cert, key], pollIntervalMs: 2, parentShutdownS: 60 }, ...o.options } });
  await f.sup.start(new AbortController().signal);
  return { f, cert, key };
}

const epochArgs = (f: Fake, i: number) => {
  const a = f.procs[i]!.spec.args;
  const at = a.indexOf("--restart-epoch");
  return a.slice(at, at + 4);
};

describe("hot restart", () => {
  test("a change starts epoch N+1 with Envoy's hot-restart flags; a third epoch first stops the oldest", async () => {
    const { f, cert, key } = await hot();
    expect(f.has(`info hot restart enabled: a change to ${cert}, ${key} starts a new Envoy epoch`)).toBe(true);
    expect(epochArgs(f, 0)).toEqual(["--restart-epoch", "0", "--parent-shutdown-time-s", "60"]);
    expect(f.procs[0]!.spec.args).not.toContain("--disable-hot-restart");

    writeFileSync(cert, "1");
    // Polled every 2 ms as configured (not the 1 s default): seen twice well within 1.5 s.
    await until(() => f.procs.length === 2, "epoch 1", 1500);
    expect(epochArgs(f, 1)).toEqual(["--restart-epoch", "1", "--parent-shutdown-time-s", "60"]);
    expect(f.has(`info hot restart: ${cert} changed; starting Envoy epoch 1`)).toBe(true);
    expect(f.has("debug envoy: running (Envoy epoch 1 started, pid 1002)")).toBe(true);
    expect(f.sup.pids).toEqual([1001, 1002]);
    expect(f.procs[0]!.signals).toEqual([]); // Envoy's child retires its parent, not the agent
    expect(f.lines().some((l) => l.includes("first (at most two epochs"))).toBe(false); // one epoch was running

    writeFileSync(cert, "2");
    await until(() => f.procs.length === 3, "epoch 2");
    expect(epochArgs(f, 2)).toEqual(["--restart-epoch", "2", "--parent-shutdown-time-s", "60"]);
    expect(f.has("info hot restart: stopping epoch 0 first (at most two epochs run at once)")).toBe(true);
    expect(f.events.indexOf("exit 1001 0")).toBeLessThan(f.events.indexOf("spawn 1003"));
    expect(f.events.indexOf("SIGTERM 1001")).toBeGreaterThan(0);
    expect(f.procs[1]!.signals).toEqual([]);
    expect(f.has("info Envoy epoch 0 (pid 1001) exited normally")).toBe(true);
    expect(f.has("debug envoy: running (Envoy epoch 0 ended: exit code 0; other epochs still running)")).toBe(true);
    expect(f.sup.pids).toEqual([1002, 1003]);
    expect(f.sup.state).toBe("running");
  });

  test("the parent epoch ending on its own is normal; the supervisor ends with the last epoch", async () => {
    const { f, cert } = await hot({ restart: { mode: "never" } });
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    f.procs[0]!.exit({ code: 0, signal: null });
    await until(() => f.sup.pids.length === 1, "epoch 0 gone");
    expect(f.sup.state).toBe("running");
    expect(f.procs[1]!.signals).toEqual([]);
    f.procs[1]!.exit({ code: 0, signal: null });
    expect(await f.sup.exited).toBe(0);
    expect(f.has("info Envoy epoch 1 (pid 1002) exited normally")).toBe(true);
  });

  test("the newest epoch exiting 0 while the parent runs stops nothing; the parent's exit then ends the agent", async () => {
    const { f, cert } = await hot();
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    f.procs[1]!.exit({ code: 0, signal: null });
    await until(() => f.sup.pids.length === 1, "epoch 1 gone");
    expect(f.has("debug envoy: running (Envoy epoch 1 ended: exit code 0; other epochs still running)")).toBe(true);
    expect(f.procs[0]!.signals).toEqual([]);
    expect(f.lines().some((l) => l.includes("newest Envoy epoch failed"))).toBe(false);
    f.procs[0]!.exit({ code: 0, signal: null });
    expect(await f.sup.exited).toBe(0);
  });

  test("an older epoch crashing while the newest runs is not a restart", async () => {
    const { f, cert } = await hot();
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    f.procs[0]!.crash(3);
    await until(() => f.sup.pids.length === 1, "epoch 0 gone");
    expect(f.sup.state).toBe("running");
    expect(f.procs[1]!.signals).toEqual([]);
    expect(f.clock.pending()).toBe(0);
    // The newest epoch's clean exit decides: the agent ends with 0, not the old epoch's 3.
    f.procs[1]!.exit({ code: 0, signal: null });
    expect(await f.sup.exited).toBe(0);
  });

  test("the newest epoch crashing stops the older one, and Envoy starts over at epoch 0 after the backoff", async () => {
    const { f, cert } = await hot({ onTerm: "ignore" });
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    f.procs[1]!.crash(3);
    await until(() => f.procs[0]!.signals.length === 1, "SIGTERM to epoch 0");
    expect(f.has("warn newest Envoy epoch failed; stopping the older epochs before starting over")).toBe(true);
    expect(f.has("error Envoy epoch 1 (pid 1002) exited with exit code 3")).toBe(true);
    expect(f.sup.state).toBe("running");
    f.procs[0]!.exit({ code: 0, signal: null }); // the parent exits 0 on SIGTERM; the newest's crash decides
    await f.clock.whenPending(1000);
    expect(f.sup.state).toBe("restarting");
    f.clock.advance(1000);
    await until(() => f.procs.length === 3, "the restart");
    expect(epochArgs(f, 2)).toEqual(["--restart-epoch", "0", "--parent-shutdown-time-s", "60"]);
  });

  test("a newest epoch crashing while stopping does not stop the others again", async () => {
    const { f, cert } = await hot({ onTerm: "ignore" });
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    void f.sup.shutdown({ immediate: true });
    expect(f.procs.map((p) => p.signals)).toEqual([["SIGTERM"], ["SIGTERM"]]);
    f.procs[1]!.crash(3);
    f.procs[0]!.exit({ code: 0, signal: null });
    expect(await f.sup.exited).toBe(0);
    expect(f.procs.map((p) => p.signals)).toEqual([["SIGTERM"], ["SIGTERM"]]);
    expect(f.lines().some((l) => l.includes("newest Envoy epoch failed"))).toBe(false);
  });

  test("stopping two epochs: the one that exited in time gets no SIGKILL, the one that hung does", async () => {
    const { f, cert } = await hot({ onTerm: "ignore" });
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    void f.sup.shutdown({ immediate: true });
    await f.clock.whenPending(1500);
    f.procs[0]!.exit({ code: 0, signal: null });
    f.clock.advance(1500);
    expect(await f.sup.exited).toBe(0);
    expect(f.procs.map((p) => p.signals)).toEqual([["SIGTERM"], ["SIGTERM", "SIGKILL"]]);
  });

  test("a shutdown while a hot restart waits for the oldest epoch to stop: no new epoch is started", async () => {
    const { f, cert } = await hot({ onTerm: "ignore" });
    writeFileSync(cert, "1");
    await until(() => f.procs.length === 2, "epoch 1");
    writeFileSync(cert, "2");
    await until(() => f.procs[0]!.signals.length === 1, "epoch 0 told to stop");
    await f.clock.whenPending(1500);
    void f.sup.shutdown(); // draining; epoch 1 keeps serving during the drain
    await f.clock.whenPending(5000);
    f.clock.advance(1500); // epoch 0's grace: SIGKILL, and the hot restart resumes
    await until(() => f.sup.pids.length === 1, "epoch 0 gone");
    // A later change is ignored (the sentinel: the hot restart chain has long run by then).
    writeFileSync(cert, "3");
    await until(() => f.lines().some((l) => l.startsWith("info ignoring change to")), "the ignored change");
    expect(f.procs).toHaveLength(2);
    expect(f.sup.state).toBe("draining");
  });

  test("a hot restart that cannot spawn leaves the running epoch serving", async () => {
    const { f, cert } = await hot({ failSpawns: [2] });
    writeFileSync(cert, "1");
    await until(() => f.events.includes("spawn failed 2"), "the failed spawn");
    expect(f.sup.state).toBe("running");
    expect(f.sup.pids).toEqual([1001]);
    expect(f.clock.pending()).toBe(0);
    writeFileSync(cert, "2");
    await until(() => f.procs.length === 2, "the next epoch");
    expect(epochArgs(f, 1)).toEqual(["--restart-epoch", "1", "--parent-shutdown-time-s", "60"]);
  });

  test("a change while not running is ignored and logged", async () => {
    const { f, cert } = await hot();
    void f.sup.shutdown();
    await f.clock.whenPending(5000);
    writeFileSync(cert, "1");
    await until(() => f.lines().some((l) => l.startsWith("info ignoring change to")), "the ignored change");
    expect(f.has(`info ignoring change to ${cert}: Envoy is draining`)).toBe(true);
    expect(f.procs).toHaveLength(1);
  });

  test("no watched files: no watcher", async () => {
    f = fakeSupervisor({ options: { hotRestart: { watchFiles: [], parentShutdownS: 60 } } });
    await f.sup.start(new AbortController().signal);
    expect(f.lines().some((l) => l.includes("hot restart enabled"))).toBe(false);
    expect(epochArgs(f, 0)).toEqual(["--restart-epoch", "0", "--parent-shutdown-time-s", "60"]);
  });
});

describe("reaper", () => {
  test("orphaned zombies are reaped, Envoy's own pids never", async () => {
    const waited: number[] = [];
    const zombie = (pid: number): ProcEntry => ({ pid, ppid: 1, state: "Z", startTime: "7" });
    f = fakeSupervisor({
      options: { reaper: { selfPid: 1, intervalMs: 1, list: () => [zombie(1001), zombie(4242)], waitpid: (pid) => (waited.push(pid), pid) } },
    });
    await f.sup.start(new AbortController().signal);
    await until(() => waited.length > 0, "a reaped orphan");
    expect(waited).toEqual([4242]);
  });
});
