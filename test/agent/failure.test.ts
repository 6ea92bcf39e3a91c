// A component that stops working after a successful start reports it (Component.failed), and the
// composition root decides, as Istio's agent does: the xDS relay's listener failing is logged and
// the agent keeps serving (Istio only logs "failed to accept downstream gRPC connection"); Envoy
// ending on its own ends the agent, exit 0 under the default restart policy (Istio's agent exits 0
// and lets kubelet restart the container).

import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { afterStartFailure } from "../../src/agent.ts";
import type { FailureReport } from "../../src/lib/component.ts";
import { XdsError } from "../../src/xds/errors.ts";
import { eventually, logged, startTestAgent, type TestAgent } from "../support/agent.ts";

const agents: TestAgent[] = [];
afterEach(async () => {
  for (const a of agents.splice(0)) await a.cleanup();
});

test("Istio's reaction per component: status terminates, Envoy's end is the agent's, the rest degrade", () => {
  expect(["status", "envoy", "dns", "sds", "xdsproxy", "localxds", "wasm"].map((n) => [n, afterStartFailure(n)])).toEqual([
    ["status", "terminate"],
    ["envoy", "exit"],
    ["dns", "degrade"],
    ["sds", "degrade"],
    ["xdsproxy", "degrade"],
    ["localxds", "degrade"],
    ["wasm", "degrade"],
  ]);
});

test("the XDS socket's listener failing after start: one line naming xdsproxy, and the agent keeps serving", async () => {
  const a = await startTestAgent();
  agents.push(a);
  const bound = await a.start;
  // The relay's downstream reports a failure after start (the listener is Bun's own socket, which
  // surfaces no accept(2) errors to JavaScript; node:net's did: docs/compat.md, "xDS relay").
  const server = (a.agent as unknown as { xds: { server: { failure: FailureReport; o: { socketPath: string } } } }).xds.server;
  server.failure.report(new XdsError("downstream", `XDS socket ${server.o.socketPath}: accept EMFILE`));
  const line = await eventually("the root's line", () => logged(a.lines, /^xdsproxy failed/)[0]);
  expect(line).toBe(
    `xdsproxy failed: xds proxy downstream: XDS socket ${join(a.root, "etc/istio/proxy/XDS")}: accept EMFILE; the agent keeps serving without it\tcomponent=xdsproxy\tdecision=degrade`,
  );
  // Still serving: the status server answers a later request, and the agent has not ended.
  const ready = await fetch(`http://127.0.0.1:${bound.status!.port}/healthz/ready`);
  expect(ready.status).toBe(200);
  const ended = await Promise.race([a.agent.done.then(() => true), Promise.resolve(false)]);
  expect(ended).toBe(false);
  expect(logged(a.lines, /terminat/)).toEqual([]);
  expect(await a.stop()).toBe(0);
});

test("Envoy exiting on its own: the root's line names envoy, the agent stops the rest and exits 0 (restart policy never)", async () => {
  const a = await startTestAgent({ envoy: true });
  agents.push(a);
  await a.start;
  const admin = `http://127.0.0.1:${a.adminPort}`;
  await eventually("the fake Envoy's admin API", async () => ((await fetch(`${admin}/ready`).catch(() => undefined))?.status === 200 ? true : undefined));
  await fetch(`${admin}/fake/exit?code=3`, { method: "POST" }).catch(() => undefined);
  expect(await a.agent.done).toBe(0);
  const lines = logged(a.lines);
  expect(lines).toContain("envoy\tEnvoy exited with error: exit status 3");
  expect(lines).toContain("envoy failed: Envoy exited on its own (exit code 3); the agent exits\tcomponent=envoy\tdecision=exit");
  expect(lines.filter((l) => /: stopped$/.test(l))).toEqual(["wasm: stopped", "xdsproxy: stopped", "sds: stopped", "status: stopped"]);
  expect(lines).not.toContain("Agent has successfully terminated");
}, 20_000);
