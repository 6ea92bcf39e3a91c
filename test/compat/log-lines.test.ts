// Log lines in Istio's words: operators, dashboards and runbooks search pilot-agent's output for
// these. Each literal below was read from istio/istio at 86c9f01 (file named beside it); the
// compiled agent must emit each in a real run (our own extra lines may stand beside them).
//   Run 1: a sidecar in a fake mesh (fake istiod + CA, an xDS-speaking Envoy stand-in): start-up
//          lines, CA and discovery lines, readiness, then SIGTERM.
//   Run 2: an Envoy stand-in that never answers its admin port and exits with code 3.
//   Run 3: one that is SIGKILLed (the OOM hint). Run 4: one that exits 0.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { startMesh, type Mesh } from "../e2e/mesh.ts";
import { httpGet, startPod, until, type Pod } from "../e2e/pod.ts";
import { writeFakeEnvoyLauncher } from "../support/fake-envoy.ts";

/** Literal message starts; `[file, text]`. */
const SIDECAR_RUN_LINES: [string, string][] = [
  ["pkg/cmd/cmd.go PrintFlags", 'FLAG: --concurrency="0"'],
  ["pkg/cmd/cmd.go PrintFlags", 'FLAG: --log_output_level="default:info,grpc:none"'],
  ["pkg/cmd/cmd.go PrintFlags", 'FLAG: --meshConfig="./etc/istio/config/mesh"'],
  ["pilot/cmd/pilot-agent/app/cmd.go", "Version "],
  ["pilot/cmd/pilot-agent/config/config.go", "Apply proxy config from env "],
  ["pilot/cmd/pilot-agent/app/cmd.go", "Effective config: "],
  ["pilot/cmd/pilot-agent/status/server.go", "Opening status port "],
  ["pkg/istio-agent/agent.go", "CA Endpoint 127.0.0.1:"],
  ["pkg/istio-agent/plugins.go", "Using CA 127.0.0.1:"],
  ["pkg/istio-agent/xds_proxy.go", 'Initializing with upstream address "127.0.0.1:'],
  ["pkg/istio-agent/xds_proxy.go", "connected to upstream XDS server: 127.0.0.1:"],
  ["pkg/envoy/agent.go", "Starting proxy agent"],
  ["pkg/envoy/proxy.go", "Envoy command: ["],
  ["pilot/cmd/pilot-agent/metrics/metrics.go", "Readiness succeeded in "],
  ["pilot/cmd/pilot-agent/status/server.go", "Envoy proxy is ready"],
  ["pkg/envoy/agent.go", "Agent has successfully terminated"],
  ["pilot/cmd/pilot-agent/status/server.go", "Status server has successfully terminated"],
];

function expectLines(output: string, lines: [string, string][]): void {
  const messages = output.split("\n").map((l) => l.split("\t").slice(2).join("\t"));
  const missing = lines.filter(([, text]) => !messages.some((m) => m.startsWith(text) || m.split("\t").some((col) => col.startsWith(text))));
  expect(missing.map(([file, text]) => `${file}: ${text}`)).toEqual([]);
}

let mesh: Mesh | undefined;
const pods: Pod[] = [];
const work = mkdtempSync(join(tmpdir(), "agent-compat-logs-"));
afterAll(async () => {
  await mesh?.cleanup();
  for (const p of pods) {
    p.kill();
    p.box.cleanup();
  }
  rmSync(work, { recursive: true, force: true });
});

describe("log lines operators search for, in Istio's words, from the compiled agent", () => {
  test("a sidecar's start, CA and discovery lines, readiness and termination", async () => {
    mesh = await startMesh(greeterTable(1), { env: { ISTIO_META_CLUSTER_ID: "Kubernetes", E2E_ENVOY_XDS: "1" } });
    const pod = mesh.pod;
    await until(pod, "GET /healthz/ready answers 200", async () =>
      (await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status === 200 ? true : undefined,
    );
    await pod.agent.waitFor(/Readiness succeeded in \d/);
    pod.agent.proc.kill("SIGTERM");
    expect(await pod.waitExit(20_000)).toBe(0);
    const out = pod.agent.output();
    expectLines(out, SIDECAR_RUN_LINES);
    expect(out).toMatch(/\tinfo\t(xdsproxy\t)?Initializing with upstream address "127\.0\.0\.1:\d+" and cluster "Kubernetes"\n/);
    expect(out).toMatch(/\tinfo\t(status\t)?Readiness succeeded in [\d.]+(ms|s)\n/);
  }, 40_000);

  async function envoyThatEnds(env: Record<string, string>): Promise<Pod> {
    const dir = mkdtempSync(join(work, "envoy-"));
    const pod = await startPod({
      env: {
        ENVOY_RESTART_POLICY: "never",
        FAKE_ENVOY_NO_ADMIN: "1",
        FAKE_ENVOY_RECORD: join(dir, "record.jsonl"),
        CA_ADDR: "127.0.0.1:1",
        CA_ROOT_CA: "SYSTEM",
        ...env,
      },
      proxyConfig: { discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE", binaryPath: writeFakeEnvoyLauncher(dir), terminationDrainDuration: "1s" },
    });
    pods.push(pod);
    return pod;
  }

  test("Envoy proxy is NOT ready, then Envoy exited with error: exit status 3", async () => {
    const pod = await envoyThatEnds({ FAKE_ENVOY_EXIT_CODE: "3", FAKE_ENVOY_EXIT_AFTER_MS: "4000" });
    const notReady = await until(pod, "a 503 from /healthz/ready", async () => {
      const r = await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`);
      return r.status === 503 ? r : undefined;
    });
    expect(notReady.status).toBe(503);
    // (The agent's exit code when Envoy exits is the Envoy-exit item's concern, not this test's.)
    expect(await pod.waitExit(20_000)).not.toBeNull();
    const out = pod.agent.output();
    expectLines(out, [
      ["pilot/cmd/pilot-agent/status/server.go", "Envoy proxy is NOT ready: "],
      ["pkg/envoy/agent.go", "Envoy exited with error: exit status 3"],
    ]);
    expect(out).not.toContain("Agent has successfully terminated");
  }, 30_000);

  test("Envoy killed by SIGKILL: the OOM hint, then Envoy exited with error: signal: killed", async () => {
    const pod = await envoyThatEnds({ FAKE_ENVOY_CRASH_SIGNAL: "SIGKILL", FAKE_ENVOY_EXIT_AFTER_MS: "200" });
    expect(await pod.waitExit(20_000)).not.toBeNull();
    expectLines(pod.agent.output(), [
      ["pkg/envoy/agent.go", "Envoy may have been out of memory killed. Check memory usage and limits."],
      ["pkg/envoy/agent.go", "Envoy exited with error: signal: killed"],
    ]);
  }, 30_000);

  test("Envoy exits 0 on its own: Envoy exited normally", async () => {
    const pod = await envoyThatEnds({ FAKE_ENVOY_EXIT_CODE: "0", FAKE_ENVOY_EXIT_AFTER_MS: "200" });
    expect(await pod.waitExit(20_000)).not.toBeNull();
    expectLines(pod.agent.output(), [["pkg/envoy/agent.go", "Envoy exited normally"]]);
  }, 30_000);
});
