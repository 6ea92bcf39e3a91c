// Envoy exit, Istio's way by default: when Envoy dies the agent logs it (with Istio's OOM hint for
// SIGKILL) and exits 0, so kubelet sees the container end and counts the restart. No in-process
// restart unless ENVOY_RESTART_POLICY=on-failure (suite.ts covers that opt-in).

import { afterEach, expect, test } from "bun:test";
import { localMode, type Scene } from "./modes.ts";
import { until } from "./pod.ts";

let s: Scene | undefined;
afterEach(async () => {
  await s?.cleanup();
  s = undefined;
});

test("Envoy exit: a SIGKILLed Envoy ends the agent with exit code 0 and Istio's log lines, no restart", async () => {
  s = await localMode.start({ greeterPort: 9, env: {} });
  const pod = s.pod;
  const starts = () => s!.records().filter((r) => r.event === "start");
  await until(pod, "Envoy started", () => starts()[0]);
  await fetch(`http://127.0.0.1:${pod.adminPort}/fake/crash?signal=SIGKILL`, { method: "POST", signal: AbortSignal.timeout(2000) });
  expect(await pod.waitExit()).toBe(0);
  const log = pod.tail(400);
  expect(log).toContain("Envoy may have been out of memory killed. Check memory usage and limits.");
  expect(log).toContain("Envoy exited with error: signal: killed");
  // The agent's final line is the sentinel: it had stopped before we count Envoy's starts.
  expect(log).toContain("Agent stopped");
  expect(starts()).toHaveLength(1);
}, 30_000);
