// The "Done when" check of drop-in parity: the compiled agent started with exactly the arguments,
// environment and pod files Istio's own injector gives the istio-proxy container (rendered by
// test/interop/injector from the chart's sidecar, gateway and grpc-agent templates; made into a
// process by test/interop/support/kubelet.ts as the kubelet would) in a fake mesh (fake istiod +
// CA, the Envoy stand-in where the template runs Envoy). Each must come up with no error, no
// warning about any variable the template sets, and ready as Istio would be: /healthz/ready 200,
// and the template's postStart `pilot-agent wait` (run with the compiled binary) returns 0.
// The differential on ~200 rendered pods against Istio's agent is test/interop/injection-diff.

import { afterEach, beforeAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { startMesh, type Mesh } from "../e2e/mesh.ts";
import { httpGet, until } from "../e2e/pod.ts";
import { interopUnmet } from "../interop/support/go-build.ts";
import { renderWorkloads } from "../interop/support/injector.ts";
import { INSTALLS } from "../interop/support/injection-corpus.ts";
import { container, podOf, processOf, volumeFiles, type Pod } from "../interop/support/kubelet.ts";

/** A Deployment `greeter` in namespace `demo`, service account `greeter-client`, one app container on 8080, 2 CPU / 1 GiB limits on the proxy. */
function greeter(template: string, annotations: Record<string, string> = {}): Record<string, unknown> {
  const containers =
    template === "gateway"
      ? [{ name: "istio-proxy", image: "auto" }]
      : [{ name: "app", image: "registry.example/app:1", ports: [{ name: "http", containerPort: 8080 }] }];
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "greeter", namespace: "demo" },
    spec: {
      selector: { matchLabels: { app: "greeter" } },
      template: {
        metadata: {
          labels: { app: "greeter" },
          annotations: { "inject.istio.io/templates": template, "sidecar.istio.io/nativeSidecar": "false", ...annotations },
        },
        spec: { serviceAccountName: "greeter-client", containers },
      },
    },
  };
}

const TEMPLATES = ["sidecar", "gateway", "grpc-agent"] as const;

let mesh: Mesh | undefined;
afterEach(async () => {
  await mesh?.cleanup();
  mesh = undefined;
});

describeRequiring({ check: () => interopUnmet(["injector"]) }, "Istio's injection templates: the compiled agent starts clean and becomes ready", () => {
  const pods = new Map<string, Pod>();
  beforeAll(async () => {
    const rendered = await renderWorkloads(
      INSTALLS.filter((i) => i.id === "default"),
      TEMPLATES.map((t) => ({ name: t, install: "default", object: greeter(t) })),
    );
    for (const r of rendered) {
      if (!r.object) throw new Error(`Istio's injector refused the ${r.name} template: ${r.error}`);
      pods.set(
        r.name,
        podOf(r.object, {
          name: "greeter-7d9f8b6c5d-x2k4q",
          namespace: "demo",
          uid: "00000000-1111-4222-8333-444455556666",
          podIP: "127.0.0.1",
          hostIP: "127.0.0.1",
          nodeName: "node-1",
          nodeCpu: "4",
          nodeMemory: "8Gi",
          token: "(the mesh's)",
          rootCert: "(the mesh's)",
        }),
      );
    }
  }, 120_000);

  async function runTemplate(name: string): Promise<void> {
    const pod = pods.get(name)!;
    const proxy = container(pod, "istio-proxy")!;
    // Paths under the container's mounts are relative to the pod's root (the agent's working directory).
    const { args, env } = processOf(pod, proxy, ".");
    const { PROXY_CONFIG, PATH: _path, HOSTNAME: _host, ...rest } = env;
    // The token and root certificate are the fake mesh's; the other files are the volumes' (downward API).
    const files = Object.fromEntries(Object.entries(volumeFiles(pod, proxy).files).filter(([p]) => p.startsWith("etc/istio/pod/")));
    mesh = await startMesh(greeterTable(1), {
      // E2E_ENVOY_XDS makes the Envoy stand-in fetch CDS/LDS as Envoy would; not a template variable.
      env: { ...rest, E2E_ENVOY_XDS: "1" },
      envFor: ({ caAddress }) => ({ CA_ADDR: caAddress }),
      proxyConfig: JSON.parse(PROXY_CONFIG?.trim() || "{}"),
      args,
      files,
    });
    const p = mesh.pod;
    const ready = await until(
      p,
      `${name}: GET /healthz/ready answers 200`,
      async () => {
        const r = await httpGet(`http://127.0.0.1:${p.statusPort}/healthz/ready`);
        return r.status === 200 ? r : undefined;
      },
      20_000,
    );
    expect(ready.status).toBe(200);

    // The postStart hook (grpc-agent; sidecar with holdApplicationUntilProxyStarts) must return.
    const wait = Bun.spawn([p.box.bin, "wait", `--url=http://localhost:${p.statusPort}/healthz/ready`, "--timeoutSeconds=20"], {
      cwd: p.box.dir,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await wait.exited).toBe(0);
    expect(await new Response(wait.stdout).text()).toContain("Envoy is ready!");

    expect(p.exitCode()).toBeNull();
    const lines = p.agent.output().split("\n");
    expect(lines.filter((l) => /^\S+\terror\t/.test(l))).toEqual([]);
    const names = Object.keys(rest);
    const warnsAboutTemplateVars = lines.filter((l) => /^\S+\twarn\t/.test(l) && names.some((n) => new RegExp(`\\b${n}\\b`).test(l)));
    expect(warnsAboutTemplateVars).toEqual([]);
    expect(lines.some((l) => l.includes("unknown flag ignored"))).toBe(false);
  }

  for (const t of TEMPLATES) test(`${t} template, as Istio's injector renders it`, () => runTemplate(t), 45_000);
});
