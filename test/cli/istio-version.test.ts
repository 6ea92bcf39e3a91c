// ISTIO_VERSION node metadata: istiod generates config for the proxy's Istio version, so the agent
// sends the Istio release whose contract it implements (1.32.0, the release of istio/istio
// 86c9f01fd735), not its own version; ISTIO_META_ISTIO_VERSION still overrides. `agent version`
// shows both.

import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";

const boxes: Sandbox[] = [];
afterEach(() => {
  for (const b of boxes.splice(0)) b.cleanup();
});

/** Start the agent proxyless until its gRPC bootstrap is written; returns the node metadata. */
async function nodeMetadata(env: Record<string, string>): Promise<Record<string, unknown>> {
  const box = sandbox("agent-istio-version-");
  boxes.push(box);
  const statusPort = await freePort();
  const agent = start(box.bin, ["proxy", "sidecar"], {
    cwd: box.dir,
    env: {
      POD_NAME: "app-0",
      POD_NAMESPACE: "demo",
      INSTANCE_IP: "10.9.8.7",
      DISABLE_ENVOY: "true",
      GRPC_XDS_BOOTSTRAP: "./etc/istio/proxy/grpc-bootstrap.json",
      CA_ROOT_CA: "SYSTEM",
      PROXY_CONFIG: JSON.stringify({ statusPort, discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" }),
      ...env,
    },
  });
  try {
    await agent.waitFor(/gRPC xDS bootstrap written to/);
  } finally {
    agent.proc.kill("SIGKILL");
    await agent.proc.exited;
  }
  const path = join(box.dir, "etc/istio/proxy/grpc-bootstrap.json");
  expect(existsSync(path)).toBe(true);
  return JSON.parse(readFileSync(path, "utf8")).node.metadata;
}

describe("ISTIO_VERSION node metadata", () => {
  test("is the Istio release the agent implements (1.32.0), not the agent's own version", async () => {
    const meta = await nodeMetadata({});
    expect(meta.ISTIO_VERSION).toBe("1.32.0");
  }, 20_000);

  test("ISTIO_META_ISTIO_VERSION still overrides it", async () => {
    const meta = await nodeMetadata({ ISTIO_META_ISTIO_VERSION: "1.31.2" });
    expect(meta.ISTIO_VERSION).toBe("1.31.2");
  }, 20_000);

  test("`agent version` shows the agent's version and that Istio release with its commit", () => {
    const box = sandbox("agent-istio-version-");
    boxes.push(box);
    const run = (args: string[]) => Bun.spawnSync([box.bin, ...args], { cwd: box.dir, env: { PATH: process.env.PATH ?? "" } });
    const long = run(["version"]).stdout.toString();
    expect(long).toContain('IstioVersion:"1.32.0"');
    expect(long).toContain('IstioRevision:"86c9f01fd735"');
    const doc = JSON.parse(run(["version", "-o", "json"]).stdout.toString());
    expect(doc.clientVersion.istio_version).toBe("1.32.0");
    expect(doc.clientVersion.istio_revision).toBe("86c9f01fd735");
    expect(doc.clientVersion.version).not.toBe("1.32.0");
  });
});
