// Each command and mode evaluates only the code it uses (issue #16: idle memory is loaded code).
// The agent runs from source with a preload that lists, at exit, every module evaluated; the
// compiled binary keeps the same dynamic imports lazy (bun build bundles them unevaluated), and the
// binary suites (test/e2e, test/faults) run every mode through those lazy paths.

import { afterAll, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { FakeCa } from "../support/fake-ca.ts";
import { freePort } from "../support/fake-envoy.ts";
import { sdsCodec, SECRET_TYPE_URL } from "../../src/sds/proto.ts";
import { SDS_SERVICE } from "../../src/sds/server.ts";

const REPO = resolve(import.meta.dir, "../..");
/** Free ports for the status server and Envoy's admin (unused without Envoy, but validated). */
const ports = async () => ({ statusPort: await freePort(), proxyAdminPort: await freePort() });
const PRELOAD = join(REPO, "test/support/loaded-modules-preload.ts");
const dir = mkdtempSync(join(tmpdir(), "agent-lazy-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Runs `agent <args>` from source until `until` appears on stdout (then `meanwhile`, given the
 * agent's working directory, then SIGTERM) or it exits; the modules it evaluated, relative to the repo.
 */
async function loadedModules(
  name: string,
  args: string[],
  env: Record<string, string>,
  until?: RegExp,
  meanwhile?: (cwd: string) => Promise<void>,
): Promise<string[]> {
  const cwd = join(dir, name);
  mkdirSync(cwd, { recursive: true });
  const list = join(cwd, "modules.txt");
  const child = Bun.spawn([process.execPath, "--preload", PRELOAD, join(REPO, "src/main.ts"), ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, AGENT_TEST_LOADED_MODULES: list, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  if (until) {
    const reader = (child.stdout as ReadableStream<Uint8Array>).getReader();
    while (!until.test(out)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`agent ${args.join(" ")} exited before ${until}: ${out.slice(-1500)}${await new Response(child.stderr).text()}`);
      out += new TextDecoder().decode(value);
    }
    try {
      await meanwhile?.(cwd);
    } finally {
      child.kill("SIGTERM");
    }
    void (async () => {
      for (;;) if ((await reader.read()).done) break;
    })();
  }
  const code = await child.exited;
  const text = readFileSync(list, "utf8"); // written at exit: its presence is the sentinel
  expect(code === 0 || code === 143 || code === null).toBe(true);
  return text
    .split("\n")
    .filter(Boolean)
    .map((p) => (p.startsWith(REPO + "/") ? p.slice(REPO.length + 1) : p));
}

const codec = sdsCodec();
/** The pod every case runs as (no cloud platform probed). */
const POD = { POD_NAME: "lazy-0", POD_NAMESPACE: "test", INSTANCE_IP: "127.0.0.1", CLOUD_PLATFORM: "none" };
const under = (mods: string[], prefix: string) => mods.filter((m) => m.startsWith(prefix));
/** src/main.ts checks for the Envoy launcher command (src/envoy/envoyexec.ts) before any command runs. */
const MAIN_ENVOY_LAUNCHER = ["src/envoy/envoyexec.ts"];

// A copy of the agent runs as Envoy's launcher between the agent's spawn call and Envoy's first
// instruction (src/envoy/deathlink.ts), so everything it evaluates delays Envoy: only the entry
// point and the launcher with its FFI glue, none of the CLI. Envoy's binary is missing here, so the
// exec fails and the copy exits (127), writing its list.
test("Envoy launcher (__envoy-exec): only the entry point and the launcher's code", async () => {
  const cwd = join(dir, "envoy-exec");
  mkdirSync(cwd, { recursive: true });
  const list = join(cwd, "modules.txt");
  const child = Bun.spawn([process.execPath, "--preload", PRELOAD, join(REPO, "src/main.ts"), "__envoy-exec", String(process.pid), join(cwd, "no-envoy")], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, AGENT_TEST_LOADED_MODULES: list },
    stdout: "ignore",
    stderr: "pipe",
  });
  const stderr = await new Response(child.stderr).text();
  expect(await child.exited).toBe(127);
  expect(stderr).toContain(`cannot start Envoy ${join(cwd, "no-envoy")}`);
  const mods = readFileSync(list, "utf8")
    .split("\n")
    .filter((p) => p.startsWith(REPO + "/"))
    .map((p) => p.slice(REPO.length + 1));
  // (src/main.ts itself is still being evaluated when the exec fails, so it is not listed yet.)
  expect(mods.filter((m) => !m.startsWith("test/"))).toEqual(["native/pdeathsig.ts", "src/envoy/envoyexec.ts"]);
}, 30_000);

test("proxyless agent (istiod, local CA), settled: no iptables, local-mode, STS, DNS-proxy, gRPC, protobuf, YAML or ASN.1 library code", async () => {
  const mods = await loadedModules(
    "proxyless",
    ["proxy", "sidecar"],
    {
      ...POD,
      DISABLE_ENVOY: "true",
      CA_PROVIDER: "local",
      PROXY_CONFIG: JSON.stringify({ discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE", terminationDrainDuration: "1s", ...(await ports()) }),
    },
    /certificates warmed/, // the last of the after-start work: the certificate code has loaded by then
  );
  // What it needs is there (the list is real) ...
  expect(mods).toContain("src/xds/proxy.ts");
  expect(mods).toContain("src/sds/manager.ts");
  expect(mods).toContain("src/ca/certwrite.ts"); // the local CA signs, writing its certificates by hand ...
  for (const lib of ["@peculiar/", "reflect-metadata/", "asn1js/", "tsyringe/", "pvtsutils/", "tslib/"]) expect(under(mods, `node_modules/${lib}`)).toEqual([]); // ... with no ASN.1 library
  // ... and what it does not use is not.
  expect(under(mods, "src/iptables/")).toEqual([]);
  expect(under(mods, "src/local/")).toEqual([]);
  expect(under(mods, "src/sts/")).toEqual([]);
  expect(mods.filter((m) => m.startsWith("src/dns/") && m !== "src/dns/enabled.ts")).toEqual([]);
  expect(
    mods.filter(
      (m) =>
        m.startsWith("src/cli/") &&
        ![
          "src/cli/root.ts",
          "src/cli/proxy.ts",
          "src/cli/proxyflags.ts",
          "src/cli/loadconfig.ts",
          "src/cli/global.ts",
          "src/cli/io.ts",
          "src/cli/commands.ts",
        ].includes(m),
    ),
  ).toEqual([]);
  expect(under(mods, "node_modules/@grpc/grpc-js/")).toEqual([]);
  expect(under(mods, "node_modules/protobufjs/")).toEqual([]);
  expect(under(mods, "node_modules/yaml/")).toEqual([]);
}, 30_000);

// The CA client speaks gRPC over the agent's own HTTP/2 code: an agent whose certificates come from
// istiod's CA (here a grpc-js fake CA over TLS, in the test's process) loads neither grpc-js nor a
// protobuf schema library for it; and its CSR is written as DER by hand (src/ca/csr.ts), so it
// loads no ASN.1 library either (@peculiar/x509 and its reflect-metadata, asn1js, tsyringe: 3.7 MiB).
test("proxyless agent with istiod's CA, certificates signed: no grpc-js, protobufjs or x509 library", async () => {
  const ca = await FakeCa.start();
  try {
    mkdirSync(join(dir, "ca-client"), { recursive: true });
    const root = join(dir, "ca-client", "ca-root.pem");
    writeFileSync(root, ca.tls!.rootPem);
    const mods = await loadedModules(
      "ca-client",
      ["proxy", "sidecar"],
      {
        ...POD,
        DISABLE_ENVOY: "true",
        CA_ADDR: ca.address,
        CA_ROOT_CA: root,
        PROXY_CONFIG: JSON.stringify({ discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE", terminationDrainDuration: "1s", ...(await ports()) }),
      },
      /certificates warmed/, // default and ROOTCA signed by the CA: the client has done its work
    );
    expect(ca.requests.length).toBeGreaterThanOrEqual(1);
    expect(mods).toContain("src/ca/client.ts");
    expect(under(mods, "node_modules/@grpc/grpc-js/")).toEqual([]);
    expect(under(mods, "node_modules/protobufjs/")).toEqual([]);
    expect(mods).toContain("src/xds/unary.ts");
    expect(mods).not.toContain("src/ca/proto.ts");
    for (const lib of ["@peculiar/", "reflect-metadata/", "asn1js/", "tsyringe/", "pvtsutils/", "tslib/"])
      expect(under(mods, `node_modules/${lib}`)).toEqual([]);
    expect(mods).toContain("src/ca/csr.ts");
  } finally {
    await ca.close();
  }
}, 30_000);

test("iptables --dry-run: none of the proxy's code", async () => {
  const mods = await loadedModules("iptables", ["iptables", "--dry-run", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*"], {});
  expect(mods).toContain("src/cli/iptables.ts");
  expect(mods).not.toContain("src/agent.ts");
  expect(mods).not.toContain("src/cli/proxy.ts");
  for (const dir of [
    "src/xds/",
    "src/sds/",
    "src/ca/",
    "src/status/",
    "src/envoy/",
    "src/bootstrap/",
    "src/local/",
    "node_modules/@peculiar/",
    "node_modules/prom-client/",
  ])
    expect(under(mods, dir).filter((m) => !MAIN_ENVOY_LAUNCHER.includes(m))).toEqual([]);
}, 30_000);

// The SDS server reads and writes its messages at the wire level (src/sds/wire.ts): a sidecar that
// has answered Envoy's StreamSecrets has loaded no protobuf schema library either.
test("sidecar (local CA, a stand-in Envoy), after Envoy's first SDS answer: the SDS server loads no grpc-js or protobufjs", async () => {
  const envoy = join(dir, "envoy-sleep");
  writeFileSync(envoy, "#!/bin/sh\nexec sleep 600\n", { mode: 0o755 });
  let answered = "";
  const mods = await loadedModules(
    "sidecar-sds",
    ["proxy", "sidecar"],
    {
      ...POD,
      CA_PROVIDER: "local",
      PROXY_CONFIG: JSON.stringify({
        discoveryAddress: "127.0.0.1:1",
        controlPlaneAuthPolicy: "NONE",
        terminationDrainDuration: "1s",
        binaryPath: envoy,
        ...(await ports()),
      }),
    },
    /certificates warmed/,
    async (cwd) => {
      // Envoy's part, played by an independent gRPC client: one StreamSecrets answer.
      const socket = join(cwd, "var/run/secrets/workload-spiffe-uds/socket");
      const client = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
      try {
        const call = client.makeBidiStreamRequest(
          `/${SDS_SERVICE}/StreamSecrets`,
          (b: Buffer) => b,
          (b: Buffer) => b,
        );
        call.on("error", () => {});
        const first = new Promise<Buffer>((resolve, reject) => {
          call.once("data", resolve);
          call.once("status", (s: grpc.StatusObject) => reject(new Error(`SDS stream ended: ${s.code} ${s.details}`)));
        });
        call.write(codec.encodeRequest({ typeUrl: SECRET_TYPE_URL, resourceNames: ["default"] }));
        answered = codec.decodeResponse(await first).resources[0]!.name;
        call.end();
      } finally {
        client.close();
      }
    },
  );
  expect(answered).toBe("default");
  expect(mods).toContain("src/sds/server.ts");
  expect(mods).toContain("src/xds/grpcserver.ts");
  expect(mods).toContain("src/sds/wire.ts");
  expect(under(mods, "node_modules/@grpc/grpc-js/")).toEqual([]);
  expect(under(mods, "node_modules/protobufjs/")).toEqual([]);
  expect(mods).not.toContain("src/sds/proto.ts");
  // The process collectors are there (CPU counters of our own), prom-client's CPU collector and the
  // OpenTelemetry API it requires for exemplars (51 modules) are not.
  expect(mods).toContain("src/lib/processcpu.ts");
  expect(mods).not.toContain("node_modules/prom-client/lib/metrics/processCpuTotal.js");
  expect(under(mods, "node_modules/@opentelemetry/")).toEqual([]);
}, 30_000);

// Local mode's ADS server runs on the agent's own HTTP/2 gRPC server, at the protobuf wire level,
// and the file is converted by a short-lived copy of the agent (src/local/converter.ts): an agent
// that has served an ADS request from its file (relay -> local server over loopback TCP -> back)
// loaded no grpc-js, and neither protobufjs, yaml nor local mode's schemas.
test("proxyless local mode (LOCAL_XDS_PATH), after an ADS answer from the file: no grpc-js, protobufjs, yaml or schemas", async () => {
  const { envoyRoot } = await import("../local/support.ts");
  const envoy = await envoyRoot();
  const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  const Res = envoy.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
  const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  mkdirSync(join(dir, "local"), { recursive: true });
  writeFileSync(join(dir, "local", "xds.yaml"), readFileSync(join(REPO, "examples/xds.yaml"), "utf8"));
  let clusters: string[] = [];
  const mods = await loadedModules(
    "local",
    ["proxy", "sidecar"],
    {
      ...POD,
      DISABLE_ENVOY: "true",
      CA_PROVIDER: "local",
      LOCAL_XDS_PATH: "xds.yaml",
      PROXY_CONFIG: JSON.stringify({ controlPlaneAuthPolicy: "NONE", terminationDrainDuration: "1s", ...(await ports()) }),
    },
    /local xDS: serving xds\.yaml/,
    async (cwd) => {
      // The proxyless application's part, played by grpc-js in this process: one CDS answer.
      const client = new grpc.Client(`unix://${join(cwd, "etc/istio/proxy/XDS")}`, grpc.credentials.createInsecure());
      try {
        const call = client.makeBidiStreamRequest(
          "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
          (b: Buffer) => b,
          (b: Buffer) => b,
        );
        call.on("error", () => {});
        const first = new Promise<Buffer>((resolve, reject) => {
          call.once("data", resolve);
          call.once("status", (s: grpc.StatusObject) => reject(new Error(`ADS stream ended: ${s.code} ${s.details}`)));
        });
        call.write(Buffer.from(Req.encode(Req.fromObject({ node: { id: "sidecar~127.0.0.1~lazy-0.test~test.svc.cluster.local" }, type_url: CDS })).finish()));
        const r = Res.toObject(Res.decode(await first)) as { resources?: { value: Uint8Array }[] };
        const Cluster = envoy.lookupType("envoy.config.cluster.v3.Cluster");
        clusters = (r.resources ?? []).map((a) => (Cluster.decode(a.value) as unknown as { name: string }).name);
        call.end();
      } finally {
        client.close();
      }
    },
  );
  expect(clusters).toEqual(["outbound|50051||greeter.demo"]);
  expect(mods).toContain("src/local/server.ts");
  expect(mods).toContain("src/xds/grpcserver.ts");
  expect(mods).toContain("src/local/converter.ts"); // the file was converted by a copy of the agent ...
  expect(under(mods, "node_modules/@grpc/grpc-js/")).toEqual([]);
  expect(under(mods, "node_modules/protobufjs/")).toEqual([]); // ... so this process evaluated no schema library,
  expect(under(mods, "node_modules/yaml/")).toEqual([]); // no YAML parser
  for (const m of ["src/local/schema.ts", "src/local/protojson.ts", "src/local/xdsfile.ts", "src/local/inprocess.ts", "src/local/convertchild.ts"])
    expect(mods).not.toContain(m); // and none of the conversion's code
}, 30_000);
