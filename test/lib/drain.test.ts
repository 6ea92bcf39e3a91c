import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { DrainTrigger, SHUTDOWN_BUDGET_MS } from "../../src/lib/drain.ts";

describe("DrainTrigger", () => {
  test("the one budget is Istio's 5s", () => {
    expect(SHUTDOWN_BUDGET_MS).toBe(5_000);
    expect(new DrainTrigger({ clock: new ManualClock(0) }).deadlineMs).toBe(5_000);
  });

  test("all watchers released before the deadline: complete, and the deadline timer is gone", async () => {
    const clock = new ManualClock(0);
    const drain = new DrainTrigger({ clock, deadlineMs: 1_000 });
    const a = drain.watch("xdsproxy");
    const b = drain.watch("sds");
    const told: string[] = [];
    a.signal.addEventListener("abort", () => told.push("xdsproxy"));
    b.signal.addEventListener("abort", () => told.push("sds"));
    expect(a.signal.aborted).toBe(false);
    const outcome = drain.start();
    expect(told).toEqual(["xdsproxy", "sds"]);
    clock.advance(400);
    a.release();
    expect(drain.pending()).toEqual(["sds"]);
    b.release();
    expect(await outcome).toEqual({ complete: true, pending: [] });
    expect(clock.pending()).toBe(0);
  });

  test("one watcher never releases: the deadline wins and names it", async () => {
    const clock = new ManualClock(0);
    const drain = new DrainTrigger({ clock, deadlineMs: 1_000 });
    drain.watch("status").release();
    drain.watch("xdsproxy");
    drain.track("dns", new Promise(() => {}));
    const outcome = drain.start();
    clock.advance(999);
    expect(drain.pending()).toEqual(["xdsproxy", "dns"]);
    clock.advance(1);
    expect(await outcome).toEqual({ complete: false, pending: ["xdsproxy", "dns"] });
  });

  test("no watchers: complete at once, without waiting for the deadline", async () => {
    const clock = new ManualClock(0);
    expect(await new DrainTrigger({ clock }).start()).toEqual({ complete: true, pending: [] });
    expect(clock.now()).toBe(0);
  });

  test("triggered twice: one drain, one deadline, the same outcome", async () => {
    const clock = new ManualClock(0);
    const drain = new DrainTrigger({ clock, deadlineMs: 1_000 });
    const w = drain.watch("envoy");
    let aborts = 0;
    w.signal.addEventListener("abort", () => aborts++);
    const first = drain.start();
    const second = drain.start();
    expect(second).toBe(first);
    expect(clock.pendingMs()).toEqual([1_000]);
    expect(aborts).toBe(1);
    w.release();
    w.release(); // idempotent
    expect(await first).toEqual({ complete: true, pending: [] });
  });

  test("a watcher registered after the trigger is told at once and still waited for", async () => {
    const clock = new ManualClock(0);
    const drain = new DrainTrigger({ clock, deadlineMs: 1_000 });
    const early = drain.watch("early");
    const outcome = drain.start();
    const late = drain.watch("late");
    expect(late.signal.aborted).toBe(true);
    early.release();
    expect(drain.pending()).toEqual(["late"]); // the drain is not over: late holds it
    clock.advance(1_000);
    expect(await outcome).toEqual({ complete: false, pending: ["late"] });
    // After the drain has ended a new watcher changes nothing and holds nothing.
    const after = drain.watch("after");
    expect(after.signal.aborted).toBe(true);
    expect(drain.pending()).toEqual(["late"]);
  });

  test("track releases on rejection as on success", async () => {
    const clock = new ManualClock(0);
    const drain = new DrainTrigger({ clock, deadlineMs: 1_000 });
    drain.track("fails", Promise.reject(new Error("boom")));
    drain.track("works", Promise.resolve());
    expect(await drain.start()).toEqual({ complete: true, pending: [] });
  });
});
