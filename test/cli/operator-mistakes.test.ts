// Mistakes a new operator made on a VM set up as Istio documents it (issue 33, item 6), each
// reported badly before: the compiled agent now names the file or variable and what to change.
// Every test starts dist/agent the way istio-start.sh would (PROV_CERT/OUTPUT_CERTS, no
// KUBERNETES_SERVICE_HOST) and waits for the line it must print, bounded.

import { afterEach, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { sandbox, start, type Running, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";
import { describeRequiring } from "../support/requires.ts";
import { jwt, makeCa } from "../doctor/pki.ts";
import { xdsYamlWithPort } from "../e2e/pod.ts";

const boxes: Sandbox[] = [];
const runs: Running[] = [];
afterEach(async () => {
  for (const r of runs.splice(0)) if (r.proc.exitCode === null) r.proc.kill("SIGKILL");
  for (const b of boxes.splice(0)) b.cleanup();
});

interface Vm {
  box: Sandbox;
  path(rel: string): string;
  write(rel: string, text: string): void;
  start(env?: Record<string, string>, pc?: Record<string, unknown>, args?: string[]): Promise<Running & { statusPort: number }>;
}

function vm(): Vm {
  const box = sandbox("agent-vm-");
  boxes.push(box);
  const path = (rel: string) => join(box.dir, rel);
  return {
    box,
    path,
    write(rel, text) {
      mkdirSync(dirname(path(rel)), { recursive: true });
      writeFileSync(path(rel), text);
    },
    async start(env = {}, pc = {}, args = ["proxy", "sidecar"]) {
      const statusPort = await freePort();
      const r = start(box.bin, args, {
        cwd: box.dir,
        env: {
          POD_NAME: "vm-1",
          POD_NAMESPACE: "vm-ns",
          SERVICE_ACCOUNT: "vm-sa",
          INSTANCE_IP: "10.9.8.7",
          ISTIO_CPU_LIMIT: "64",
          DISABLE_ENVOY: "true",
          PROV_CERT: path("etc/certs"),
          OUTPUT_CERTS: path("etc/certs"),
          PROXY_CONFIG: JSON.stringify({ statusPort, discoveryAddress: "127.0.0.1:1", ...pc }),
          ...env,
        },
      });
      runs.push(r);
      return Object.assign(r, { statusPort });
    },
  };
}

const exited = (r: Running, ms = 15_000) => Promise.race([r.proc.exited, Bun.sleep(ms).then(() => null)]);

test("a root cert that is not PEM: the file is named, no bare Invalid CA", async () => {
  const v = vm();
  v.write("etc/certs/root-cert.pem", "this is not a certificate\n");
  const r = await v.start({ CA_ADDR: "127.0.0.1:1" });
  await r.waitFor(new RegExp(`root certificate ${v.path("etc/certs/root-cert.pem")} is not PEM \\(no "-----BEGIN CERTIFICATE-----" block\\)`), 20_000);
  expect(r.output()).not.toContain("Invalid CA");
}, 30_000);

describeRequiring({ tools: ["openssl"], apt: ["openssl"] }, "the CA token at start", () => {
  test("missing: a warning at start naming the file, while the CA is unreachable", async () => {
    const v = vm();
    v.write("etc/certs/root-cert.pem", makeCa().cert);
    const r = await v.start({ CA_ADDR: "127.0.0.1:1" });
    const token = v.path("var/run/secrets/tokens/istio-token");
    await r.waitFor(new RegExp(`warn\\tsds\\ttoken file ${token} is missing: the CA will refuse certificate requests`), 20_000);
  }, 30_000);

  test("expired (its exp is past): a warning with the expiry, the token itself never logged", async () => {
    const v = vm();
    v.write("etc/certs/root-cert.pem", makeCa().cert);
    const token = jwt({ aud: ["istio-ca"], exp: 1_000_000_000 });
    v.write("var/run/secrets/tokens/istio-token", token);
    const r = await v.start({ CA_ADDR: "127.0.0.1:1" });
    await r.waitFor(/token file \S+istio-token expired at 2001-09-09T01:46:40.000Z \(its exp claim\): the CA will refuse/, 20_000);
    expect(r.output()).not.toContain(token.split(".")[1]!);
  }, 30_000);
});

test("mesh config YAML error: line and column", async () => {
  const v = vm();
  v.write("etc/istio/config/mesh", "defaultConfig:\n  discoveryAddress: istiod.istio-system.svc:15012\n bad: indentation\n");
  const r = await v.start();
  expect(await exited(r)).toBe(255);
  expect(r.output()).toContain("Error: mesh config ./etc/istio/config/mesh: malformed YAML/JSON at line 3, column 1: ");
}, 30_000);

test("missing root on a VM: the hint speaks of PROV_CERT and /etc/certs; in a pod, of the configmap", async () => {
  const onVm = vm();
  const r = await onVm.start({ PROV_CERT: "", OUTPUT_CERTS: "", CA_ADDR: "127.0.0.1:1" });
  expect(await exited(r)).toBe(255);
  expect(r.output()).toContain("on a VM: put the mesh's root-cert.pem in the PROV_CERT directory (istio-start.sh sets PROV_CERT=/etc/certs)");
  expect(r.output()).not.toContain("configmap");
  const inPod = vm();
  const p = await inPod.start({ PROV_CERT: "", OUTPUT_CERTS: "", CA_ADDR: "127.0.0.1:1", KUBERNETES_SERVICE_HOST: "10.96.0.1" });
  expect(await exited(p)).toBe(255);
  expect(p.output()).toContain("mount the istio-ca-root-cert configmap");
}, 30_000);

describeRequiring({ tools: ["openssl"], apt: ["openssl"] }, "local mode on a VM", () => {
  test("OUTPUT_CERTS holding istiod's root: the local CA does not replace it, and says so", async () => {
    const v = vm();
    const istiodRoot = makeCa("istiod root").cert;
    v.write("etc/certs/root-cert.pem", istiodRoot);
    v.write("xds.yaml", xdsYamlWithPort(9));
    const r = await v.start({ CA_PROVIDER: "local", LOCAL_XDS_PATH: "xds.yaml" }, { controlPlaneAuthPolicy: "NONE" });
    await r.waitFor(
      new RegExp(
        `OUTPUT_CERTS: ${v.path("etc/certs/root-cert.pem")} holds a root certificate from another CA; the local CA \\(CA_PROVIDER=local\\) does not replace it`,
      ),
      20_000,
    );
    // The refusal is logged at the write; the files are as they were.
    expect(readFileSync(v.path("etc/certs/root-cert.pem"), "utf8")).toBe(istiodRoot);
    expect(existsSync(v.path("etc/certs/key.pem"))).toBe(false);
  }, 30_000);
});

test("local mode with ISTIO_META_DNS_CAPTURE=true (cluster.env's default): ready, with a warning saying what to change", async () => {
  const v = vm();
  v.write("xds.yaml", xdsYamlWithPort(9));
  const dnsPort = await freePort();
  const r = await v.start(
    { CA_PROVIDER: "local", LOCAL_XDS_PATH: "xds.yaml", ISTIO_META_DNS_CAPTURE: "true", DNS_PROXY_ADDR: `127.0.0.1:${dnsPort}`, OUTPUT_CERTS: "" },
    { controlPlaneAuthPolicy: "NONE" },
  );
  await r.waitFor(/local mode: xds.yaml carries no DNS name table .* Set ISTIO_META_DNS_CAPTURE=false to leave DNS uncaptured/, 20_000);
  const deadline = Date.now() + 20_000;
  let last = "";
  while (Date.now() < deadline) {
    const res = await fetch(`http://127.0.0.1:${r.statusPort}/healthz/ready`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
    if (res?.status === 200) break;
    last = res ? `${res.status} ${await res.text()}` : "no answer";
    await Bun.sleep(200);
  }
  expect(last.includes("dns table received") ? last : "ready").toBe("ready");
  expect((await fetch(`http://127.0.0.1:${r.statusPort}/healthz/ready`)).status).toBe(200);
}, 40_000);

test("an empty TRUST_DOMAIN: a warning naming the identity it would make", async () => {
  const v = vm();
  v.write("xds.yaml", xdsYamlWithPort(9));
  const r = await v.start({ TRUST_DOMAIN: "", CA_PROVIDER: "local", LOCAL_XDS_PATH: "xds.yaml", OUTPUT_CERTS: "" }, { controlPlaneAuthPolicy: "NONE" });
  await r.waitFor(
    /warn\tTRUST_DOMAIN is empty: the workload identity would be spiffe:\/\/\/ns\/vm-ns\/sa\/vm-sa; set TRUST_DOMAIN \(cluster.env on a VM\)/,
    20_000,
  );
}, 30_000);

test("the exit code in the log is the process's own (Envoy missing: 255, not 1)", async () => {
  const v = vm();
  v.write("xds.yaml", xdsYamlWithPort(9));
  const r = await v.start(
    { DISABLE_ENVOY: "false", CA_PROVIDER: "local", LOCAL_XDS_PATH: "xds.yaml", OUTPUT_CERTS: "" },
    { controlPlaneAuthPolicy: "NONE", binaryPath: v.path("no/such/envoy"), proxyAdminPort: await freePort() },
  );
  expect(await exited(r, 20_000)).toBe(255);
  expect(r.output()).toContain("agent exit code 255");
  expect(r.output()).not.toContain("agent exit code 1");
}, 30_000);

test("agent wait names the URL it tried", async () => {
  const v = vm();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/healthz/ready`;
  const r = start(v.box.bin, ["wait", "--url", url, "--timeoutSeconds", "1", "--periodMillis", "200"], { cwd: v.box.dir });
  runs.push(r);
  expect(await exited(r)).toBe(255);
  expect(r.output()).toContain(`Waiting for Envoy proxy to be ready at ${url}`);
  expect(r.output()).toContain(`timeout waiting for Envoy proxy to become ready at ${url}. Last error:`);
}, 30_000);
