// The operator's view on the compiled agent (dist/agent) in a fake mesh (fake istiod and CA, the
// e2e Envoy stand-in taking CDS and LDS): /debug/config_dump, GET/POST /logging, the /debug/ page,
// and `agent status` / `agent debug` run as separate processes against the agent's status port.
// Expected values come from elsewhere: certificate facts from openssl on the OUTPUT_CERTS files,
// xDS nonces and versions from what the fake istiod received, node identity from the pod's env.
// Secrets planted in the CA token, in the pod's env (a Wasm image pull secret) and in the private
// key the agent writes must appear in none of the outputs.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { networkInterfaces } from "node:os";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { SPIFFE, startMesh, type Mesh } from "../e2e/mesh.ts";
import { fileIfExists, httpGet, until } from "../e2e/pod.ts";
import { NO_CLOUD } from "../support/binary.ts";
import { testRequiring } from "../support/requires.ts";

const TOKEN_SECRET = "tok-SECRET-opview-5c1e7a";
const PULL_SECRET = "pull-SECRET-opview-83b2d0";
const CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener";

let mesh: Mesh | undefined;
const m = () => mesh!;
const base = () => `http://127.0.0.1:${m().pod.statusPort}`;

beforeAll(async () => {
  mesh = await startMesh(greeterTable(9), {
    caToken: TOKEN_SECRET,
    files: { "var/run/secrets/tokens/istio-token": TOKEN_SECRET },
    env: { OUTPUT_CERTS: "etc/certs", E2E_ENVOY_XDS: "1", ISTIO_META_WASM_IMAGE_PULL_SECRET: PULL_SECRET },
  });
  // Ready: certificate issued, Envoy took CDS and LDS through the relay.
  await until(m().pod, "/healthz/ready answers 200", async () => ((await httpGet(`${base()}/healthz/ready`)).status === 200 ? true : undefined), 30_000);
  await until(m().pod, "OUTPUT_CERTS key written", () => fileIfExists(m().pod.path("etc/certs/key.pem")));
}, 60_000);
afterAll(async () => {
  await mesh?.cleanup();
});

async function getText(path: string, init?: RequestInit): Promise<{ status: number; body: string; type: string | null; csp: string | null }> {
  const r = await fetch(`${base()}${path}`, { ...init, signal: AbortSignal.timeout(5000) });
  return { status: r.status, body: await r.text(), type: r.headers.get("content-type"), csp: r.headers.get("content-security-policy") };
}

