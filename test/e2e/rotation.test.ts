// E2E with a fake mesh and short-lived certificates (SECRET_TTL=4s, so the agent rotates about
// every 2 s): the workload certificate is issued then rotated; during a CA outage the rotation
// attempts fail and the last good certificate stays in place, and rotation resumes when the CA
// is back; a crashed Envoy is restarted by the restart policy while the agent keeps running.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { greeterTable } from "./envoy-resources.ts";
import { SPIFFE, startMesh, type Mesh } from "./mesh.ts";
import { certSerial, fileIfExists, spiffeIds, until } from "./pod.ts";

let mesh: Mesh | undefined;

beforeAll(async () => {
  mesh = await startMesh(greeterTable(9), { env: { OUTPUT_CERTS: "etc/certs", SECRET_TTL: "4s", ENVOY_RESTART_BACKOFF_BASE: "100ms" } });
});

afterAll(async () => {
  await mesh?.cleanup();
});

const certFile = () => mesh!.pod.path("etc/certs/cert-chain.pem");

test("the workload certificate is issued, then rotated before it expires", async () => {
  const m = mesh!;
  const first = await until(m.pod, "first certificate in OUTPUT_CERTS", () => fileIfExists(certFile()));
  expect(await spiffeIds(first)).toEqual([SPIFFE]);
  const firstSerial = await certSerial(first);
  const rotated = await until(m.pod, "a rotated certificate (new serial) in OUTPUT_CERTS", async () => {
    const pem = fileIfExists(certFile());
    return pem && (await certSerial(pem)) !== firstSerial ? pem : undefined;
  }, 12_000);
  expect(await spiffeIds(rotated)).toEqual([SPIFFE]);
  expect(m.ca.requests.length).toBeGreaterThanOrEqual(2);
  // The requested lifetime is SECRET_TTL.
  expect(m.ca.requests.at(-1)!.validityDuration).toBe(4);
}, 20_000);

test("CA outage during rotation: attempts fail, the last certificate is kept; rotation resumes when the CA is back", async () => {
  const m = mesh!;
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
  await until(m.pod, "a new certificate after the CA recovered", async () => {
    const pem = fileIfExists(certFile());
    return pem && (await certSerial(pem)) !== keptSerial ? true : undefined;
  }, 12_000);
}, 25_000);

test("Envoy crash: the restart policy starts Envoy again and the agent keeps running", async () => {
  const m = mesh!;
  const starts = () => m.records().filter((r) => r.event === "start");
  const first = await until(m.pod, "fake Envoy started", () => starts()[0]);
  await until(m.pod, "fake Envoy admin /ready", async () => ((await fetch(`http://127.0.0.1:${m.pod.adminPort}/ready`, { signal: AbortSignal.timeout(1000) })).ok ? true : undefined));
  await fetch(`http://127.0.0.1:${m.pod.adminPort}/fake/crash?signal=SIGKILL`, { method: "POST", signal: AbortSignal.timeout(2000) });
  const second = await until(m.pod, "fake Envoy restarted after the crash", () => starts().find((r) => r.pid !== first.pid), 10_000);
  expect(second.argv).toEqual(first.argv);
  expect(m.pod.exitCode()).toBeNull();
  await until(m.pod, "restarted Envoy serves /ready", async () => ((await fetch(`http://127.0.0.1:${m.pod.adminPort}/ready`, { signal: AbortSignal.timeout(1000) })).ok ? true : undefined));

  m.pod.agent.proc.kill("SIGTERM");
  expect(await m.pod.waitExit(15_000)).toBe(0);
}, 20_000);
