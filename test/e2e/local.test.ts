// E2E, local mode without Envoy (DISABLE_ENVOY, the proxyless gRPC pod): readiness comes from the
// agent's own checks and the gRPC bootstrap, the grpc-js-xds client is served through the XDS
// socket, and SIGTERM exits 0 without a drain to wait for. The full local-mode suite, with Envoy,
// is suite-local.test.ts.

import { afterEach, expect, test } from "bun:test";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { httpGet, startPod, until, xdsYamlWithPort, xdsGreeterClient } from "./pod.ts";

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

grpcXds.register();

test("proxyless (DISABLE_ENVOY): ready without Envoy, calls routed from the file, SIGTERM exits 0 at once", async () => {
  const a = await startGreeter("A");
  cleanups.push(() => a.stop());
  const pod = await startPod({
    env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", DISABLE_ENVOY: "true" },
    proxyConfig: { controlPlaneAuthPolicy: "NONE", terminationDrainDuration: "5s" },
    files: { "xds.yaml": xdsYamlWithPort(a.port) },
  });
  cleanups.push(
    () => pod.box.cleanup(),
    () => pod.kill(),
  );
  const client = await xdsGreeterClient(pod, "xds:///greeter.demo:50051");
  cleanups.push(() => client.close());
  expect(await client.sayHello("alice", 10_000)).toBe("hello alice from A");
  expect(a.calls()).toBe(1);
  await until(pod, "GET /healthz/ready answers 200", async () =>
    (await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status === 200 ? true : undefined,
  );

  const sigterm = Date.now();
  pod.agent.proc.kill("SIGTERM");
  expect(await pod.waitExit()).toBe(0);
  // No Envoy: terminationDrainDuration (5 s) does not apply.
  expect(Date.now() - sigterm).toBeLessThan(5_000);
}, 20_000);
