// The relay's ECDS path end to end: fake istiod -> xDS proxy (with the Wasm conversion as the
// agent builds it) -> a grpc-js client standing in for Envoy, modules served by a loopback HTTP
// server. Istio's TestECDSWasmConversion, plus ordering, non-blocking and NACK behaviour.

import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createWasmConversion } from "../../src/wasm/index.ts";
import { createXdsProxy, type XdsProxy } from "../../src/xds/proxy.ts";
import { FakeIstiod, type FakeStream } from "../support/fake-istiod.ts";
import { EnvoyClient, LDS, TYPES, testConfig } from "../xds/harness.ts";
import { T, URL_OF, any, anyBytes, readExtensionConfig } from "./protos.ts";
import { ModuleServer, sha256, wasmModule } from "./support.ts";

const ECDS = URL_OF(T.ec);

interface Setup {
  istiod: FakeIstiod;
  proxy: XdsProxy;
  envoy: EnvoyClient;
  up: FakeStream;
  server: ModuleServer;
  dir: string;
  lines: string[];
  registry: ReturnType<typeof newRegistry>;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(opts: { delta?: boolean; conversion?: boolean } = {}): Promise<Setup> {
  const root = mkdtempSync(join(tmpdir(), "wasm-ecds-"));
  const dir = join(root, "data");
  const server = new ModuleServer().start();
  const istiod = await new FakeIstiod({}).start();
  const cfg = testConfig(root, { ISTIO_META_CLUSTER_ID: "Kubernetes" }, { discoveryAddress: istiod.address, controlPlaneAuthPolicy: "NONE" });
  const { sink, lines } = memoryLogger("all:debug");
  const registry = newRegistry();
  const wasm = createWasmConversion(
    {
      dir,
      insecureRegistries: "",
      moduleExpiryMs: 86_400_000,
      purgeIntervalMs: 3_600_000,
      httpRequestTimeoutMs: 5000,
      httpRequestMaxRetries: 1,
      blockedCidrs: "",
      maxBinaryBytes: 1 << 20,
    },
    { log: sink.logger("wasm"), registry, clock: { now: () => Date.now() } },
  );
  const proxy = createXdsProxy(cfg, {
    log: sink.logger("xdsproxy"),
    registry,
    readiness: new Readiness(),
    dnsEnabled: false,
    ...(opts.conversion === false ? {} : { ecds: wasm.hook }),
  });
  const ac = new AbortController();
  await proxy.start(ac.signal);
  const envoy = new EnvoyClient(proxy.socketPath, opts.delta ?? false);
  cleanups.push(async () => {
    envoy.close();
    ac.abort();
    await proxy.stopped();
    await istiod.stop();
    server.stop();
    rmSync(root, { recursive: true, force: true });
  });
  envoy.send({ typeUrl: LDS });
  const up = await istiod.nextStream();
  await up.nextRequest((r) => r.typeUrl === LDS);
  return { istiod, proxy, envoy, up, server, dir, lines, registry };
}

const wasmResource = (name: string, uri: string, extra: Record<string, unknown> = {}) => ({
  typeUrl: ECDS,
  name,
  value: readAnyValue(
    anyBytes(T.ec, {
      name,
      typed_config: any(T.httpWasm, { config: { vm_config: { code: { remote: { http_uri: { uri, timeout: { seconds: 5 } }, ...extra } } } } }),
    }),
  ),
});

/** The Any's value bytes (FakeStream wraps typeUrl/value into the Any itself). */
function readAnyValue(anyB: Uint8Array): Uint8Array {
  const a = (TYPES.Res.root.lookupType("google.protobuf.Any").decode(anyB) as unknown as { value: Uint8Array }).value;
  return a;
}

function decodeResponse(b: Buffer, delta: boolean): { versionInfo: string; nonce: string; typeUrl: string; resources: Uint8Array[] } {
  if (delta) {
    const m = TYPES.DeltaRes.decode(b) as unknown as {
      systemVersionInfo: string;
      nonce: string;
      typeUrl: string;
      resources: { resource: { typeUrl: string; value: Uint8Array } }[];
    };
    return { versionInfo: m.systemVersionInfo, nonce: m.nonce, typeUrl: m.typeUrl, resources: m.resources.map((r) => anyOf(r.resource)) };
  }
  const m = TYPES.Res.decode(b) as unknown as { versionInfo: string; nonce: string; typeUrl: string; resources: { typeUrl: string; value: Uint8Array }[] };
  return { versionInfo: m.versionInfo, nonce: m.nonce, typeUrl: m.typeUrl, resources: m.resources.map(anyOf) };
}

function anyOf(a: { typeUrl: string; value: Uint8Array }): Uint8Array {
  const A = TYPES.Res.root.lookupType("google.protobuf.Any");
  return A.encode(A.create({ typeUrl: a.typeUrl, value: a.value })).finish();
}

for (const delta of [false, true]) {
  describe(`ECDS Wasm conversion (${delta ? "Delta" : "SotW"})`, () => {
    test("TestECDSWasmConversion: Envoy gets a local-file config whose file has the module's bytes and sha256; version and nonce unchanged", async () => {
      const s = await setup({ delta });
      const mod = wasmModule("ecds-basic");
      s.server.route("/plugin.wasm", () => new Response(mod));
      const other = {
        typeUrl: ECDS,
        name: "not-wasm",
        value: readAnyValue(anyBytes(T.ec, { name: "not-wasm", typed_config: any(T.httpRbac, { rules_stat_prefix: "x" }) })),
      };
      s.up.send({
        typeUrl: ECDS,
        versionInfo: "v1",
        nonce: "e1",
        resources: [wasmResource("ns.plugin", s.server.url("/plugin.wasm"), { sha256: sha256(mod) }), other],
      });
      const [got] = await s.envoy.waitFor(1);
      const r = decodeResponse(got!, delta);
      expect(r.nonce).toBe("e1");
      expect(r.typeUrl).toBe(ECDS);
      if (!delta) expect(r.versionInfo).toBe("v1");
      const conv = readExtensionConfig(r.resources[0]!);
      expect(conv.name).toBe("ns.plugin");
      expect(conv.typeUrl).toBe(URL_OF(T.httpWasm));
      const file: string = conv.config.config.vm_config.code.local.filename;
      expect(file.startsWith(s.dir + "/")).toBe(true);
      expect(file.endsWith(`/${sha256(mod)}.wasm`)).toBe(true);
      expect(sha256(readFileSync(file))).toBe(sha256(mod));
      // The other resource is passed unchanged.
      expect(readExtensionConfig(r.resources[1]!).config).toEqual({ rules_stat_prefix: "x" });
      expect(await s.registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="success"} 1');
    });

    test("a slow download does not hold back other types; ECDS responses reach Envoy in istiod's order", async () => {
      const s = await setup({ delta });
      const slow = wasmModule("slow");
      const fast = wasmModule("fast");
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      s.server.route("/slow.wasm", async () => (await gate, new Response(slow)));
      s.server.route("/fast.wasm", () => new Response(fast));
      s.up.send({ typeUrl: ECDS, versionInfo: "v1", nonce: "e1", resources: [wasmResource("a", s.server.url("/slow.wasm"))] });
      s.up.send({ typeUrl: ECDS, versionInfo: "v2", nonce: "e2", resources: [wasmResource("a", s.server.url("/fast.wasm"))] });
      s.up.send({ typeUrl: LDS, versionInfo: "l1", nonce: "l1", resources: [{ typeUrl: LDS, value: Buffer.from("listener") }] });
      const [first] = await s.envoy.waitFor(1);
      expect(decodeResponse(first!, delta).typeUrl).toBe(LDS);
      // The fast module is downloaded, but its response waits for the slow one before it.
      while (!s.server.hits.get("/fast.wasm")) await Bun.sleep(10);
      release();
      const all = await s.envoy.waitFor(3);
      expect(all.slice(1).map((b) => decodeResponse(b, delta).nonce)).toEqual(["e1", "e2"]);
    });

    test("an unreadable resource: NACK upstream (SotW: with Envoy's last ACKed ECDS version), nothing to Envoy", async () => {
      const s = await setup({ delta });
      const mod = wasmModule("ok");
      s.server.route("/ok.wasm", () => new Response(mod));
      s.up.send({ typeUrl: ECDS, versionInfo: "v1", nonce: "e1", resources: [wasmResource("a", s.server.url("/ok.wasm"))] });
      await s.envoy.waitFor(1);
      s.envoy.send(delta ? { typeUrl: ECDS, responseNonce: "e1" } : { typeUrl: ECDS, versionInfo: "v1", responseNonce: "e1" });
      const from = s.up.requests.length;
      await s.up.nextRequest((r) => r.typeUrl === ECDS && r.responseNonce === "e1", from - 1);
      s.up.send({
        typeUrl: ECDS,
        versionInfo: "v2",
        nonce: "e2",
        resources: [{ typeUrl: ECDS, name: "bad", value: readAnyValue(anyBytes(T.ec, { name: "bad" })) }],
      });
      const nack = await s.up.nextRequest((r) => r.typeUrl === ECDS && r.responseNonce === "e2");
      expect(nack.errorDetail?.code).toBe(13);
      expect(nack.errorDetail?.message).toContain("does not contain any typed config");
      if (!delta) expect(nack.versionInfo).toBe("v1");
      // Sentinel: a later LDS push arrives; the bad ECDS response never did.
      s.up.send({ typeUrl: LDS, versionInfo: "l1", nonce: "l1", resources: [{ typeUrl: LDS, value: Buffer.from("listener") }] });
      const all = await s.envoy.waitFor(2);
      expect(all.map((b) => decodeResponse(b, delta).nonce)).toEqual(["e1", "l1"]);
    });

    test("fetch failure with fail_open: Envoy gets the allow-all RBAC filter under the plugin's name", async () => {
      const s = await setup({ delta });
      s.server.route("/broken.wasm", () => new Response("nope", { status: 404 }));
      s.up.send({
        typeUrl: ECDS,
        versionInfo: "v1",
        nonce: "e1",
        resources: [
          {
            ...wasmResource("p", s.server.url("/broken.wasm")),
            value: readAnyValue(
              anyBytes(T.ec, {
                name: "p",
                typed_config: any(T.httpWasm, {
                  config: { fail_open: true, vm_config: { code: { remote: { http_uri: { uri: s.server.url("/broken.wasm"), timeout: { seconds: 5 } } } } } },
                }),
              }),
            ),
          },
        ],
      });
      const [got] = await s.envoy.waitFor(1);
      const conv = readExtensionConfig(decodeResponse(got!, delta).resources[0]!);
      expect(conv).toMatchObject({ name: "p", typeUrl: URL_OF(T.httpRbac), config: { rules_stat_prefix: "wasm-default-allow" } });
      expect(s.lines.some((l) => l.includes("broken.wasm") && l.includes("status code 404") && l.includes("allow RBAC filter"))).toBe(true);
    });
  });
}

test("conversion off (no hook): ECDS responses pass through as the same bytes", async () => {
  const s = await setup({ conversion: false });
  const resp = s.up.encode({ typeUrl: ECDS, versionInfo: "v1", nonce: "e1", resources: [wasmResource("a", "http://127.0.0.1:1/never.wasm")] });
  s.up.sendRaw(resp);
  const [got] = await s.envoy.waitFor(1);
  expect(got!.equals(resp)).toBe(true);
  expect(existsSync(s.dir)).toBe(false);
});
