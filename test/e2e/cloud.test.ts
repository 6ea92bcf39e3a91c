// E2E on a simulated GCE VM: the compiled agent, told it is on GCP and pointed at a fake GCE
// metadata server by GCE_METADATA_HOST (as Google's client libraries are), sends the platform's
// metadata to istiod and Envoy (PLATFORM_METADATA), takes its locality from the instance's zone,
// and renders a bootstrap that needs the GCP project (Stackdriver tracing).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { fakeGce, type FakeCloud } from "../platform/fake-clouds.ts";
import { startMesh, type Mesh } from "./mesh.ts";
import { fileIfExists, until } from "./pod.ts";
import { greeterTable } from "./envoy-resources.ts";

let gce: FakeCloud;
let mesh: Mesh | undefined;

beforeAll(async () => {
  gce = fakeGce({ projectId: "vm-proj", numericProjectId: "31337", zone: "europe-west4-b", instanceName: "mesh-vm-7", instanceId: "4242", attributes: {} });
  mesh = await startMesh(greeterTable(1), {
    env: { CLOUD_PLATFORM: "gcp", GCE_METADATA_HOST: gce.host },
    proxyConfig: { tracing: { stackdriver: { debug: true } } },
  });
}, 30_000);

afterAll(async () => {
  await mesh?.cleanup();
  gce?.stop();
});

test("GCE VM: PLATFORM_METADATA and locality from the metadata server in the Envoy bootstrap", async () => {
  const m = mesh!;
  const text = await until(m.pod, "envoy-rev.json written", () => fileIfExists(m.pod.path("etc/istio/proxy/envoy-rev.json")), 20_000);
  const boot = JSON.parse(text);
  expect(boot.node.metadata.PLATFORM_METADATA).toEqual({
    gcp_project: "vm-proj",
    gcp_project_number: "31337",
    gcp_location: "europe-west4-b",
    gcp_gce_instance: "mesh-vm-7",
    gcp_gce_instance_id: "4242",
  });
  expect(boot.node.locality).toEqual({ region: "europe-west4", zone: "europe-west4-b" });
  // Every metadata request carried the header the GCE server insists on.
  const asked = gce.seen.filter((s) => s.path.startsWith("/computeMetadata/v1/"));
  expect(asked.length).toBeGreaterThan(0);
  for (const s of asked) expect(s.headers["metadata-flavor"]).toBe("Google");
  expect(m.pod.agent.output()).toContain("platform gcp");
}, 30_000);
