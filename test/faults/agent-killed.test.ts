// The agent SIGKILLed (the OOM killer): its Envoy must not live on beside the next agent's.
// The compiled agent runs the e2e Envoy stand-in; the agent is SIGKILLed; the stand-in's pid must
// be gone within a second (the kernel's parent-death signal), not adopted by PID 1. The signal is
// armed by the native launcher embedded in the binary (native/envoylauncher.c), not by a second
// start of the agent: strace shows which programs Envoy's process ran before Envoy.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { envoyRecords, killRecordedEnvoys, startPod, until, xdsYamlWithPort, type Pod } from "../e2e/pod.ts";
import { writeE2eEnvoyLauncher } from "../e2e/xds-envoy.ts";
import { testRequiring } from "../support/requires.ts";

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

async function podWithEnvoy(prefix?: (work: string) => string[]): Promise<{ pod: Pod; recordFile: string; work: string; envoy: string }> {
  const work = mkdtempSync(join(tmpdir(), "agent-faults-kill-"));
  const recordFile = join(work, "envoy-record.jsonl");
  const envoy = writeE2eEnvoyLauncher(work);
  const pod = await startPod({
    env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", FAKE_ENVOY_RECORD: recordFile },
    proxyConfig: { controlPlaneAuthPolicy: "NONE", binaryPath: envoy, terminationDrainDuration: "1s", drainDuration: "2s" },
    files: { "xds.yaml": xdsYamlWithPort(1) },
    ...(prefix ? { prefix: prefix(work) } : {}),
  });
  cleanups.push(() => {
    pod.kill();
    killRecordedEnvoys(recordFile);
    pod.box.cleanup();
    rmSync(work, { recursive: true, force: true });
  });
  return { pod, recordFile, work, envoy };
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

  // Before the native launcher, Envoy's process first ran the agent's own binary again
  // (`agent __envoy-exec …`): a whole second start of the runtime and bundle before Envoy.
  testRequiring(
    { tools: ["strace"], apt: ["strace"] },
    "Envoy's process runs the native launcher (the death signal armed), then Envoy: no second start of the agent",
    async () => {
      let trace = "";
      const { pod, recordFile, envoy } = await podWithEnvoy((work) => {
        trace = join(work, "strace.txt");
        // -ff: one file per process (trace.PID), so a call is never split into "<unfinished ...>"
        // and "<... resumed>" by another process's line (r18 read such a half as the call).
        return ["strace", "-ff", "-qq", "-s", "4096", "-e", "trace=execve,prctl", "-e", "signal=none", "-o", trace];
      });
      const started = await until(pod, "Envoy started", () => envoyRecords(recordFile).find((r) => r.event === "start"), 30_000);
      // strace writes each line when the call returns: Envoy's own start record is the later sentinel.
      const calls = readFileSync(`${trace}.${started.pid}`, "utf8")
        .split("\n")
        .filter((l) => /^(execve|prctl)\(/.test(l) && !/ENOENT/.test(l));
      const everyProcess = readdirSync(dirname(trace))
        .filter((f) => f.startsWith(`${basename(trace)}.`))
        .map((f) => readFileSync(join(dirname(trace), f), "utf8"))
        .join("\n");
      expect(everyProcess).toContain("execve(");
      expect(everyProcess).not.toContain("__envoy-exec");
      // 1: the launcher from its memory file, told the agent's pid and Envoy's binary.
      const launcher = /execve\("\/proc\/self\/fd\/\d+", \["\/proc\/self\/fd\/\d+", "(\d+)", "([^"]+)"/.exec(calls[0] ?? "");
      expect(launcher, calls.join("\n")).not.toBeNull();
      expect(launcher![2]).toBe(envoy);
      // The pid it was told is its parent's: the agent (under strace, not strace itself).
      const ppid = Number(
        readFileSync(`/proc/${started.pid}/stat`, "utf8")
          .replace(/^.*\) /, "")
          .split(" ")[1],
      );
      expect(Number(launcher![1])).toBe(ppid);
      expect(ppid).not.toBe(pod.agent.proc.pid);
      // 2: the death signal armed; 3: Envoy's binary exec'd in the same process.
      expect(calls[1]).toMatch(/prctl\(PR_SET_PDEATHSIG, SIGKILL\)\s+= 0$/);
      expect(calls[2]).toContain(`execve("${envoy}", ["${envoy}", "-c", `);
      expect(calls[2]).toMatch(/\)\s+= 0$/);
    },
    30_000,
  );
});
