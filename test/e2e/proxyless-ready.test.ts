// Proxyless readiness (DISABLE_ENVOY), as Istio's status server: `/healthz/ready` checks only that
// the gRPC bootstrap file loads (and, with the DNS proxy, that a name table arrived). No xDS client
// has to connect and istiod need not answer, so the grpc-agent template's postStart
// `pilot-agent wait` returns and the application container (the xDS client) can start.

import { afterEach, expect, test } from "bun:test";
import { start } from "../support/binary.ts";
import { httpGet, startPod, until } from "./pod.ts";

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

test("proxyless readiness (DISABLE_ENVOY): ready with no xDS client and istiod unreachable; `wait` returns", async () => {
  const pod = await startPod({
    env: { DISABLE_ENVOY: "true", GRPC_XDS_BOOTSTRAP: "./etc/istio/proxy/grpc-bootstrap.json", CA_ADDR: "127.0.0.1:1", CA_ROOT_CA: "SYSTEM" },
    proxyConfig: { discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" },
  });
  cleanups.push(
    () => pod.box.cleanup(),
    () => pod.kill(),
  );
  const url = `http://127.0.0.1:${pod.statusPort}/healthz/ready`;
  const r = await until(pod, "GET /healthz/ready answers 200", async () => {
    const r = await httpGet(url);
    return r.status === 200 ? r : undefined;
  });
  expect(r.body).toBe("");
  // The injector's postStart hook for the grpc-agent template.
  // As the template writes it: localhost, not 127.0.0.1.
  const wait = start(pod.box.bin, ["wait", `--url=http://localhost:${pod.statusPort}/healthz/ready`, "--timeoutSeconds=10"], { cwd: pod.box.dir });
  expect(await wait.proc.exited).toBe(0);
  // Still ready with nothing connected (sentinel: the agent said it serves the XDS socket).
  expect(pod.tail(200)).toContain("xDS proxy listening on");
  expect((await httpGet(url)).status).toBe(200);
}, 30_000);
