// E2E with a fake mesh: the compiled agent dials the fake istiod over TLS (ISTIOD_SAN), gets the
// workload certificate from the fake CA with the pod's token, spawns the fake Envoy with Istio's
// arguments, serves `default` over the SDS socket, relays xDS for a grpc-js-xds client in Envoy's
// place, and survives an istiod restart (the client resumes and follows the new istiod's config).
// The cases shared with local mode (readiness, rotation, Envoy crash, SIGTERM during a push,
// /quitquitquit) are in suite.ts, run against fake istiod by suite-istiod.test.ts.

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { discoveryTypes } from "../support/fake-istiod.ts";
import { decodeDiscoveryResponse, decodeSecret, greeterTable } from "./envoy-resources.ts";
import { fetchSecret, SPIFFE, startMesh, TOKEN, type Mesh } from "./mesh.ts";
import { fileIfExists, spiffeIds, until, xdsGreeterClient } from "./pod.ts";

grpcXds.register();

const SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

let mesh: Mesh | undefined;
let a: Awaited<ReturnType<typeof startGreeter>>;
let b: Awaited<ReturnType<typeof startGreeter>>;
let client: Awaited<ReturnType<typeof xdsGreeterClient>> | undefined;

beforeAll(async () => {
  a = await startGreeter("A");
  b = await startGreeter("B");
  mesh = await startMesh(greeterTable(a.port), { env: { OUTPUT_CERTS: "etc/certs" } });
});

afterAll(async () => {
  client?.close();
  await mesh?.cleanup();
  a?.stop();
  b?.stop();
});

test("cold start: fake Envoy spawned with Istio's arguments, certificate from the fake CA, SDS serves default with the Secret type URL in every Any", async () => {
  const m = mesh!;
  const start = await until(m.pod, "fake Envoy started", () => m.records().find((r) => r.event === "start"));
  const argv = start.argv!;
  expect(argv[argv.indexOf("-c") + 1]).toMatch(/envoy-rev\.json$/);
  expect(argv[argv.indexOf("--drain-time-s") + 1]).toBe("2");
  expect(argv[argv.indexOf("--drain-strategy") + 1]).toBe("immediate");
  expect(argv[argv.indexOf("--local-address-ip-version") + 1]).toBe("v4");
  expect(argv).toContain("--disable-hot-restart");
  expect(argv).toContain("--allow-unknown-static-fields");

  const chain = await until(m.pod, "OUTPUT_CERTS cert-chain.pem from the fake CA", () => fileIfExists(m.pod.path("etc/certs/cert-chain.pem")));
  expect(await spiffeIds(chain)).toEqual([SPIFFE]);
  // root-cert.pem is the CA's signing root (not the TLS roots of the mesh bundle).
  expect(fileIfExists(m.pod.path("etc/certs/root-cert.pem"))!.trim()).toContain(m.ca.caRootPem.trim());
  const req = m.ca.requests[0]!;
  expect(req.headers["authorization"]).toBe(`Bearer ${TOKEN}`);
  expect(req.uris).toEqual([SPIFFE]);

  // SDS over ./var/run/secrets/workload-spiffe-uds/socket, as Envoy would ask.
  const { Req } = discoveryTypes();
  const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());
  const res = await fetchSecret(m.pod.path("var/run/secrets/workload-spiffe-uds/socket"), "default", enc);
  const response = decodeDiscoveryResponse(res);
  expect(response.typeUrl).toBe(SECRET_TYPE);
  expect(response.resources).toHaveLength(1);
  // Envoy rejects a SotW response whose resources' Any.type_url differs from the message type URL.
  expect(response.resources.map((r) => r.typeUrl)).toEqual([SECRET_TYPE]);
  const secret = decodeSecret(response.resources[0]!.value);
  expect(secret.name).toBe("default");
  expect(secret.certificateChain).toBe(chain);
  expect(secret.privateKey).toContain("PRIVATE KEY");
}, 20_000);

test("xDS relayed from istiod to a grpc-js-xds client; istiod restarted mid-stream, the client resumes", async () => {
  const m = mesh!;
  client = await xdsGreeterClient(m.pod, "xds:///greeter.demo:50051");
  expect(await client.sayHello("alice", 10_000)).toBe("hello alice from A");
  const streamsBefore = m.istiod.streams.length;
  expect(streamsBefore).toBeGreaterThanOrEqual(1);
  expect(m.istiod.streams[0]!.metadata["authorization"]).toBe(`Bearer ${TOKEN}`);

  await m.restartIstiod(greeterTable(b.port));
  const answer = await until(
    m.pod,
    "calls follow the restarted istiod's config (greeter B)",
    async () => {
      const r = await client!.sayHello("bob", 3000);
      return r.endsWith("from B") ? r : undefined;
    },
    15_000,
  );
  expect(answer).toBe("hello bob from B");
  expect(m.istiod.streams.length).toBeGreaterThanOrEqual(1);
  expect(m.pod.exitCode()).toBeNull();
}, 25_000);
