// The "Done when" check of drop-in parity: the compiled agent started with exactly the arguments
// and environment Istio's injection templates give the istio-proxy container (sidecar, gateway,
// grpc-agent; rendered in injection-fixtures.ts) in a fake mesh (fake istiod + CA, the Envoy
// stand-in where the template runs Envoy). Each must come up with no error, no warning about any
// variable the template sets, and ready as Istio would be: /healthz/ready 200, and the template's
// postStart `pilot-agent wait` (run with the compiled binary) returns 0.

import { afterEach, describe, expect, test } from "bun:test";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { startMesh, type Mesh } from "../e2e/mesh.ts";
import { httpGet, until } from "../e2e/pod.ts";
import { GATEWAY, GRPC_AGENT, POD_INFO_FILES, SIDECAR, type InjectedProxy } from "./injection-fixtures.ts";

/** ProxyConfig fields that must point at the test's fakes and free ports instead. */
const SANDBOXED = new Set(["discoveryAddress", "statusPort", "proxyAdminPort", "binaryPath"]);

let mesh: Mesh | undefined;
afterEach(async () => {
  await mesh?.cleanup();
  mesh = undefined;
});

async function runTemplate(p: InjectedProxy): Promise<void> {
  const proxyConfig = Object.fromEntries(Object.entries(p.proxyConfig).filter(([k]) => !SANDBOXED.has(k)));
  mesh = await startMesh(greeterTable(1), {
    // E2E_ENVOY_XDS makes the Envoy stand-in fetch CDS/LDS as Envoy would; not a template variable.
    env: { ...p.env, E2E_ENVOY_XDS: "1" },
    envFor: ({ caAddress }) => ({ CA_ADDR: caAddress }),
    proxyConfig,
    args: p.args,
    files: POD_INFO_FILES,
  });
  const pod = mesh.pod;
  const ready = await until(
    pod,
    `${p.template}: GET /healthz/ready answers 200`,
    async () => {
      const r = await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`);
      return r.status === 200 ? r : undefined;
    },
    20_000,
  );
  expect(ready.status).toBe(200);

  // The postStart hook (grpc-agent; sidecar with holdApplicationUntilProxyStarts) must return.
  const wait = Bun.spawn([pod.box.bin, "wait", `--url=http://localhost:${pod.statusPort}/healthz/ready`, "--timeoutSeconds=20"], {
    cwd: pod.box.dir,
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(await wait.exited).toBe(0);
  expect(await new Response(wait.stdout).text()).toContain("Envoy is ready!");

  expect(pod.exitCode()).toBeNull();
  const lines = pod.agent.output().split("\n");
  expect(lines.filter((l) => /^\S+\terror\t/.test(l))).toEqual([]);
  const names = Object.keys(p.env);
  const warnsAboutTemplateVars = lines.filter((l) => /^\S+\twarn\t/.test(l) && names.some((n) => new RegExp(`\\b${n}\\b`).test(l)));
  expect(warnsAboutTemplateVars).toEqual([]);
  expect(lines.some((l) => l.includes("unknown flag ignored"))).toBe(false);
}

describe("Istio's injection templates: the compiled agent starts clean and becomes ready", () => {
  test(`sidecar template: ${SIDECAR.template}`, () => runTemplate(SIDECAR), 45_000);
  test(`gateway template: ${GATEWAY.template}`, () => runTemplate(GATEWAY), 45_000);
  test(`grpc-agent template: ${GRPC_AGENT.template}`, () => runTemplate(GRPC_AGENT), 45_000);
});
