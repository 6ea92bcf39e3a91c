// Errors Istio treats as fatal at start stop the agent with a message naming the input, and the
// process exits 255 (pilot-agent's os.Exit(-1)): a bad ISTIO_KUBE_APP_PROBERS, a Prometheus scrape
// port equal to the status port, a missing root CA where Istio requires one. Each case also has a
// control run showing the same pod starts once the input is fixed.

import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";

const boxes: Sandbox[] = [];
afterEach(() => {
  for (const b of boxes.splice(0)) b.cleanup();
});

interface Run {
  code: number | null;
  out: string;
}

/** Start the agent (proxyless, so no Envoy is needed); stop it once started, or let it fail. */
async function runAgent(env: Record<string, string>, pc: Record<string, unknown> = {}, files: Record<string, string> = {}): Promise<Run> {
  const box = sandbox("agent-fatal-");
  boxes.push(box);
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(box.dir, rel)), { recursive: true });
    writeFileSync(join(box.dir, rel), text);
  }
  const statusPort = await freePort();
  const agent = start(box.bin, ["proxy", "sidecar"], {
    cwd: box.dir,
    env: {
      POD_NAME: "app-0",
      POD_NAMESPACE: "demo",
      INSTANCE_IP: "10.9.8.7",
      DISABLE_ENVOY: "true",
      CA_ADDR: "127.0.0.1:1",
      PROXY_CONFIG: JSON.stringify({ statusPort, discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE", ...pc }),
      ...env,
    },
  });
  const outcome = await Promise.race([agent.proc.exited.then(() => "exited" as const), agent.waitFor(/Agent started/, 15_000).then(() => "started" as const)]);
  if (outcome === "started") {
    agent.proc.kill("SIGTERM");
    await agent.proc.exited;
  }
  return { code: outcome === "exited" ? agent.proc.exitCode : null, out: agent.output() };
}

const ROOT = { "var/run/secrets/istio/root-cert.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" };

describe("errors Istio treats as fatal at start", () => {
  test("a bad ISTIO_KUBE_APP_PROBERS stops the agent naming the variable and the path", async () => {
    const bad = await runAgent({ CA_ROOT_CA: "SYSTEM", ISTIO_KUBE_APP_PROBERS: JSON.stringify({ "/app-health/web/livez": { httpGet: { port: "http" } } }) });
    expect(bad.code).toBe(255);
    expect(bad.out).toContain("ISTIO_KUBE_APP_PROBERS: invalid prober config for /app-health/web/livez, the port must be int type");
    const notJson = await runAgent({ CA_ROOT_CA: "SYSTEM", ISTIO_KUBE_APP_PROBERS: "{not json" });
    expect(notJson.code).toBe(255);
    expect(notJson.out).toContain("ISTIO_KUBE_APP_PROBERS: failed to decode app prober config");
    const good = await runAgent({ CA_ROOT_CA: "SYSTEM", ISTIO_KUBE_APP_PROBERS: JSON.stringify({ "/app-health/web/livez": { httpGet: { port: 8080 } } }) });
    expect(good.code).toBeNull();
  }, 45_000);

  test("a Prometheus scrape port equal to the status port stops the agent naming ISTIO_PROMETHEUS_ANNOTATIONS", async () => {
    const statusPort = await freePort();
    const bad = await runAgent(
      { CA_ROOT_CA: "SYSTEM", ISTIO_PROMETHEUS_ANNOTATIONS: JSON.stringify({ scrape: "true", port: String(statusPort) }) },
      { statusPort },
    );
    expect(bad.code).toBe(255);
    expect(bad.out).toContain(
      `ISTIO_PROMETHEUS_ANNOTATIONS port: invalid prometheus scrape configuration: application port is the same as agent port (${statusPort})`,
    );
    const good = await runAgent({ CA_ROOT_CA: "SYSTEM", ISTIO_PROMETHEUS_ANNOTATIONS: JSON.stringify({ scrape: "true", port: "9090" }) });
    expect(good.code).toBeNull();
  }, 30_000);

  test("a missing root CA for the CA connection stops the agent naming the file", async () => {
    const bad = await runAgent({});
    expect(bad.code).toBe(255);
    expect(bad.out).toContain("root CA file for CA does not exist");
    expect(bad.out).toContain("var/run/secrets/istio/root-cert.pem");
    const good = await runAgent({}, {}, ROOT);
    expect(good.code).toBeNull();
  }, 30_000);

  test("a missing root CA for the istiod connection (auth policy not NONE) stops the agent naming the file", async () => {
    const bad = await runAgent({ CA_ROOT_CA: "SYSTEM" }, { controlPlaneAuthPolicy: "MUTUAL_TLS" });
    expect(bad.code).toBe(255);
    expect(bad.out).toContain("root CA file for XDS does not exist ./var/run/secrets/istio/root-cert.pem");
    const good = await runAgent({ CA_ROOT_CA: "SYSTEM" }, { controlPlaneAuthPolicy: "MUTUAL_TLS" }, ROOT);
    expect(good.code).toBeNull();
  }, 30_000);
});
