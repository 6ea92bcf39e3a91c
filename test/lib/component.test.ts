// The component contract's failure report: reported once, and the root's reaction per decision
// (terminate once, exit, degrade), with a failure during shutdown only logged.

import { expect, test } from "bun:test";
import { ComponentError, FailureReport, watchFailures, type Component, type FailureDecision } from "../../src/lib/component.ts";
import { memoryLogger } from "../../src/lib/log.ts";

function component(name: string): Component & { report: FailureReport } {
  const report = new FailureReport();
  return { name, start: async () => {}, failed: report.failed, report };
}

function root(decisions: Record<string, FailureDecision>, stopping = false) {
  const { lines, log } = memoryLogger();
  let terminated = 0;
  const act = { log, terminate: () => void terminated++, stopping: () => stopping };
  return { lines, act, decide: (n: string) => decisions[n]!, terminated: () => terminated };
}

/** Message and fields of each line (without timestamp and level). */
const messages = (lines: string[]) => lines.map((l) => l.split("\t").slice(1).join("\t"));

test("a report resolves `failed` with the first error only; later reports say false", async () => {
  const r = new FailureReport();
  expect(r.report(new Error("first"))).toBe(true);
  expect(r.report(new Error("second"))).toBe(false);
  expect((await r.failed).message).toBe("first");
});

test("terminate: one line naming the component, the agent told to terminate once", async () => {
  const status = component("status");
  const { lines, act, decide, terminated } = root({ status: "terminate" });
  watchFailures([status], decide, act);
  status.report.report(new Error("listener closed"));
  status.report.report(new Error("again"));
  await status.failed;
  await Bun.sleep(0);
  expect(messages(lines)).toEqual(["error\tstatus failed: listener closed; terminating the agent\tcomponent=status\tdecision=terminate"]);
  expect(terminated()).toBe(1);
});

test("degrade and exit: logged, the agent not told to terminate (sentinel: the later component's line)", async () => {
  const dns = component("dns");
  const envoy = component("envoy");
  const { lines, act, decide, terminated } = root({ dns: "degrade", envoy: "exit" });
  watchFailures([dns, envoy], decide, act);
  dns.report.report(new Error("udp socket closed"));
  await dns.failed;
  envoy.report.report(new Error("Envoy exited on its own (exit status 3)"));
  await envoy.failed;
  await Bun.sleep(0);
  expect(messages(lines)).toEqual([
    "error\tdns failed: udp socket closed; the agent keeps serving without it\tcomponent=dns\tdecision=degrade",
    "error\tenvoy failed: Envoy exited on its own (exit status 3); the agent exits\tcomponent=envoy\tdecision=exit",
  ]);
  expect(terminated()).toBe(0);
});

test("a failure while the agent is stopping is logged only", async () => {
  const status = component("status");
  const { lines, act, decide, terminated } = root({ status: "terminate" }, true);
  watchFailures([status], decide, act);
  status.report.report(new Error("listener closed"));
  await status.failed;
  await Bun.sleep(0);
  expect(messages(lines)).toEqual(["error\tstatus failed while the agent is stopping: listener closed\tcomponent=status\tdecision=terminate"]);
  expect(terminated()).toBe(0);
});

test("a component without `failed` is never reported", async () => {
  const quiet: Component = { name: "quiet", start: async () => {} };
  const loud = component("loud");
  const { lines, act } = root({});
  watchFailures([quiet, loud], () => "degrade", act);
  loud.report.report(new Error("x"));
  await loud.failed;
  await Bun.sleep(0);
  expect(messages(lines)).toEqual(["error\tloud failed: x; the agent keeps serving without it\tcomponent=loud\tdecision=degrade"]);
});

test("ComponentError names the component and keeps the cause", () => {
  const cause = new Error("EADDRINUSE");
  const e = new ComponentError("status", cause);
  expect(e.message).toBe("status: EADDRINUSE");
  expect(e.component).toBe("status");
  expect(e.cause).toBe(cause);
  expect(new ComponentError("dns", "plain").message).toBe("dns: plain");
});
