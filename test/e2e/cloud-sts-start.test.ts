// --stsPort at start, on the compiled agent (proxyless, so no Envoy is needed): as in Istio, the
// GoogleTokenExchange plugin needs the GCP project number, and an STS port that cannot be bound
// stops the agent (exit 255, pilot-agent's os.Exit(-1)); with the project known the port serves.

import { afterEach, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";

const boxes: Sandbox[] = [];
const servers: Server[] = [];
afterEach(() => {
  for (const b of boxes.splice(0)) b.cleanup();
  for (const s of servers.splice(0)) s.close();
});

async function runAgent(stsPort: number, env: Record<string, string>, whileRunning?: () => Promise<void>): Promise<{ code: number | null; out: string }> {
  const box = sandbox("agent-sts-start-");
  boxes.push(box);
  const agent = start(box.bin, ["proxy", "sidecar", "--stsPort", String(stsPort)], {
    cwd: box.dir,
    env: {
      POD_NAME: "vm-0",
      POD_NAMESPACE: "demo",
      INSTANCE_IP: "10.9.8.7",
      DISABLE_ENVOY: "true",
      CA_ADDR: "127.0.0.1:1",
      CA_ROOT_CA: "SYSTEM",
      PROXY_CONFIG: JSON.stringify({ statusPort: await freePort(), discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" }),
      ...env,
    },
  });
  const outcome = await Promise.race([agent.proc.exited.then(() => "exited" as const), agent.waitFor(/Agent started/, 15_000).then(() => "started" as const)]);
  if (outcome === "started") {
    await whileRunning?.();
    agent.proc.kill("SIGTERM");
    await agent.proc.exited;
  }
  return { code: outcome === "exited" ? agent.proc.exitCode : null, out: agent.output() };
}

test("--stsPort without a GCP project number stops the agent with Istio's message", async () => {
  const r = await runAgent(await freePort(), { CLOUD_PLATFORM: "none" });
  expect(r.code).toBe(255);
  expect(r.out).toContain("GoogleTokenExchange token manager specified but failed to ready GCP project information");
}, 30_000);

test("--stsPort on a port already taken stops the agent naming the flag", async () => {
  const port = await freePort();
  const taken = createServer();
  servers.push(taken);
  await new Promise<void>((r) => taken.listen(port, "127.0.0.1", () => r()));
  const r = await runAgent(port, { CLOUD_PLATFORM: "gcp", GCP_METADATA: "proj|4242|c1|us-central1-a" });
  expect(r.code).toBe(255);
  expect(r.out).toContain(`STS server cannot listen on 127.0.0.1:${port} (--stsPort)`);
}, 30_000);

test("with the project number from GCP_METADATA the port serves, on 127.0.0.1", async () => {
  const port = await freePort();
  let dump = "";
  let status = 0;
  const r = await runAgent(port, { CLOUD_PLATFORM: "gcp", GCP_METADATA: "proj|4242|c1|us-central1-a" }, async () => {
    const res = await fetch(`http://127.0.0.1:${port}/stsStatus`);
    status = res.status;
    dump = await res.text();
  });
  expect(r.code).toBeNull();
  expect(status).toBe(200);
  expect(dump).toBe('{\n "tokens": []\n}');
  expect(r.out).toContain(`Start listening on 127.0.0.1:${port}`);
}, 30_000);
