// ./var/run/secrets/credential-uds/socket detected at start, as Istio's generateNodeMetadata: a
// live socket adds the node metadata `credential: "true"` (in Envoy's bootstrap); a socket file
// nobody answers on is stale and removed; no socket, no key.

import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { CREDENTIAL_SOCKET_PATH, detectCredentialSocket } from "../../src/sds/external.ts";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";

let box: Sandbox | undefined;
let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
  box?.cleanup();
  box = undefined;
});

async function listenAt(path: string): Promise<Server> {
  mkdirSync(join(path, ".."), { recursive: true });
  const s = createServer((c) => c.end());
  await new Promise<void>((r) => s.listen(path, () => r()));
  return s;
}

describe("credential SDS socket detection", () => {
  test("live socket: true; stale socket file: removed, false; none: false", async () => {
    box = sandbox("agent-cred-");
    const path = join(box.dir, CREDENTIAL_SOCKET_PATH);
    expect(await detectCredentialSocket(box.dir)).toBe(false);
    server = await listenAt(path);
    expect(await detectCredentialSocket(box.dir)).toBe(true);
    expect(existsSync(path)).toBe(true);
    // A plain file where the socket should be: nobody answers, so it is stale and removed.
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    writeFileSync(path, "");
    expect(await detectCredentialSocket(box.dir)).toBe(false);
    expect(existsSync(path)).toBe(false);
  });

  test('the compiled agent finds ./var/run/secrets/credential-uds/socket and sets credential: "true" in Envoy\'s node metadata', async () => {
    box = sandbox("agent-cred-");
    server = await listenAt(join(box.dir, CREDENTIAL_SOCKET_PATH));
    // A stand-in Envoy that only stays alive: the bootstrap is kept while it runs.
    const envoy = join(box.dir, "envoy");
    writeFileSync(envoy, "#!/bin/sh\nexec sleep 30\n");
    chmodSync(envoy, 0o755);
    const statusPort = await freePort();
    const adminPort = await freePort();
    const agent = start(box.bin, ["proxy", "sidecar"], {
      cwd: box.dir,
      env: {
        POD_NAME: "app-0",
        POD_NAMESPACE: "demo",
        INSTANCE_IP: "10.9.8.7",
        CA_ROOT_CA: "SYSTEM",
        CA_ADDR: "127.0.0.1:1",
        PROXY_CONFIG: JSON.stringify({
          statusPort,
          proxyAdminPort: adminPort,
          binaryPath: envoy,
          discoveryAddress: "127.0.0.1:1",
          controlPlaneAuthPolicy: "NONE",
        }),
      },
    });
    try {
      await agent.waitFor(/Agent started/);
      const bootstrap = JSON.parse(readFileSync(join(box.dir, "etc/istio/proxy/envoy-rev.json"), "utf8"));
      expect(bootstrap.node.metadata.credential).toBe("true");
      expect(agent.output()).toContain("Credential SDS socket found");
    } finally {
      // Two signals: the second skips the drain and stops the stand-in Envoy at once.
      agent.proc.kill("SIGTERM");
      await agent.waitFor(/Received SIGTERM/, 5_000).catch(() => {});
      agent.proc.kill("SIGTERM");
      const gone = await Promise.race([agent.proc.exited.then(() => true), Bun.sleep(5_000).then(() => false)]);
      if (!gone) agent.proc.kill("SIGKILL");
    }
  }, 20_000);
});
