// E2E on a simulated GCE VM: the compiled agent, pointed at a fake GCE metadata server by
// GCE_METADATA_HOST (as Google's client libraries are), with CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine
// and no Kubernetes token: it gets its certificate and xDS with the metadata server's identity
// token, sends the platform's metadata (PLATFORM_METADATA) and the zone's locality in the Envoy
// bootstrap, renders a bootstrap that needs the GCP project (Stackdriver tracing), and serves the
// Security Token Service on --stsPort: Envoy's token exchange, done through the agent against fake
// Google STS and IAM endpoints (GOOGLE_STS_ENDPOINT, GOOGLE_IAM_CREDENTIALS_ENDPOINT).

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { fakeGce, type FakeCloud } from "../platform/fake-clouds.ts";
import { startFakeGoogle, type FakeGoogle } from "../sts/fake-google.ts";
import { SPIFFE, startMesh, type Mesh } from "./mesh.ts";
import { fileIfExists, freePort, spiffeIds, until, xdsGreeterClient } from "./pod.ts";
import { greeterTable } from "./envoy-resources.ts";

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
/** The VM's identity token as GCE would mint it for audience cluster.local (signature not checked here). */
const GCE_TOKEN = `${b64({ alg: "RS256", typ: "JWT" })}.${b64({ aud: "cluster.local", exp: Math.floor(Date.now() / 1000) + 3600, google: { compute_engine: { project_id: "vm-proj" } } })}.c2ln`;

grpcXds.register();

let gce: FakeCloud;
let greeter: Awaited<ReturnType<typeof startGreeter>>;
let mesh: Mesh | undefined;
let google: FakeGoogle;
let stsPort: number;

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
  google = startFakeGoogle({ expireTime: new Date(Date.now() + 3600_000).toISOString() });
  stsPort = await freePort();
  mesh = await startMesh(greeterTable(greeter.port), {
    env: {
      CLOUD_PLATFORM: "gcp",
      GCE_METADATA_HOST: gce.host,
      CREDENTIAL_FETCHER_TYPE: "GoogleComputeEngine",
      OUTPUT_CERTS: "etc/certs",
      GOOGLE_STS_ENDPOINT: google.stsUrl,
      GOOGLE_IAM_CREDENTIALS_ENDPOINT: google.iamBase,
    },
    args: ["proxy", "sidecar", "--stsPort", String(stsPort)],
    proxyConfig: { tracing: { stackdriver: { debug: true } } },
    caToken: GCE_TOKEN,
    noTokenFile: true,
  });
}, 30_000);

afterAll(async () => {
  await mesh?.cleanup();
  gce?.stop();
  google?.stop();
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
  expect(boot.node.metadata.STS_PORT).toBe(String(stsPort));
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

test("GCE VM: --stsPort exchanges the workload's token for a Google access token, as Envoy's STS client asks", async () => {
  const m = mesh!;
  // Envoy's google_grpc sts_service posts the token file it is given (the one the GCE fetcher wrote).
  const subject = await until(m.pod, "the token file", () => fileIfExists(m.pod.path("var/run/secrets/tokens/istio-token")), 20_000);
  const body = new URLSearchParams({
    grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
    subject_token: subject,
    subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
    scope: "https://www.googleapis.com/auth/cloud-platform",
  }).toString();
  const post = () => fetch(`http://127.0.0.1:${stsPort}/token`, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body });
  const res = await until(m.pod, "the STS port answering", () => post().catch(() => undefined), 20_000);
  expect(res.status).toBe(200);
  const answer = JSON.parse(await res.text());
  expect(answer).toMatchObject({
    access_token: "ya29.access-FAKE-0002",
    issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
    token_type: "Bearer",
  });
  // IAM's expireTime is an hour away: Istio's expires_in is the whole seconds left.
  expect(answer.expires_in).toBeGreaterThan(3500);
  expect(answer.expires_in).toBeLessThanOrEqual(3600);
  // The exchange used the project number from the metadata server and the GCE identity provider.
  expect(JSON.parse(google.stsCalls[0]!.body)).toMatchObject({ audience: "identitynamespace:cluster.local:GoogleComputeEngine", subjectToken: GCE_TOKEN });
  expect(google.iamCalls[0]!.path).toBe("/v1/projects/-/serviceAccounts/service-31337@gcp-sa-meshdataplane.iam.gserviceaccount.com:generateAccessToken");
  // A second request is answered from the cache.
  expect((await post()).status).toBe(200);
  expect(google.stsCalls).toHaveLength(1);
  // Malformed: the RFC's error, Istio's status code.
  const bad = await fetch(`http://127.0.0.1:${stsPort}/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: "grant_type=password",
  });
  expect(bad.status).toBe(400);
  expect(JSON.parse(await bad.text()).error).toBe("invalid_request");
  const dump = JSON.parse(await (await fetch(`http://127.0.0.1:${stsPort}/stsStatus`)).text());
  expect(dump.tokens.map((t: { token_type: string }) => t.token_type)).toEqual(["federated token", "access token"]);
  // Nothing secret in the agent's log, checked after a later line (the dump above is logged at debug only; the invalid request warns).
  await until(m.pod, "the invalid request's warning", () => (m.pod.agent.output().includes("STS request is invalid") ? true : undefined), 5_000);
  const out = m.pod.agent.output();
  expect(out).toContain("fetched access token");
  for (const secret of [GCE_TOKEN, "ya29.federated-FAKE-0001", "ya29.access-FAKE-0002"]) expect(out).not.toContain(secret);
}, 30_000);
