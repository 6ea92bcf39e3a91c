// OCI pulls against a real registry (Debian's docker-registry on loopback, started and stopped
// here): Istio's image layouts (OCI and Docker compat images, Solo's Wasm artifact), digest-pinned
// references, pull policies resolving tags, Basic-auth pull secrets, TLS with
// WASM_INSECURE_REGISTRIES, and the whole path — an ECDS push through the fake istiod reaching
// Envoy's stand-in as a local file with the module's bytes and sha256.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createWasmConversion } from "../../src/wasm/index.ts";
import { createXdsProxy } from "../../src/xds/proxy.ts";
import { FakeIstiod, makeTestPki } from "../support/fake-istiod.ts";
import { describeRequiring } from "../support/requires.ts";
import { EnvoyClient, LDS, TYPES, testConfig } from "../xds/harness.ts";
import { T, URL_OF, any, anyBytes, readExtensionConfig } from "./protos.ts";
import { TestRegistry, pushArtifact, pushImage } from "./registry.ts";
import { getOptions, sha256, wasmModule } from "./support.ts";

const REQ = { tools: ["docker-registry", "tar", "gzip", "openssl"], apt: ["docker-registry", "tar", "gzip", "openssl"] };

function tgzWithPlugin(mod: Uint8Array, dirs: string[], name = "plugin.wasm"): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), "wasm-layer-"));
  dirs.push(dir);
  writeFileSync(join(dir, name), mod);
  execFileSync("tar", ["-C", dir, "-czf", join(dir, "layer.tgz"), name]);
  return readFileSync(join(dir, "layer.tgz"));
}

function conversion(dir: string, insecure = "") {
  const { sink, lines } = memoryLogger("all:debug");
  const registry = newRegistry();
  const w = createWasmConversion(
    {
      dir,
      insecureRegistries: insecure,
      moduleExpiryMs: 86_400_000,
      purgeIntervalMs: 3_600_000,
      httpRequestTimeoutMs: 5000,
      httpRequestMaxRetries: 2,
      blockedCidrs: "",
      maxBinaryBytes: 1 << 20,
    },
    { log: sink.logger("wasm"), registry, clock: { now: () => Date.now() } },
  );
  return { ...w, lines, registry };
}

const opts = getOptions;

