// Environment variables set to the empty string behave as in Istio's pkg/env (os.LookupEnv): only
// an unset variable takes the default. A string set to "" stays "" (GRPC_XDS_BOOTSTRAP="" turns
// the gRPC bootstrap off; Istio's own check is `GRPCBootstrapPath != ""`); an empty bool, number
// or duration does not parse, so it is named and the default used (Istio warns and defaults).

import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { readAll } from "../../src/config/envdecl.ts";
import { PROXY_ENV } from "../../src/config/env.ts";
import { keyOptionsFromEnv } from "../../src/ca/keygen.ts";
import { detectSdsMode } from "../../src/sds/external.ts";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";

describe("environment variables set to the empty string (Istio's pkg/env)", () => {
  test('strings set to "" stay empty; unset ones take the default', () => {
    const set = readAll({ GRPC_XDS_BOOTSTRAP: "", TRUST_DOMAIN: "", PILOT_CERT_PROVIDER: "" }, PROXY_ENV);
    expect(set.values.GRPC_XDS_BOOTSTRAP).toBe("");
    expect(set.values.TRUST_DOMAIN).toBe("");
    expect(set.values.PILOT_CERT_PROVIDER).toBe("");
    expect(set.problems).toEqual([]);
    const unset = readAll({}, PROXY_ENV);
    expect(unset.values.GRPC_XDS_BOOTSTRAP).toBe("./etc/istio/proxy/grpc-bootstrap.json");
    expect(unset.values.TRUST_DOMAIN).toBe("cluster.local");
  });

  test("an empty bool, int or duration is named and defaulted; an empty optional bool counts as set to false", () => {
    const r = readAll({ DISABLE_ENVOY: "", ISTIO_CPU_LIMIT: "", MINIMUM_DRAIN_DURATION: "", PEER_METADATA_DISCOVERY: "" }, PROXY_ENV);
    expect(r.values.DISABLE_ENVOY).toBe(false);
    expect(r.values.MINIMUM_DRAIN_DURATION).toBe(5000);
    expect(r.values.PEER_METADATA_DISCOVERY).toBe(false);
    expect(r.problems.map((p) => p.name).sort()).toEqual(["DISABLE_ENVOY", "ISTIO_CPU_LIMIT", "MINIMUM_DRAIN_DURATION", "PEER_METADATA_DISCOVERY"]);
    expect(readAll({}, PROXY_ENV).values.PEER_METADATA_DISCOVERY).toBeUndefined();
  });

  test('consumers of empty strings behave as Istio\'s: ECC_CURVE="" is P256; WORKLOAD_IDENTITY_SOCKET_FILE="" is refused by name', async () => {
    expect(keyOptionsFromEnv({ ECC_SIGNATURE_ALGORITHM: "ECDSA", ECC_CURVE: "", WORKLOAD_RSA_KEY_SIZE: 2048, PKCS8_KEY: false }).curve).toBe("P256");
    await expect(detectSdsMode("/nonexistent-root", "")).rejects.toThrow('WORKLOAD_IDENTITY_SOCKET_FILE: "" must be a file name, not a path');
  });
});

describe('GRPC_XDS_BOOTSTRAP="" (compiled agent, proxyless)', () => {
  let box: Sandbox | undefined;
  afterEach(() => box?.cleanup());

  test("no gRPC bootstrap is written and readiness does not wait for one", async () => {
    box = sandbox("agent-empty-env-");
    const statusPort = await freePort();
    const agent = start(box.bin, ["proxy", "sidecar"], {
      cwd: box.dir,
      env: {
        POD_NAME: "app-0",
        POD_NAMESPACE: "demo",
        INSTANCE_IP: "10.9.8.7",
        DISABLE_ENVOY: "true",
        GRPC_XDS_BOOTSTRAP: "",
        CA_ROOT_CA: "SYSTEM",
        CA_ADDR: "127.0.0.1:1",
        PROXY_CONFIG: JSON.stringify({ statusPort, discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" }),
      },
    });
    try {
      await agent.waitFor(/Agent started/);
      expect(agent.output()).toContain("GRPC_XDS_BOOTSTRAP is empty: no gRPC xDS bootstrap written");
      const r = await fetch(`http://127.0.0.1:${statusPort}/healthz/ready`);
      expect(r.status).toBe(200);
      expect(existsSync(join(box.dir, "etc/istio/proxy/grpc-bootstrap.json"))).toBe(false);
    } finally {
      agent.proc.kill("SIGTERM");
      await agent.proc.exited;
    }
  }, 20_000);
});
