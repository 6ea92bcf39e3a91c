// The agent SIGKILLed (the OOM killer): its Envoy must not live on beside the next agent's.
// The compiled agent runs the e2e Envoy stand-in; the agent is SIGKILLed; the stand-in's pid must
// be gone within a second (the kernel's parent-death signal), not adopted by PID 1.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envoyRecords, killRecordedEnvoys, startPod, until, xdsYamlWithPort, type Pod } from "../e2e/pod.ts";
import { writeE2eEnvoyLauncher } from "../e2e/xds-envoy.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie is dead; it only waits to be reaped.
  const stat = Bun.spawnSync(["cat", `/proc/${pid}/stat`]).stdout.toString();
  return !/^\d+ \(.*\) Z /.test(stat);
}

async function podWithEnvoy(): Promise<{ pod: Pod; recordFile: string }> {
  const work = mkdtempSync(join(tmpdir(), "agent-faults-kill-"));
  const recordFile = join(work, "envoy-record.jsonl");
  const pod = await startPod({
    env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", FAKE_ENVOY_RECORD: recordFile },
    proxyConfig: { controlPlaneAuthPolicy: "NONE", binaryPath: writeE2eEnvoyLauncher(work), terminationDrainDuration: "1s", drainDuration: "2s" },
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

describe("agent SIGKILLed (compiled agent)", () => {
  test("Envoy dies with the agent, by the kernel's parent-death signal", async () => {
    const { pod, recordFile } = await podWithEnvoy();
    const started = await until(pod, "Envoy started", () => envoyRecords(recordFile).find((r) => r.event === "start"));
    expect(alive(started.pid)).toBe(true);
    pod.agent.proc.kill("SIGKILL");
    await pod.agent.proc.exited;
    const t0 = performance.now();
    while (alive(started.pid) && performance.now() - t0 < 3000) await Bun.sleep(20);
    expect(alive(started.pid)).toBe(false);
    expect(performance.now() - t0).toBeLessThan(1000);
  }, 30_000);

  test("a clean stop still ends Envoy normally and removes the pid file", async () => {
    const { pod, recordFile } = await podWithEnvoy();
    await until(pod, "Envoy started", () => envoyRecords(recordFile).find((r) => r.event === "start"));
    const pidFile = pod.path("etc/istio/proxy/envoy.pid");
    expect(await Bun.file(pidFile).exists()).toBe(true);
    pod.agent.proc.kill("SIGTERM");
    expect(await pod.waitExit(20_000)).toBe(0);
    expect(await Bun.file(pidFile).exists()).toBe(false);
  }, 30_000);
});
