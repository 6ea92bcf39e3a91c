// E2E with a fake mesh and short-lived certificates (SECRET_TTL=4s, so the agent rotates about
// every 2 s): during a CA outage the rotation attempts fail and the last good certificate stays
// in place, and rotation resumes when the CA is back. (Issue-then-rotate and Envoy crash are
// shared with local mode: suite.ts.)

import { afterAll, beforeAll, expect, test } from "bun:test";
import { greeterTable } from "./envoy-resources.ts";
import { startMesh, type Mesh } from "./mesh.ts";
import { certSerial, fileIfExists, until } from "./pod.ts";

let mesh: Mesh | undefined;

beforeAll(async () => {
  mesh = await startMesh(greeterTable(9), { env: { OUTPUT_CERTS: "etc/certs", SECRET_TTL: "4s" } });
});

afterAll(async () => {
  await mesh?.cleanup();
});

const certFile = () => mesh!.pod.path("etc/certs/cert-chain.pem");

test("CA outage during rotation: attempts fail, the last certificate is kept; rotation resumes when the CA is back", async () => {
  const m = mesh!;
  await until(m.pod, "first certificate in OUTPUT_CERTS", () => fileIfExists(certFile()));
  // The requested lifetime is SECRET_TTL.
  expect(m.ca.requests.at(-1)!.validityDuration).toBe(4);
  m.ca.mode = "fail";
  const n0 = m.ca.requests.length;
  await until(m.pod, "a rotation attempt reaching the failing CA", () => (m.ca.requests.length > n0 ? true : undefined), 10_000);
  // Any signing that was in flight has finished by now: this is the certificate to keep.
  const kept = fileIfExists(certFile())!;
  const n1 = m.ca.requests.length;
  await until(m.pod, "another (retried) rotation attempt during the outage", () => (m.ca.requests.length > n1 ? true : undefined), 10_000);
  expect(fileIfExists(certFile())).toBe(kept);
  expect(fileIfExists(m.pod.path("etc/certs/key.pem"))).toContain("PRIVATE KEY");
  expect(m.pod.exitCode()).toBeNull();

  m.ca.mode = "ok";
  const keptSerial = await certSerial(kept);
  await until(
    m.pod,
    "a new certificate after the CA recovered",
    async () => {
      const pem = fileIfExists(certFile());
      return pem && (await certSerial(pem)) !== keptSerial ? true : undefined;
    },
    12_000,
  );
}, 25_000);
