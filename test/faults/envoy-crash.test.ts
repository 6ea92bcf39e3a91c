// Envoy crashing, against the compiled agent with the e2e Envoy stand-in. Istio's agent exits
// when Envoy exits (never restarts it); ENVOY_RESTART_POLICY=on-failure restarts a crashed Envoy
// with backoff, within ENVOY_RESTART_BUDGET (opt-in). The default is Istio's.
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envoyRecords, killRecordedEnvoys, startPod, until, xdsYamlWithPort, type Pod } from "../e2e/pod.ts";
import { writeE2eEnvoyLauncher } from "../e2e/xds-envoy.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

/** An "Envoy" that records its start and dies of SIGSEGV at once, every time. */
function crashingEnvoy(dir: string): string {
  const path = join(dir, "envoy-crash");
  writeFileSync(
    path,
    `#!/bin/sh\necho "{\\"event\\":\\"start\\",\\"pid\\":$$,\\"epoch\\":0,\\"t\\":0,\\"argv\\":[]}" >> "$FAKE_ENVOY_RECORD"\nkill -SEGV $$\n`,
  );
  chmodSync(path, 0o755);
  return path;
}

async function podWith(env: Record<string, string>, binary: "stand-in" | "crashing"): Promise<{ pod: Pod; recordFile: string }> {
  const work = mkdtempSync(join(tmpdir(), "agent-faults-envoy-"));
  const recordFile = join(work, "envoy-record.jsonl");
  const binaryPath = binary === "crashing" ? crashingEnvoy(work) : writeE2eEnvoyLauncher(work);
  const pod = await startPod({
    env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", FAKE_ENVOY_RECORD: recordFile, ...env },
    proxyConfig: { controlPlaneAuthPolicy: "NONE", binaryPath, terminationDrainDuration: "1s", drainDuration: "2s" },
    files: { "xds.yaml": xdsYamlWithPort(1) },
  });
  cleanups.push(() => {
    pod.kill();
    killRecordedEnvoys(recordFile);
    pod.box.cleanup();
    rmSync(work, { recursive: true, force: true });
  });
  return { pod, recordFile };
}

const starts = (file: string) => envoyRecords(file).filter((r) => r.event === "start");

describe("Envoy crashes (compiled agent)", () => {
  for (const [signal, env] of [
    ["SIGSEGV", { ENVOY_RESTART_POLICY: "never" }],
    ["SIGKILL", {}],
  ] as const) {
    test(`${Object.keys(env).length ? "ENVOY_RESTART_POLICY=never" : "by default"}: Envoy killed by ${signal}, the agent logs it and exits 0 (Istio's); no second Envoy`, async () => {
      const { pod, recordFile } = await podWith({ ...env }, "stand-in");
      const first = await until(pod, "Envoy started", () => starts(recordFile)[0]);
      process.kill(first.pid, signal);
      const code = await pod.waitExit(20_000);
      expect(code).toBe(0); // Istio: exit 0 even when Envoy crashed, only logged
      const log = pod.agent.output();
      expect(log).toContain(signal === "SIGKILL" ? "was killed by SIGKILL: possibly OOM-killed" : "was killed by signal SIGSEGV");
      expect(log).toContain("envoy supervisor done"); // the sentinel: the supervisor finished
      expect(starts(recordFile).length).toBe(1);
      expect(log).not.toMatch(/\brestarting Envoy in /);
      console.log(`envoy-crash: ${Object.keys(env).length ? "never" : "default"}, ${signal}: agent exit ${code}`);
    }, 40_000);
  }

  test("ENVOY_RESTART_POLICY=on-failure: Envoy killed by SIGSEGV is restarted, the agent keeps running", async () => {
    const { pod, recordFile } = await podWith({ ENVOY_RESTART_POLICY: "on-failure", ENVOY_RESTART_BACKOFF_BASE: "50ms" }, "stand-in");
    const first = await until(pod, "Envoy started", () => starts(recordFile)[0]);
    process.kill(first.pid, "SIGSEGV");
    const second = await until(pod, "a second Envoy", () => starts(recordFile)[1]);
    expect(second.pid).not.toBe(first.pid);
    expect(pod.agent.output()).toContain("restarting Envoy in 50ms (restart 1 of 10");
    expect(pod.exitCode()).toBeNull();
    pod.agent.proc.kill("SIGTERM");
    expect(await pod.waitExit(20_000)).toBe(0);
  }, 40_000);

  test("ENVOY_RESTART_POLICY=on-failure, Envoy crashing on every start: restarted exactly ENVOY_RESTART_BUDGET times, then the agent gives up", async () => {
    const t0 = performance.now();
    const { pod, recordFile } = await podWith(
      { ENVOY_RESTART_POLICY: "on-failure", ENVOY_RESTART_BACKOFF_BASE: "50ms", ENVOY_RESTART_BUDGET: "3" },
      "crashing",
    );
    const code = await pod.waitExit(30_000);
    const ms = performance.now() - t0;
    expect(code).not.toBeNull();
    const log = pod.agent.output();
    expect(log).toContain("not restarting Envoy: restart budget exhausted: 3 restarts");
    expect(starts(recordFile).length).toBe(4); // the first start and 3 restarts
    for (const n of [1, 2, 3]) expect(log).toContain(`(restart ${n} of 3 within`);
    // Backoff doubles: 50, 100, 200 ms.
    expect(log).toContain("restarting Envoy in 50ms");
    expect(log).toContain("restarting Envoy in 100ms");
    expect(log).toContain("restarting Envoy in 200ms");
    console.log(`envoy-crash: crash loop, budget 3: 4 starts, agent exit ${code} after ${ms.toFixed(0)} ms`);
  }, 40_000);
});
