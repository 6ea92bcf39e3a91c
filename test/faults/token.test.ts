// The CA token goes missing, then comes back; is rejected, then accepted: the compiled agent keeps
// the certificate it has, its renewal attempts fail (UNAUTHENTICATED, the token never logged), and
// it recovers on its own, without a restart, once the token is back. SECRET_TTL=4s: a renewal
// about every 2 s.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { startMesh, TOKEN, type Mesh } from "../e2e/mesh.ts";
import { certSerial, fileIfExists, until } from "../e2e/pod.ts";

let mesh: Mesh | undefined;
beforeAll(async () => {
  mesh = await startMesh(greeterTable(9), { env: { OUTPUT_CERTS: "etc/certs", SECRET_TTL: "4s" } });
}, 30_000);
afterAll(async () => {
  await mesh?.cleanup();
});

const certFile = () => mesh!.pod.path("etc/certs/cert-chain.pem");
const tokenFile = () => mesh!.pod.path("var/run/secrets/tokens/istio-token");

async function renewedAfter(m: Mesh, serial: string, what: string): Promise<void> {
  await until(
    m.pod,
    what,
    async () => {
      const pem = fileIfExists(certFile());
      return pem && (await certSerial(pem)) !== serial ? true : undefined;
    },
    12_000,
  );
}

test("token missing, then written: renewals fail, the certificate is kept, recovery without restart", async () => {
  const m = mesh!;
  await until(m.pod, "first certificate", () => fileIfExists(certFile()));
  rmSync(tokenFile());
  const n0 = m.ca.requests.length;
  await until(m.pod, "a renewal attempt without the token", () => (m.ca.requests.length > n0 ? true : undefined), 10_000);
  const kept = fileIfExists(certFile())!;
  const n1 = m.ca.requests.length;
  await until(m.pod, "another attempt, still without the token", () => (m.ca.requests.length > n1 ? true : undefined), 10_000);
  expect(fileIfExists(certFile())).toBe(kept);
  writeFileSync(tokenFile(), TOKEN);
  await renewedAfter(m, await certSerial(kept), "a new certificate once the token is back");
  expect(m.pod.exitCode()).toBeNull();
}, 40_000);

test("token rejected, then accepted: the same, and the token never reaches the log", async () => {
  const m = mesh!;
  m.ca.mode = "reject-token";
  const n0 = m.ca.requests.length;
  await until(m.pod, "a rejected renewal", () => (m.ca.requests.length > n0 ? true : undefined), 10_000);
  const kept = fileIfExists(certFile())!;
  m.ca.mode = "ok";
  await renewedAfter(m, await certSerial(kept), "a new certificate once the token is accepted");
  expect(m.pod.agent.output()).not.toContain(TOKEN);
  expect(m.pod.exitCode()).toBeNull();
}, 40_000);
