// The compiled agent serves its status port from the native responder embedded in it (build.ts
// builds native/statusresponder.c and embeds it; native/statusresponder.ts loads it from a memfd):
// a thread named status-native and no Worker; with app probes, the Worker that runs them.
import { afterEach, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { httpGet, startPod, until, type Pod } from "../e2e/pod.ts";

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function threadNames(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/comm`, "utf8").trim();
    } catch {
      return "";
    }
  });
}

async function proxyless(env: Record<string, string> = {}): Promise<Pod> {
  const pod = await startPod({
    env: { DISABLE_ENVOY: "true", CA_ADDR: "127.0.0.1:1", CA_ROOT_CA: "SYSTEM", ...env },
    proxyConfig: { discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" },
  });
  cleanups.push(
    () => pod.box.cleanup(),
    () => pod.kill(),
  );
  await until(pod, "GET /healthz/ready answers 200", async () =>
    (await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status === 200 ? true : undefined,
  );
  return pod;
}

test("the compiled agent answers from its native responder thread: readiness and the rest", async () => {
  const pod = await proxyless();
  const ready = await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`);
  expect([ready.status, ready.body]).toEqual([200, ""]);
  const metrics = await httpGet(`http://127.0.0.1:${pod.statusPort}/stats/prometheus`);
  expect(metrics.status).toBe(200);
  expect(metrics.body).toContain("istio_agent_");
  expect(threadNames(pod.agent.proc.pid)).toContain("status-native");
  expect(pod.tail(400)).not.toContain("served from a Worker thread");
}, 30_000);

test("with app probes the compiled agent keeps the Worker, which runs them, and says so", async () => {
  const probers = JSON.stringify({ "/app-health/app/livez": { tcpSocket: { port: 1 }, timeoutSeconds: 1 } });
  const pod = await proxyless({ ISTIO_KUBE_APP_PROBERS: probers });
  const probe = await httpGet(`http://127.0.0.1:${pod.statusPort}/app-health/app/livez`);
  expect(probe.status).toBe(500);
  expect(threadNames(pod.agent.proc.pid)).not.toContain("status-native");
  expect(pod.tail(400)).toContain("status port: served from a Worker thread, which answers the app probes while the agent is busy");
}, 30_000);
