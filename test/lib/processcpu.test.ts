import { expect, test } from "bun:test";
import { Registry } from "../../src/lib/metrics.ts";
import { addProcessCpu } from "../../src/lib/processcpu.ts";

// The Prometheus process collector's CPU counters, as Istio's agent exports them (names, help and
// the text format's values checked against literals), fed by an injected CPU clock.
test("process CPU counters: each scrape adds the user and system time used since the last, in seconds", async () => {
  const reg = new Registry();
  const usage = [
    { user: 1_000_000, system: 500_000 }, // when added
    { user: 3_500_000, system: 750_000 }, // first scrape
    { user: 4_000_000, system: 1_000_000 }, // second scrape
  ];
  addProcessCpu(reg, "istio_agent_", () => usage.shift()!);
  const first = await reg.metrics();
  expect(first).toContain(
    "# HELP istio_agent_process_cpu_user_seconds_total Total user CPU time spent in seconds.\n# TYPE istio_agent_process_cpu_user_seconds_total counter\nistio_agent_process_cpu_user_seconds_total 2.5\n",
  );
  expect(first).toContain(
    "# HELP istio_agent_process_cpu_system_seconds_total Total system CPU time spent in seconds.\n# TYPE istio_agent_process_cpu_system_seconds_total counter\nistio_agent_process_cpu_system_seconds_total 0.25\n",
  );
  expect(first).toContain(
    "# HELP istio_agent_process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE istio_agent_process_cpu_seconds_total counter\nistio_agent_process_cpu_seconds_total 2.75\n",
  );
  const second = await reg.metrics();
  expect(second).toContain("istio_agent_process_cpu_user_seconds_total 3\n");
  expect(second).toContain("istio_agent_process_cpu_system_seconds_total 0.5\n");
  expect(second).toContain("istio_agent_process_cpu_seconds_total 3.5\n");
  expect(usage).toEqual([]);
});
