// Files named by others, against the compiled binary: a FIFO where the mesh config or the pod's
// annotations should be must not hang start-up; the agent exits at once naming the file.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { sandbox, type Sandbox } from "../support/binary.ts";

let box: Sandbox;
beforeAll(() => {
  box = sandbox("agent-faults-files-");
});
afterAll(() => box?.cleanup());

const ENV = { POD_NAME: "app-0", POD_NAMESPACE: "demo", INSTANCE_IP: "10.9.8.7", DISABLE_ENVOY: "true", CLOUD_PLATFORM: "none" };

async function runBounded(args: string[], ms: number): Promise<{ code: number | null; err: string; ms: number }> {
  const t0 = performance.now();
  const proc = Bun.spawn([box.bin, ...args], { cwd: box.dir, env: { PATH: process.env.PATH ?? "", ...ENV }, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), ms);
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  clearTimeout(timer);
  return { code: proc.signalCode ? null : code, err, ms: performance.now() - t0 };
}

function mkfifo(path: string): void {
  expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0);
}

describe("files named by others (compiled agent)", () => {
  test("--meshConfig naming a FIFO: exits non-zero at once, naming the file", async () => {
    const p = join(box.dir, "mesh.fifo");
    mkfifo(p);
    const r = await runBounded(["proxy", "sidecar", "--meshConfig", p], 10_000);
    expect(r.code).not.toBeNull();
    expect(r.code).not.toBe(0);
    expect(r.err).toContain(`mesh config file ${p}: cannot be read: ${p}: is a FIFO, not a regular file`);
    expect(r.ms).toBeLessThan(5000);
  });

  test("a FIFO as the pod annotations file: exits non-zero at once, naming the file", async () => {
    mkdirSync(join(box.dir, "etc/istio/pod"), { recursive: true });
    const p = join(box.dir, "etc/istio/pod/annotations");
    mkfifo(p);
    const r = await runBounded(["proxy", "sidecar"], 10_000);
    expect(r.code).not.toBeNull();
    expect(r.code).not.toBe(0);
    expect(r.err).toContain(`pod info file ./etc/istio/pod/annotations: cannot be read: ${p}: is a FIFO, not a regular file`);
  });
});
