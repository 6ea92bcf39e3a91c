// The istiod connection's redials while istiod is unreachable (an outage, a NetworkPolicy
// mistake): each reads the root file, which is parsed and loaded into TLS once per content, and a
// root rewritten between redials is checked again.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IstiodUpstream } from "../../src/xds/upstream.ts";
import type { UpstreamDialConfig } from "../../src/xds/upstream-config.ts";
import { servingCert } from "../support/fake-ca.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "upstream-redial-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One stream to the unreachable istiod; resolves with its close status message. */
function attempt(up: IstiodUpstream): Promise<string> {
  return new Promise((resolve) => {
    up.open(
      { path: "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources", delta: false },
      { onConnected() {}, onData() {}, onDrain() {}, onClose: (s) => resolve(s.message ?? "") },
    );
  });
}

test("redials to an unreachable istiod parse and load an unchanged root once; a broken or rotated one is seen", async () => {
  const root = join(dir, "root-cert.pem");
  writeFileSync(root, (await servingCert()).rootPem);
  const cfg: UpstreamDialConfig = {
    address: "127.0.0.1:1",
    host: "127.0.0.1",
    port: 1,
    tls: { root: { kind: "file", path: root }, servername: "istiod.istio-system.svc" },
    tokenPath: join(dir, "no-token"),
    clusterId: "Kubernetes",
    xdsHeaders: {},
    keepaliveMs: 0,
    keepaliveTimeoutMs: 0,
    connectTimeoutMs: 5000,
    compliancePolicy: "",
  };
  const up = new IstiodUpstream(cfg);
  for (let i = 0; i < 3; i++) expect(await attempt(up)).toContain("ECONNREFUSED");
  expect(up.rootCheck.parses).toBe(1);
  expect(up.tlsContexts.made).toBe(1);
  writeFileSync(root, "not a certificate\n");
  expect(await attempt(up)).toContain(`root certificate ${root} is not PEM`);
  writeFileSync(root, (await servingCert()).rootPem); // rotated
  expect(await attempt(up)).toContain("ECONNREFUSED");
  expect(up.rootCheck.parses).toBe(3);
  expect(up.tlsContexts.made).toBe(2);
});
