// `agent doctor` (dist/agent) on a VM set up as Istio documents it: the whole setup passes (exit
// 0), then each check gets its broken input and must name the file or variable, say what to do,
// and exit 1. Expected texts are literals; certificates come from the openssl CLI.

import { afterEach, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { createServer } from "node:net";
import { describeRequiring } from "../support/requires.ts";
import { jwt, makeCa, makeExpiredCa, makeLeafNotCa } from "./pki.ts";
import { CLUSTER_ENV, line, startVm, type Vm } from "./vm.ts";
import { freePort } from "../support/fake-envoy.ts";

const vms: Vm[] = [];
afterEach(() => {
  for (const v of vms.splice(0)) v.close();
});
async function vm(opts?: Parameters<typeof startVm>[0]): Promise<Vm> {
  const v = await startVm(opts);
  vms.push(v);
  return v;
}

describeRequiring({ tools: ["openssl"], apt: ["openssl"] }, "agent doctor: one test per check", () => {
  test("a VM set up as documented: every check ok or skipped, exit 0", async () => {
    const v = await vm();
    // A generous per-check timeout: this case is about what each check finds, not its speed (the
    // test's istiod stand-in once took over the default 2 s for its first TLS handshake, r11).
    const r = await v.doctor(["--timeoutMillis", "15000"]);
    expect(r.out).not.toContain("FAIL");
    expect(r.out).not.toContain("warn ");
    expect(line(r.out, "ok", "cluster-env", `${v.path("var/lib/istio/envoy/cluster.env")}: 10 settings`)).toBeDefined();
    expect(line(r.out, "ok", "root-cert", `${v.path("etc/certs/root-cert.pem")} (istiod connection and CA connection): CA O=mesh root`)).toBeDefined();
    expect(line(r.out, "ok", "token", "a JWT, expires 2096-10-02T07:06:40.000Z, audience istio-ca")).toBeDefined();
    expect(line(r.out, "ok", "connect istiod", `127.0.0.1:${v.istiodPort} accepts TCP`)).toBeDefined();
    expect(line(r.out, "ok", "tls istiod", "name istiod.istio-system.svc matches (DNS:istiod.istio-system.svc, IP Address:127.0.0.1)")).toBeDefined();
    expect(line(r.out, "skip", "capture", "interception mode NONE")).toBeDefined();
    expect(r.code).toBe(0);
  }, 30_000);

  test("cluster.env missing: named, with where it comes from", async () => {
    const v = await vm();
    rmSync(v.path("var/lib/istio/envoy/cluster.env"));
    const r = await v.doctor();
    expect(line(r.out, "FAIL", "cluster-env", `${v.path("var/lib/istio/envoy/cluster.env")} does not exist`)).toBeDefined();
    expect(r.out).toContain("fix: regenerate it with `istioctl x workload entry configure` and copy it to the VM (or set ISTIO_CLUSTER_CONFIG to where it is)");
    expect(r.code).toBe(1);
  }, 30_000);

  test("cluster.env incomplete or not shell assignments: each key and line named", async () => {
    const v = await vm();
    const text =
      CLUSTER_ENV.replace("SERVICE_ACCOUNT='vm-sa'", "").replace("TRUST_DOMAIN='cluster.local'", "TRUST_DOMAIN=''") + "\nthis is not an assignment\n";
    v.write("var/lib/istio/envoy/cluster.env", text);
    const r = await v.doctor();
    expect(line(r.out, "FAIL", "cluster-env", "SERVICE_ACCOUNT is missing (the workload identity's service account)")).toBeDefined();
    expect(line(r.out, "FAIL", "cluster-env", "TRUST_DOMAIN is empty")).toBeDefined();
    expect(line(r.out, "FAIL", "cluster-env", "line 11: not a NAME=value assignment: this is not an assignment")).toBeDefined();
    // The agent's own warning for the empty trust domain comes through the config check.
    expect(line(r.out, "warn", "config", "TRUST_DOMAIN is empty: the workload identity would be spiffe:///ns/vm-ns/sa/")).toBeDefined();
    expect(r.code).toBe(1);
  }, 30_000);

  test("mesh config with a YAML error: the file, line and column", async () => {
    const v = await vm();
    v.write("etc/istio/config/mesh", "defaultConfig:\n  statusPort: 15020\n bad: indentation\n");
    const r = await v.doctor();
    expect(line(r.out, "FAIL", "config", "mesh config ./etc/istio/config/mesh: malformed YAML/JSON at line 3, column 1:")).toBeDefined();
    expect(r.code).toBe(1);
  }, 30_000);

  test("root cert: missing, not PEM, not a CA, expired", async () => {
    const v = await vm();
    const root = v.path("etc/certs/root-cert.pem");
    rmSync(root);
    let r = await v.doctor();
    expect(line(r.out, "FAIL", "root-cert", `${root} (istiod connection and CA connection) does not exist`)).toBeDefined();
    expect(r.out).toContain(
      "fix: on a VM: put the mesh's root-cert.pem in the PROV_CERT directory (istio-start.sh sets PROV_CERT=/etc/certs), or set XDS_ROOT_CA",
    );
    expect(r.code).toBe(1);

    v.write("etc/certs/root-cert.pem", Buffer.from([0x30, 0x82, 0x01, 0x0a]).toString("latin1"));
    r = await v.doctor();
    expect(line(r.out, "FAIL", "root-cert", `root certificate ${root} is not PEM (no "-----BEGIN CERTIFICATE-----" block`)).toBeDefined();
    expect(r.code).toBe(1);

    v.write("etc/certs/root-cert.pem", makeLeafNotCa());
    r = await v.doctor();
    expect(line(r.out, "FAIL", "root-cert", `root certificate ${root} (O=just a leaf) is not a CA certificate`)).toBeDefined();

    v.write("etc/certs/root-cert.pem", makeExpiredCa());
    r = await v.doctor();
    expect(line(r.out, "FAIL", "root-cert", `root certificate ${root} (O=expired root) expired on 2020-01-02T00:00:00.000Z`)).toBeDefined();
    expect(r.code).toBe(1);
  }, 60_000);

  test("token: missing, not a JWT, expired, another audience", async () => {
    const v = await vm();
    const path = v.path("var/run/secrets/tokens/istio-token");
    rmSync(path);
    let r = await v.doctor();
    expect(line(r.out, "FAIL", "token", `token file ${path} is missing`)).toBeDefined();
    expect(r.code).toBe(1);

    v.write("var/run/secrets/tokens/istio-token", "not-a-token");
    r = await v.doctor();
    expect(line(r.out, "FAIL", "token", `token file ${path} is not a JWT`)).toBeDefined();

    v.write("var/run/secrets/tokens/istio-token", jwt({ aud: ["istio-ca"], exp: 1_000_000_000 }));
    r = await v.doctor();
    expect(line(r.out, "FAIL", "token", `token file ${path} expired at 2001-09-09T01:46:40.000Z (its exp claim)`)).toBeDefined();
    expect(r.code).toBe(1);

    v.write("var/run/secrets/tokens/istio-token", jwt({ aud: ["https://kubernetes.default.svc"], exp: 4_000_000_000 }));
    r = await v.doctor();
    expect(line(r.out, "warn", "token", `audience ["https://kubernetes.default.svc"] does not include "istio-ca"`)).toBeDefined();
    expect(r.out).not.toContain("header.");
    expect(r.code).toBe(0);
  }, 60_000);

  test("istiod address: does not resolve, refuses TCP", async () => {
    const v = await vm();
    let r = await v.doctor([], { PILOT_ADDRESS: "istiod.doctor.invalid:15012", CA_ADDR: "istiod.doctor.invalid:15012" });
    expect(line(r.out, "FAIL", "resolve istiod", "istiod.doctor.invalid (discoveryAddress (PROXY_CONFIG)) does not resolve")).toBeDefined();
    expect(line(r.out, "FAIL", "hosts istiod", "istiod.doctor.invalid (discoveryAddress (PROXY_CONFIG)) is not in")).toBeDefined();
    expect(r.code).toBe(1);

    const closed = await freePort();
    r = await v.doctor([], { PILOT_ADDRESS: `127.0.0.1:${closed}`, CA_ADDR: `127.0.0.1:${closed}` });
    expect(line(r.out, "FAIL", "connect istiod", `127.0.0.1:${closed} (discoveryAddress (PROXY_CONFIG)):`)).toBeDefined();
    expect(r.out).toContain("ECONNREFUSED");
    expect(r.code).toBe(1);
  }, 30_000);

  test("TLS: a SAN istiod's certificate lacks, a root from another CA, a server that never answers (bounded)", async () => {
    const v = await vm();
    let r = await v.doctor([], { ISTIOD_SAN: "istiod.other.svc" });
    expect(line(r.out, "FAIL", "tls istiod", `127.0.0.1:${v.istiodPort}: the server's certificate does not name istiod.other.svc`)).toBeDefined();
    expect(r.out).toContain("fix: set ISTIOD_SAN to a name the certificate carries");
    expect(r.code).toBe(1);

    v.write("etc/certs/root-cert.pem", makeCa("another mesh").cert);
    r = await v.doctor();
    expect(line(r.out, "FAIL", "tls istiod", `the server's certificate is not signed by ${v.path("etc/certs/root-cert.pem")}`)).toBeDefined();
    expect(r.code).toBe(1);

    const silent = await vm({ silent: true });
    r = await silent.doctor(["--timeoutMillis", "300"]);
    expect(line(r.out, "FAIL", "tls istiod", "TLS handshake")).toBeDefined();
    expect(r.out).toContain("within 300ms");
    expect(r.code).toBe(1);
  }, 60_000);

  test("Envoy binary: missing, not executable", async () => {
    const v = await vm();
    const bin = v.path("usr/local/bin/envoy");
    v.write("usr/local/bin/envoy", "#!/bin/sh\n", 0o644);
    let r = await v.doctor([], { DISABLE_ENVOY: "false", ENVOY_STATUS_PORT: String(await freePort()), ENVOY_PROMETHEUS_PORT: String(await freePort()) });
    expect(line(r.out, "FAIL", "envoy", `Envoy binary ${bin} is not executable by this user`)).toBeDefined();
    rmSync(bin);
    r = await v.doctor([], { DISABLE_ENVOY: "false" });
    expect(line(r.out, "FAIL", "envoy", `Envoy binary ${bin} (ProxyConfig binaryPath) does not exist`)).toBeDefined();
    expect(r.code).toBe(1);
  }, 30_000);

  test("ports: the status port taken by another process", async () => {
    const v = await vm();
    const holder = createServer();
    const port = await new Promise<number>((r) => holder.listen(0, "0.0.0.0", () => r((holder.address() as { port: number }).port)));
    try {
      v.write("etc/istio/config/mesh", `defaultConfig:\n  statusPort: ${port}\n  interceptionMode: NONE\n`);
      const r = await v.doctor();
      expect(line(r.out, "FAIL", "ports", `tcp 0.0.0.0:${port} for the status server (ProxyConfig statusPort) is not free (EADDRINUSE)`)).toBeDefined();
      expect(r.code).toBe(1);
    } finally {
      holder.close();
    }
  }, 30_000);

  test("bad command line: exit 255", async () => {
    const v = await vm();
    const r = await v.doctor(["--timeoutMillis", "0"]);
    expect(r.out).toContain("Error: --timeoutMillis must be in 1..60000, got 0");
    expect(r.code).toBe(255);
  }, 30_000);
});
