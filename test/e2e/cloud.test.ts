// E2E on a simulated GCE VM: the compiled agent, pointed at a fake GCE metadata server by
// GCE_METADATA_HOST (as Google's client libraries are), with CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine
// and no Kubernetes token: it gets its certificate and xDS with the metadata server's identity
// token, sends the platform's metadata (PLATFORM_METADATA) and the zone's locality in the Envoy
// bootstrap, and renders a bootstrap that needs the GCP project (Stackdriver tracing).

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { fakeGce, type FakeCloud } from "../platform/fake-clouds.ts";
import { SPIFFE, startMesh, type Mesh } from "./mesh.ts";
import { fileIfExists, spiffeIds, until, xdsGreeterClient } from "./pod.ts";
import { greeterTable } from "./envoy-resources.ts";

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
/** The VM's identity token as GCE would mint it for audience cluster.local (signature not checked here). */
const GCE_TOKEN = `${b64({ alg: "RS256", typ: "JWT" })}.${b64({ aud: "cluster.local", exp: Math.floor(Date.now() / 1000) + 3600, google: { compute_engine: { project_id: "vm-proj" } } })}.c2ln`;

grpcXds.register();

let gce: FakeCloud;
let greeter: Awaited<ReturnType<typeof startGreeter>>;
let mesh: Mesh | undefined;

beforeAll(async () => {
  gce = fakeGce({
    projectId: "vm-proj",
    numericProjectId: "31337",
    zone: "europe-west4-b",
    instanceName: "mesh-vm-7",
    instanceId: "4242",
    attributes: {},
    identity: (aud, format) => (aud === "cluster.local" && format === "full" ? GCE_TOKEN : "wrong-audience-or-format"),
  });
  greeter = await startGreeter("A");
  mesh = await startMesh(greeterTable(greeter.port), {
    env: { CLOUD_PLATFORM: "gcp", GCE_METADATA_HOST: gce.host, CREDENTIAL_FETCHER_TYPE: "GoogleComputeEngine", OUTPUT_CERTS: "etc/certs" },
    proxyConfig: { tracing: { stackdriver: { debug: true } } },
    caToken: GCE_TOKEN,
    noTokenFile: true,
  });
}, 30_000);

afterAll(async () => {
  await mesh?.cleanup();
  gce?.stop();
  greeter?.stop();
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
  const asked = gce.seen.filter((s) => s.path.startsWith("/computeMetadata/v1/"));
  expect(asked.length).toBeGreaterThan(0);
  for (const s of asked) expect(s.headers["metadata-flavor"]).toBe("Google");
  expect(m.pod.agent.output()).toContain("platform gcp");
}, 30_000);

test("GCE VM without a Kubernetes token: the certificate is signed with the metadata server's identity token", async () => {
  const m = mesh!;
  const chain = await until(m.pod, "OUTPUT_CERTS cert-chain.pem from the fake CA", () => fileIfExists(m.pod.path("etc/certs/cert-chain.pem")), 20_000);
  expect(await spiffeIds(chain)).toEqual([SPIFFE]);
  expect(m.ca.requests[0]!.headers["authorization"]).toBe(`Bearer ${GCE_TOKEN}`);
  expect(gce.seen.some((s) => s.path === "/computeMetadata/v1/instance/service-accounts/default/identity?audience=cluster.local&format=full")).toBe(true);
  // Written where the Kubernetes token would be, as Istio's GCE plugin does.
  expect(fileIfExists(m.pod.path("var/run/secrets/tokens/istio-token"))).toBe(GCE_TOKEN);
  expect(m.pod.agent.output()).not.toContain(GCE_TOKEN);
}, 30_000);

test("GCE VM: istiod's xDS stream carries the metadata server's token", async () => {
  const m = mesh!;
  const client = await xdsGreeterClient(m.pod, "xds:///greeter.demo:50051");
  try {
    expect(await client.sayHello("vm", 10_000)).toBe("hello vm from A");
    expect(m.istiod.streams[0]!.metadata["authorization"]).toBe(`Bearer ${GCE_TOKEN}`);
  } finally {
    client.close();
  }
}, 30_000);
