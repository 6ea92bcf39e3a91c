import { expect, test } from "bun:test";
import { decideRestart, parseRestartMode, type RestartPolicy } from "../../src/envoy/restart.ts";

const policy: RestartPolicy = { mode: "on-failure", baseMs: 200, maxMs: 1000, budget: 4, windowMs: 60_000 };

test("exponential backoff, capped, until the budget is spent", () => {
  let history: number[] = [];
  const delays: number[] = [];
  let t = 0;
  for (;;) {
    const d = decideRestart(policy, history, t);
    history = d.history;
    if (!d.restart) {
      expect(d.reason).toContain("restart budget exhausted: 4 restarts within 1m0s");
      break;
    }
    delays.push(d.delayMs);
    t += 100;
  }
  expect(delays).toEqual([200, 400, 800, 1000]);
});

test("restarts older than the window no longer count", () => {
  const d = decideRestart(policy, [0, 1000, 2000, 3000], 62_500);
  expect(d.restart).toBe(true);
  if (d.restart) {
    expect(d.delayMs).toBe(400); // only 3000 is still within the window: one earlier restart
    expect(d.history).toEqual([3000, 62_500]);
  }
});

test("policy never and budget 0 never restart", () => {
  expect(decideRestart({ ...policy, mode: "never" }, [], 0).restart).toBe(false);
  expect(decideRestart({ ...policy, budget: 0 }, [], 0).restart).toBe(false);
});

test("parseRestartMode", () => {
  expect(parseRestartMode("")).toEqual({ mode: "never" }); // Istio's behaviour by default
  expect(parseRestartMode("never")).toEqual({ mode: "never" });
  expect(parseRestartMode("On-Failure")).toEqual({ mode: "on-failure" });
  const bad = parseRestartMode("always");
  expect(bad.mode).toBe("never");
  expect(bad.problem).toContain(`ENVOY_RESTART_POLICY="always"`);
});
