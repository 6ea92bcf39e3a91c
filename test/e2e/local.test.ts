// E2E, local mode (no istiod): the compiled agent serves xds.yaml to a proxyless grpc-js-xds
// client through the XDS socket named in the gRPC bootstrap it writes, issues a workload
// certificate from its local CA, becomes ready, follows edits of the file, and exits on SIGTERM
// and on POST /quitquitquit.

import { afterEach, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { fileIfExists, httpGet, spiffeIds, startPod, until, xdsYamlWithPort, xdsGreeterClient, type Pod } from "./pod.ts";

const TARGET = "xds:///greeter.demo:50051";
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

grpcXds.register();

async function localPod(port: number): Promise<Pod> {
  const pod = await startPod({
    env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", OUTPUT_CERTS: "etc/certs", DISABLE_ENVOY: "true" },
    proxyConfig: { controlPlaneAuthPolicy: "NONE" },
    files: { "xds.yaml": xdsYamlWithPort(port) },
  });
  cleanups.push(() => pod.box.cleanup(), () => pod.kill());
  return pod;
}

async function clientFor(pod: Pod) {
  const client = await xdsGreeterClient(pod, TARGET);
  cleanups.push(() => client.close());
  return client;
}

test("cold start to ready, a config push moves the calls, a SPIFFE certificate is issued, SIGTERM exits 0", async () => {
  const a = await startGreeter("A");
  const b = await startGreeter("B");
  cleanups.push(() => a.stop(), () => b.stop());
  const pod = await localPod(a.port);
  const client = await clientFor(pod);

  expect(await client.sayHello("alice", 10_000)).toBe("hello alice from A");
  expect(a.calls()).toBe(1);

  const ready = await until(pod, "GET /healthz/ready answers 200", async () => {
    const r = await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`);
    return r.status === 200 ? r : undefined;
  });
  expect(ready.status).toBe(200);

  // The workload certificate from the local CA, written to OUTPUT_CERTS with the pod's identity.
  const chain = await until(pod, "OUTPUT_CERTS cert-chain.pem", () => fileIfExists(pod.path("etc/certs/cert-chain.pem")));
  expect(await spiffeIds(chain)).toContain("spiffe://cluster.local/ns/demo/sa/greeter-client");
  expect(fileIfExists(pod.path("etc/certs/key.pem"))).toContain("PRIVATE KEY");
  expect(fileIfExists(pod.path("etc/certs/root-cert.pem"))).toContain("BEGIN CERTIFICATE");

  // A config push: the endpoint moves to greeter B; the client follows.
  writeFileSync(pod.path("xds.yaml"), xdsYamlWithPort(b.port));
  const moved = await until(pod, "calls move to greeter B after editing xds.yaml", async () => {
    const answer = await client.sayHello("bob", 5_000);
    return answer.endsWith("from B") ? answer : undefined;
  });
  expect(moved).toBe("hello bob from B");
  expect(b.calls()).toBeGreaterThanOrEqual(1);

  pod.agent.proc.kill("SIGTERM");
  expect(await pod.waitExit()).toBe(0);
}, 25_000);

test("POST /quitquitquit from loopback stops the agent", async () => {
  const a = await startGreeter("A");
  cleanups.push(() => a.stop());
  const pod = await localPod(a.port);
  await until(pod, "status server answers /healthz/ready", async () => (await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status);
  // Only POST is accepted.
  const get = await fetch(`http://127.0.0.1:${pod.statusPort}/quitquitquit`, { signal: AbortSignal.timeout(2000) });
  expect(get.status).not.toBe(200);
  expect(pod.exitCode()).toBeNull();
  const r = await fetch(`http://127.0.0.1:${pod.statusPort}/quitquitquit`, { method: "POST", signal: AbortSignal.timeout(2000) });
  expect(r.status).toBe(200);
  expect(await pod.waitExit()).toBe(0);
}, 20_000);