describeRequiring(REQ, "OCI Wasm modules from a real registry", () => {
  const reg = new TestRegistry();
  const dirs: string[] = [];
  const mod = wasmModule("oci-compat", 300);
  const dockerMod = wasmModule("oci-docker", 300);
  const artifactMod = wasmModule("oci-artifact", 300);
  let compatDigest = "";
  let dockerDigest = "";
  let artifactDigest = "";
  let root = "";

  beforeAll(async () => {
    await reg.start();
    root = mkdtempSync(join(tmpdir(), "wasm-oci-"));
    dirs.push(root);
    compatDigest = await pushImage(reg, "wasm/compat", "v1", tgzWithPlugin(mod, dirs), false);
    dockerDigest = await pushImage(reg, "wasm/docker", "v1", tgzWithPlugin(dockerMod, dirs), true);
    artifactDigest = await pushArtifact(reg, "wasm/artifact", "v1", artifactMod);
  });
  afterAll(async () => {
    await reg.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("TestImageFetcher_Fetch layouts: OCI compat image, Docker compat image, Wasm artifact; the file is named by the manifest digest", async () => {
    const c = conversion(join(root, "layouts"));
    for (const [repo, m, digest] of [
      ["wasm/compat", mod, compatDigest],
      ["wasm/docker", dockerMod, dockerDigest],
      ["wasm/artifact", artifactMod, artifactDigest],
    ] as const) {
      const p = await c.cache.get(`oci://${reg.host}/${repo}:v1`, opts());
      expect(p.endsWith(`/${digest}.wasm`)).toBe(true);
      expect(sha256(readFileSync(p))).toBe(sha256(m));
    }
  });

  test("digest-pinned reference and checksum: fetched once, then found without the registry", async () => {
    const c = conversion(join(root, "digest"));
    const url = `oci://${reg.host}/wasm/compat@sha256:${compatDigest}`;
    const p = await c.cache.get(url, opts());
    expect(sha256(readFileSync(p))).toBe(sha256(mod));
    const q = await c.cache.get(url, opts({ pullPolicy: "Always", resourceVersion: "2" }));
    expect(q).toBe(p);
    expect(await c.registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="success"} 1');
    await expect(c.cache.get(`oci://${reg.host}/wasm/compat:v1`, opts({ checksum: "0".repeat(64) }))).rejects.toThrow("which does not match");
  });

  test("pull policy: a re-pushed tag is resolved again under Always (new resource version), kept under IfNotPresent", async () => {
    const c = conversion(join(root, "policy"));
    const url = `oci://${reg.host}/wasm/moving:v1`;
    const first = wasmModule("moving-1", 250);
    const second = wasmModule("moving-2", 250);
    await pushImage(reg, "wasm/moving", "v1", tgzWithPlugin(first, dirs), false);
    const p1 = await c.cache.get(url, opts({ resourceVersion: "1" }));
    await pushImage(reg, "wasm/moving", "v1", tgzWithPlugin(second, dirs), false);
    const kept = await c.cache.get(url, opts({ resourceVersion: "2", pullPolicy: "IfNotPresent" }));
    expect(kept).toBe(p1);
    const pulled = await c.cache.get(url, opts({ resourceVersion: "3", pullPolicy: "Always" }));
    expect(pulled).not.toBe(p1);
    expect(sha256(readFileSync(pulled))).toBe(sha256(second));
  });

  test("invalid images: no plugin.wasm in the layer, unknown layout, missing tag", async () => {
    const c = conversion(join(root, "invalid"));
    await pushImage(reg, "wasm/noplugin", "v1", tgzWithPlugin(mod, dirs, "other.wasm"), false);
    await expect(c.cache.get(`oci://${reg.host}/wasm/noplugin:v1`, opts())).rejects.toThrow("plugin.wasm not found in the archive");
    await expect(c.cache.get(`oci://${reg.host}/wasm/absent:v1`, opts())).rejects.toThrow("could not fetch Wasm OCI image");
    expect(await c.registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="manifest_failure"} 1');
  });

  test("ECDS push with an oci:// module reaches Envoy as a local file, verified (sha256 of the image manifest)", async () => {
    const dir = join(root, "ecds");
    const istiod = await new FakeIstiod({}).start();
    const cfg = testConfig(
      root,
      { ISTIO_META_CLUSTER_ID: "Kubernetes" },
      { discoveryAddress: istiod.address, controlPlaneAuthPolicy: "NONE", configPath: join(root, "proxy") },
    );
    const c = conversion(dir);
    const { sink } = memoryLogger("all:info");
    const proxy = createXdsProxy(cfg, { log: sink.logger("xdsproxy"), registry: c.registry, readiness: new Readiness(), dnsEnabled: false, ecds: c.hook });
    const ac = new AbortController();
    await proxy.start(ac.signal);
    const envoy = new EnvoyClient(proxy.socketPath);
    try {
      envoy.send({ typeUrl: LDS });
      const up = await istiod.nextStream();
      await up.nextRequest((r) => r.typeUrl === LDS);
      const ec = anyBytes(T.ec, {
        name: "ns.oci-plugin",
        typed_config: any(T.httpWasm, {
          config: {
            vm_config: {
              code: { remote: { http_uri: { uri: `oci://${reg.host}/wasm/compat:v1`, timeout: { seconds: 10 } }, sha256: compatDigest } },
              environment_variables: { key_values: { ISTIO_META_WASM_IMAGE_PULL_POLICY: "IfNotPresent", ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION: "7" } },
            },
          },
        }),
      });
      const value = (TYPES.Res.root.lookupType("google.protobuf.Any").decode(ec) as unknown as { value: Uint8Array }).value;
      up.send({ typeUrl: URL_OF(T.ec), versionInfo: "v1", nonce: "o1", resources: [{ typeUrl: URL_OF(T.ec), value }] });
      const [got] = await envoy.waitFor(1, 15_000);
      const res = TYPES.Res.decode(got!) as unknown as { nonce: string; resources: { typeUrl: string; value: Uint8Array }[] };
      expect(res.nonce).toBe("o1");
      const A = TYPES.Res.root.lookupType("google.protobuf.Any");
      const conv = readExtensionConfig(A.encode(A.create(res.resources[0]!)).finish());
      expect(conv.typeUrl).toBe(URL_OF(T.httpWasm));
      const file: string = conv.config.config.vm_config.code.local.filename;
      expect(file).toBe(join(dir, sha256(new TextEncoder().encode(`oci://${reg.host}/wasm/compat`)), `${compatDigest}.wasm`));
      expect(sha256(readFileSync(file))).toBe(sha256(mod));
      expect(conv.config.config.vm_config.environment_variables).toBeUndefined();
    } finally {
      envoy.close();
      ac.abort();
      await proxy.stopped();
      await istiod.stop();
    }
  });
});

describeRequiring(REQ, "OCI pulls with a pull secret (Basic auth registry)", () => {
  const reg = new TestRegistry({ auth: { user: "puller", password: "s3cret-pw" } });
  const dirs: string[] = [];
  const mod = wasmModule("private", 220);
  beforeAll(async () => {
    await reg.start();
    await pushImage(reg, "wasm/private", "v1", tgzWithPlugin(mod, dirs), false);
  });
  afterAll(async () => {
    await reg.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("anonymous pull is refused; the docker config JSON secret (auth or username/password) pulls", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wasm-auth-"));
    dirs.push(dir);
    const c = conversion(dir);
    const url = `oci://${reg.host}/wasm/private:v1`;
    await expect(c.cache.get(url, opts())).rejects.toThrow("wants credentials");
    const wrong = new TextEncoder().encode(JSON.stringify({ auths: { [reg.host]: { username: "puller", password: "nope" } } }));
    await expect(c.cache.get(url, opts({ pullSecret: wrong }))).rejects.toThrow("refused the credentials");
    const secret = new TextEncoder().encode(JSON.stringify({ auths: { [reg.host]: { auth: Buffer.from("puller:s3cret-pw").toString("base64") } } }));
    const p = await c.cache.get(url, opts({ pullSecret: secret }));
    expect(sha256(readFileSync(p))).toBe(sha256(mod));
    expect(c.lines.join("\n")).not.toContain("s3cret-pw");
  });
});

describeRequiring(REQ, "OCI pulls over TLS and WASM_INSECURE_REGISTRIES", () => {
  const dirs: string[] = [];
  const pkiDir = mkdtempSync(join(tmpdir(), "wasm-regtls-"));
  dirs.push(pkiDir);
  let reg: TestRegistry;
  const mod = wasmModule("tls", 220);
  beforeAll(async () => {
    const pki = makeTestPki(pkiDir, ["127.0.0.1"]);
    reg = new TestRegistry({ tls: { cert: pki.serverCert, key: pki.serverKey } });
    await reg.start();
    await pushImage(reg, "wasm/tls", "v1", tgzWithPlugin(mod, dirs), false);
  });
  afterAll(async () => {
    await reg.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("an untrusted certificate fails; listing the registry (or *) in WASM_INSECURE_REGISTRIES pulls", async () => {
    const url = `oci://${reg.host}/wasm/tls:v1`;
    const strict = conversion(join(pkiDir, "strict"));
    await expect(strict.cache.get(url, opts())).rejects.toThrow(/certificate|self.signed|unable to (get|verify)|issuer/i);
    const listed = conversion(join(pkiDir, "listed"), `other.example:5000, ${reg.host}`);
    expect(sha256(readFileSync(await listed.cache.get(url, opts())))).toBe(sha256(mod));
    const star = conversion(join(pkiDir, "star"), "*");
    expect(sha256(readFileSync(await star.cache.get(url, opts())))).toBe(sha256(mod));
  });
});