/** openssl's view of a PEM certificate file. */
async function openssl(file: string, ...what: string[]): Promise<string> {
  const p = Bun.spawn(["openssl", "x509", "-noout", ...what, "-in", file], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(p.stdout).text();
  expect(await p.exited).toBe(0);
  return out.trim();
}

/** The base64 body of the private key the agent wrote: no line of it may appear anywhere. */
function keyLines(): string[] {
  const pem = fileIfExists(m().pod.path("etc/certs/key.pem"))!;
  return pem.split("\n").filter((l) => l.length >= 40 && !l.startsWith("-----"));
}

function expectNoSecrets(text: string): void {
  expect(text).not.toContain(TOKEN_SECRET);
  expect(text).not.toContain(PULL_SECRET);
  expect(text).not.toContain("PRIVATE KEY");
  for (const l of keyLines()) expect(text).not.toContain(l);
}

/** `agent <args>` as its own process; stdout and stderr apart. */
async function runAgent(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn([m().pod.box.bin, ...args], {
    cwd: m().pod.box.dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...NO_CLOUD },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

describe("/debug/config_dump", () => {
  test("identity, certificates, xDS streams, readiness and Envoy as the mesh sees them; no secret", async () => {
    const r = await getText("/debug/config_dump");
    expect([r.status, r.status === 200 ? "" : r.body]).toEqual([200, ""]);
    expect(r.type).toBe("application/json");
    expectNoSecrets(r.body);
    const d = JSON.parse(r.body);
    expect(d.schema).toBe("agent.config_dump/v1");
    expect(d.node.id).toBe("sidecar~127.0.0.1~greeter-client-0.demo~demo.svc.cluster.local");
    expect(d.node.metadata.WASM_IMAGE_PULL_SECRET).toBe("<redacted>");
    expect(d.node.metadata.CLUSTER_ID).toBe("Kubernetes");
    expect(d.proxyConfig.statusPort).toEqual({ value: m().pod.statusPort, source: "PROXY_CONFIG" });
    expect(d.proxyConfig.configPath).toEqual({ value: "./etc/istio/proxy", source: "default" });
    expect(d.proxyConfig.drainDuration).toEqual({ value: "2s", source: "PROXY_CONFIG" });

    // The workload certificate against openssl's reading of the same certificate.
    const certFile = m().pod.path("etc/certs/cert-chain.pem");
    const serial = (await openssl(certFile, "-serial")).replace(/^serial=/, "").toLowerCase();
    const notAfter = new Date((await openssl(certFile, "-enddate")).replace(/^notAfter=/, "")).toISOString();
    expect(d.identity.spiffeId).toBe(SPIFFE);
    expect(d.identity.workloadState).toBe("valid");
    const cert = d.identity.certificates.find((c: { resource: string }) => c.resource === "default");
    expect(cert).toMatchObject({ source: "ca:istiod", state: "valid", spiffeIds: [SPIFFE], notAfter });
    expect(cert.serial.replace(/^0+/, "")).toBe(serial.replace(/^0+/, ""));
    expect(d.identity.certificates.some((c: { resource: string }) => c.resource === "ROOTCA")).toBe(true);
    expect(d.ca).toMatchObject({ provider: "istiod", address: m().ca.address, tokenPath: expect.stringContaining("istio-token") });

    // xDS: what the fake istiod received is what the dump says Envoy answered.
    expect(d.xds.upstream).toMatchObject({ address: `127.0.0.1:${m().relay.port}`, state: "connected" });
    const received = m().istiod.streams.at(-1)!.requests;
    for (const type of [CLUSTER, LISTENER]) {
      const lastAnswer = received.filter((q) => q.typeUrl === type && q.responseNonce).at(-1)!;
      const t = d.xds.stream.types.find((x: { typeUrl: string }) => x.typeUrl === type);
      expect(t).toMatchObject({ lastVersion: lastAnswer.versionInfo, lastNonce: lastAnswer.responseNonce, lastAck: "ACK", responses: 1 });
      expect(t.lastVersion).toBe("1");
    }
    expect(d.xds.stream.active).toBe(true);

    // Readiness: ready now, and the history says the certificate warmed.
    expect(d.readiness.ready).toBe(true);
    const warmed = d.readiness.history.filter((h: { name: string }) => h.name === "certificate warmed").map((h: { event: string }) => h.event);
    expect(warmed).toEqual(["raised", "cleared"]);

    // Envoy: the stand-in's own record of its pid.
    const started = m()
      .records()
      .filter((x) => x.event === "start");
    expect(d.envoy).toMatchObject({ enabled: true, state: "running", pids: [started.at(-1)!.pid], restarts: 0, restartPolicy: "never" });
    expect(d.envoy.drainPlan.mode).toBe("wait");
  });

  test("gzip when asked, same document", async () => {
    const r = await fetch(`${base()}/debug/config_dump`, { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit);
    expect(r.headers.get("content-encoding")).toBe("gzip");
    const body = Bun.gunzipSync(new Uint8Array(await r.arrayBuffer()));
    expect(JSON.parse(new TextDecoder().decode(body)).schema).toBe("agent.config_dump/v1");
  });
});

describe("/logging", () => {
  test("GET lists the scopes; POST sets levels (logged), a malformed request is refused and changes nothing", async () => {
    const before = JSON.parse((await getText("/logging")).body).levels;
    expect(before).toMatchObject({ default: "info", xdsproxy: "info", sds: "info", status: "info" });

    const bad = await getText("/logging?level=xdsproxy:loud", { method: "POST" });
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('invalid log level "loud" for scope "xdsproxy"');
    const unknown = await getText("/logging?level=xdsprxy:debug", { method: "POST" });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toContain('unknown scope "xdsprxy"');
    expect(unknown.body).toContain("xdsproxy");
    const empty = await getText("/logging", { method: "POST" });
    expect(empty.status).toBe(400);
    expect(empty.body).toContain("no level given");
    const other = await getText("/logging?lvl=debug", { method: "POST" });
    expect(other.status).toBe(400);
    expect(other.body).toContain('unknown parameter "lvl"');
    expect((await getText("/logging", { method: "PUT" })).status).toBe(405);
    expect(JSON.parse((await getText("/logging")).body).levels).toEqual(before);

    const ok = await getText("/logging?level=xdsproxy:debug,sds:warn", { method: "POST" });
    expect(ok.status).toBe(200);
    const answer = JSON.parse(ok.body);
    expect(answer.levels).toMatchObject({ xdsproxy: "debug", sds: "warn", default: "info" });
    expect(answer.changed).toEqual([
      { scope: "sds", from: "info", to: "warn" },
      { scope: "xdsproxy", from: "info", to: "debug" },
    ]);
    await until(
      m().pod,
      "the change logged",
      () => (m().pod.tail(400).includes('log level of scope "xdsproxy" changed from info to debug (POST /logging)') ? true : undefined),
      5000,
    );
    // Put back for the other tests.
    expect((await getText("/logging?level=xdsproxy:info,sds:info", { method: "POST" })).status).toBe(200);
  });
});

describe("/debug/ page", () => {
  test("an HTML page with no external asset allowed, refreshing from config_dump", async () => {
    for (const path of ["/debug/", "/debug"]) {
      const r = await getText(path);
      expect(r.status).toBe(200);
      expect(r.type).toBe("text/html; charset=utf-8");
      expect(r.csp).toContain("default-src 'none'");
      expect(r.body).toContain('fetch("/debug/config_dump"');
      expect(r.body).not.toMatch(/(src|href)=["']?(https?:)?\/\//);
    }
  });
});

/** A non-loopback IPv4 address of this machine, if any. */
function nonLoopbackIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  return undefined;
}

const far = nonLoopbackIPv4();
testRequiring(
  { check: () => (far === undefined ? "a non-loopback IPv4 address on this machine" : undefined) },
  "non-loopback callers get 403 on every operator endpoint; readiness stays open",
  async () => {
    for (const [method, path] of [
      ["GET", "/debug/config_dump"],
      ["GET", "/debug/"],
      ["GET", "/logging"],
      ["POST", "/logging?level=default:debug"],
    ] as const) {
      const r = await fetch(`http://${far}:${m().pod.statusPort}${path}`, { method, signal: AbortSignal.timeout(5000) });
      expect([method, path, r.status, await r.text()]).toEqual([method, path, 403, "Only requests from localhost are allowed"]);
    }
    expect(JSON.parse((await getText("/logging")).body).levels.default).toBe("info");
    expect((await fetch(`http://${far}:${m().pod.statusPort}/healthz/ready`)).status).toBe(200);
  },
);

describe("agent status / agent debug (separate processes)", () => {
  test("status: one screen with identity, certificate expiry, istiod, streams and readiness", async () => {
    const r = await runAgent(["status", `--port=${m().pod.statusPort}`]);
    expect(r.code).toBe(0);
    expectNoSecrets(r.out + r.err);
    const certFile = m().pod.path("etc/certs/cert-chain.pem");
    const serial = (await openssl(certFile, "-serial")).replace(/^serial=/, "").toLowerCase();
    const notAfter = new Date((await openssl(certFile, "-enddate")).replace(/^notAfter=/, "")).toISOString();
    expect(r.out).toContain("Pod:         demo/greeter-client-0 (sidecar~127.0.0.1~greeter-client-0.demo~demo.svc.cluster.local)\n");
    expect(r.out).toContain(`Identity:    ${SPIFFE}\n`);
    expect(r.out).toMatch(new RegExp(`Certificate: valid, serial 0*${serial.replace(/^0+/, "")}, expires ${notAfter.replace(/\./g, "\\.")} \\(in 23h5\\dm\\)`));
    expect(r.out).toContain(`istiod:      connected 127.0.0.1:${m().relay.port} since `);
    expect(r.out).toMatch(/\n  envoy\.config\.cluster\.v3\.Cluster +1 +n\d+ +ACK +1\n/);
    expect(r.out).toContain("Readiness:   ready\n");
    expect(r.out).toMatch(/Envoy: +running, pid \d+, restarts 0\n/);
    expect(r.out.split("\n").length).toBeLessThan(25);
  });

  test("status -o json|yaml: the same summary as data", async () => {
    const j = await runAgent(["status", `--port=${m().pod.statusPort}`, "-o", "json"]);
    expect(j.code).toBe(0);
    const s = JSON.parse(j.out);
    expect(s.identity.spiffeId).toBe(SPIFFE);
    expect(s.istiod.state).toBe("connected");
    expect(s.readiness).toEqual({ ready: true, blockers: [], warnings: [] });
    const y = await runAgent(["status", `--port=${m().pod.statusPort}`, "-o", "yaml"]);
    expect(y.code).toBe(0);
    expect((await import("yaml")).parse(y.out)).toMatchObject({ identity: { spiffeId: SPIFFE } });
  });

  test("debug config_dump -o json|yaml and debug logging (read, set, refused)", async () => {
    const port = `--port=${m().pod.statusPort}`;
    const j = await runAgent(["debug", "config_dump", port]);
    expect(j.code).toBe(0);
    expectNoSecrets(j.out + j.err);
    expect(JSON.parse(j.out).schema).toBe("agent.config_dump/v1");
    const y = await runAgent(["debug", "config_dump", port, "-o", "yaml"]);
    expect(y.code).toBe(0);
    expectNoSecrets(y.out);
    expect((await import("yaml")).parse(y.out).node.id).toBe("sidecar~127.0.0.1~greeter-client-0.demo~demo.svc.cluster.local");

    const set = await runAgent(["debug", "logging", "envoy:debug", port]);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.out).changed).toEqual([{ scope: "envoy", from: "info", to: "debug" }]);
    const read = await runAgent(["debug", "logging", port, "-o", "yaml"]);
    expect((await import("yaml")).parse(read.out).levels.envoy).toBe("debug");
    const refused = await runAgent(["debug", "logging", "envoy:chatty", port]);
    expect(refused.code).toBe(255);
    expect(refused.err).toContain('400: POST /logging: level: invalid log level "chatty" for scope "envoy"');
    expect((await runAgent(["debug", "logging", "envoy:info", port])).code).toBe(0);
  });

  test("a port where no agent listens: an error naming the URL and the --port flag", async () => {
    const r = await runAgent(["status", "--port=1"]);
    expect(r.code).toBe(255);
    expect(r.err).toContain("GET http://localhost:1/debug/config_dump:");
    expect(r.err).toContain("use --port to name another");
  });
});
