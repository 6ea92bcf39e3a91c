// The effective default configuration, pinned (as kuma's default-config.golden.yaml): what the real
// flag parser and config loader produce for `agent proxy sidecar` with an empty environment and no
// mesh config file, rendered with sorted keys. A changed default — a ProxyConfig field, an env
// var's default, a flag's default, the node identity's fallbacks — is then a reviewed diff of
// test/config/golden/default-config.golden.yaml. Refresh (fails that run, by design):
//   UPDATE_GOLDEN=1 node_modules/.bin/bun test test/config/default-config.test.ts

import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import { expectGolden } from "../support/golden.ts";
import { testLoad } from "../support/config.ts";

const GOLDEN = join(import.meta.dir, "golden/default-config.golden.yaml");

test("the effective configuration from an empty environment matches the golden file", () => {
  const { config, warnings } = testLoad();
  // Everything the loader decides; rawEnv is the (empty) input itself.
  const { rawEnv, ...effective } = config;
  expect(rawEnv).toEqual({});
  const text = [
    "# The effective configuration of `agent proxy sidecar` with an empty environment and no mesh",
    "# config file (test/config/default-config.test.ts). Host inputs are the test's: interfaces lo",
    '# 127.0.0.1 and eth0 10.1.2.3, 2 CPUs, uid 1337, root /, version "test".',
    YAML.stringify({ ...effective, loadWarnings: warnings }, { sortMapEntries: true, lineWidth: 0 }),
  ].join("\n");
  expectGolden(GOLDEN, text);
});

test("the golden file pins Istio's defaults where the agent and istiod meet", () => {
  const doc = YAML.parse(readFileSync(GOLDEN, "utf8"));
  // Values from Istio's mesh.DefaultProxyConfig and pkg/env declarations (reference/istio-agent.md).
  expect(doc.proxyConfig.statusPort).toBe(15020);
  expect(doc.proxyConfig.proxyAdminPort).toBe(15000);
  expect(doc.proxyConfig.discoveryAddress).toBe("istiod.istio-system.svc:15012");
  expect(doc.proxyConfig.configPath).toBe("./etc/istio/proxy");
  expect(doc.proxyConfig.drainDuration).toBe("45s");
  expect(doc.env.TRUST_DOMAIN).toBe("cluster.local");
  expect(doc.env.GRPC_XDS_BOOTSTRAP).toBe("./etc/istio/proxy/grpc-bootstrap.json");
  expect(doc.flags.meshConfig).toBe("./etc/istio/config/mesh");
});
