// The CA goes down right after the first certificate is issued, so every renewal fails
// (SECRET_TTL=10s: the first renewal is due about 5 s in). What must hold: the valid certificate
// stays in service, untouched; retries back off (a bounded number of attempts, never a tight
// loop); once the CA returns, a new certificate arrives without a restart.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { startMesh, type Mesh } from "../e2e/mesh.ts";
import { certSerial, fileIfExists, until } from "../e2e/pod.ts";
import { loadX509 } from "../support/x509.ts";

let mesh: Mesh | undefined;
beforeAll(async () => {
  mesh = await startMesh(greeterTable(9), { env: { OUTPUT_CERTS: "etc/certs", SECRET_TTL: "10s" } });
}, 30_000);
afterAll(async () => {
  await mesh?.cleanup();
});

const certFile = () => mesh!.pod.path("etc/certs/cert-chain.pem");

test("CA down from the first renewal: the valid certificate is kept, retries are bounded, recovery when the CA returns", async () => {
  const m = mesh!;
  const first = await until(m.pod, "first certificate", () => fileIfExists(certFile()));
  m.ca.mode = "fail";
  const n0 = m.ca.requests.length;
  await until(m.pod, "the first renewal reaching the CA", () => (m.ca.requests.length > n0 ? true : undefined), 15_000);
  const t0 = performance.now();
  const firstFailureAt = Date.now();
  // Watch 6 s of the outage. Each renewal is up to 5 CA requests (Istio's retry interceptor: 5
  // attempts, 100 ms doubling, ~1.5 s); failed renewals back off 1 s doubling (±10 %), so renewals
  // start at about 0, 2.5 and 6 s: at most 4 within the window (a loaded machine only delays them).
  const WINDOW_MS = 6000;
  await Bun.sleep(WINDOW_MS);
  const attempts = m.ca.requests.length - n0;
  const renewals = Math.max(0, ...[...m.pod.agent.output().matchAll(/renewing the workload certificate failed \(attempt (\d+)\)/g)].map((x) => Number(x[1])));
  expect(renewals).toBeGreaterThanOrEqual(1); // it does retry
  expect(renewals).toBeLessThanOrEqual(4);
  expect(attempts).toBeLessThanOrEqual(5 * (renewals + 1)); // + one renewal still in flight
  const kept = fileIfExists(certFile())!;
  expect(kept).toBe(first);
  const x509 = await loadX509();
  const notAfter = new x509.X509Certificate(kept).notAfter.getTime();
  expect(notAfter).toBeGreaterThan(firstFailureAt); // renewal starts while the certificate is valid
  expect(m.pod.agent.output()).toMatch(/renewing the workload certificate failed \(attempt \d+\).*still serving the current certificate/);
  expect(m.pod.exitCode()).toBeNull();

  m.ca.mode = "ok";
  const back = performance.now();
  const keptSerial = await certSerial(kept);
  await until(
    m.pod,
    "a new certificate once the CA is back",
    async () => {
      const pem = fileIfExists(certFile());
      return pem && (await certSerial(pem)) !== keptSerial ? true : undefined;
    },
    20_000,
  );
  const recoveredMs = performance.now() - back;
  expect(m.pod.exitCode()).toBeNull();
  console.log(
    `ca-down: ${renewals} failed renewals, ${attempts} CA requests in ${((performance.now() - t0 - recoveredMs) / 1000).toFixed(1)} s of outage; kept cert had ${((notAfter - firstFailureAt) / 1000).toFixed(1)} s left at the first failure; renewed ${(recoveredMs / 1000).toFixed(1)} s after`,
  );
}, 60_000);
