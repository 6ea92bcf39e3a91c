import { expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { ChildReaper, parseProcStat, type ProcEntry } from "../../src/envoy/reaper.ts";
import { testRequiring } from "../support/requires.ts";
import { ManualClock } from "../../src/lib/clock.ts";

test("parseProcStat handles command names with spaces and parentheses", () => {
  const line = "4242 (we(ird) name) Z 1 4242 4242 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0 18446744073709551615";
  expect(parseProcStat(line)).toEqual({ pid: 4242, ppid: 1, state: "Z", startTime: "987654" });
  expect(parseProcStat("garbage")).toBeUndefined();
});

test("only zombies of ours, not our own children, seen twice are reaped", () => {
  let procs: ProcEntry[] = [];
  const waited: number[] = [];
  const reaper = new ChildReaper({
    log: silentLogger(),
    selfPid: 1,
    isOwnChild: (pid) => pid === 10,
    list: () => procs,
    waitpid: (pid) => {
      waited.push(pid);
      return pid;
    },
  });
  procs = [
    { pid: 10, ppid: 1, state: "Z", startTime: "1" }, // our Envoy: Bun collects it
    { pid: 11, ppid: 1, state: "Z", startTime: "2" }, // orphan
    { pid: 12, ppid: 1, state: "S", startTime: "3" }, // running
    { pid: 13, ppid: 5, state: "Z", startTime: "4" }, // someone else's
  ];
  expect(reaper.scan()).toEqual([]); // first sighting: maybe a Bun child about to be collected
  expect(reaper.scan()).toEqual([11]);
  expect(waited).toEqual([11]);
  // A reused pid with a new start time counts as a new first sighting.
  procs = [{ pid: 11, ppid: 1, state: "Z", startTime: "9" }];
  expect(reaper.scan()).toEqual([]);
  // A zombie that disappears between scans (collected by Bun) is never waited for.
  procs = [{ pid: 20, ppid: 1, state: "Z", startTime: "1" }];
  reaper.scan();
  procs = [];
  reaper.scan();
  procs = [{ pid: 20, ppid: 1, state: "Z", startTime: "1" }];
  expect(reaper.scan()).toEqual([]);
  expect(reaper.reaped).toBe(1);
});

test("the background scan runs on the injected clock, every intervalMs, until the signal aborts", async () => {
  const clock = new ManualClock(0);
  const procs: ProcEntry[] = [{ pid: 11, ppid: 1, state: "Z", startTime: "2" }];
  const waited: number[] = [];
  let scans = 0;
  const reaper = new ChildReaper({
    log: silentLogger(),
    selfPid: 1,
    clock,
    intervalMs: 250,
    isOwnChild: () => false,
    list: () => (scans++, procs),
    waitpid: (pid) => (waited.push(pid), pid),
  });
  const stop = new AbortController();
  reaper.start(stop.signal);
  await clock.whenPending(250);
  expect(scans).toBe(0); // nothing before the first interval
  clock.advance(249);
  expect(scans).toBe(0);
  clock.advance(1);
  await clock.whenPending(250); // the loop went round: one scan, the next sleep set
  expect(scans).toBe(1);
  expect(waited).toEqual([]); // first sighting
  clock.advance(250);
  await clock.whenPending(250);
  expect(scans).toBe(2);
  expect(waited).toEqual([11]);
  stop.abort();
  expect(clock.pending()).toBe(0); // the pending sleep was cancelled: no more scans
  clock.advance(10_000);
  expect(scans).toBe(2);
});

async function runAsPid1(mode: "reap" | "noreap"): Promise<{ pid: number; zombies: number[]; ownChildExit: number; envoyRunning: boolean }> {
  const p = Bun.spawn(["unshare", "--pid", "--fork", "--mount-proc", process.execPath, `${import.meta.dir}/pid1-main.ts`, mode], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`pid1-main ${mode} exited ${code}: ${err}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

testRequiring(
  { root: true, tools: ["unshare"], apt: ["util-linux"] },
  "as PID 1 in a new PID namespace, orphaned grandchildren are reaped",
  async () => {
    const [reaped, control] = await Promise.all([runAsPid1("reap"), runAsPid1("noreap")]);
    expect(reaped.pid).toBe(1);
    expect(reaped.envoyRunning).toBe(true);
    expect(reaped.ownChildExit).toBe(7); // Bun still collected its own child
    expect(reaped.zombies).toEqual([]);
    // Without the reaper the orphan stays a zombie: the check above can fail.
    expect(control.pid).toBe(1);
    expect(control.zombies.length).toBeGreaterThanOrEqual(1);
  },
  20_000,
);
