// ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION decides whether the agent builds the ECDS hook, and
// the WASM_* settings reach the conversion with their ranges enforced.

import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { wasmFromConfig } from "../../src/wasm/factory.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { createWasmConversion } from "../../src/wasm/index.ts";
import { testConfig } from "../xds/harness.ts";

for (const [value, on] of [
  ["", true],
  ["true", true],
  ["false", false],
] as const) {
  test(`ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION=${JSON.stringify(value)}: conversion ${on ? "built" : "absent"}`, () => {
    const env: Record<string, string> = value === "" ? {} : { ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION: value };
    const cfg = testConfig("/nonexistent", env, { discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" });
    const w = wasmFromConfig(cfg, { sink: memoryLogger().sink, registry: newRegistry(), now: () => 0 });
    expect(w?.component.name).toBe(on ? "wasm" : undefined);
    expect(w?.hook.typeUrl).toBe(on ? "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig" : undefined);
  });
}

test("settings out of range are named and replaced by Istio's defaults; a bad CIDR is named and skipped", () => {
  const { sink, lines } = memoryLogger("all:debug");
  const w = createWasmConversion(
    {
      dir: "/nonexistent",
      insecureRegistries: "",
      moduleExpiryMs: 0,
      purgeIntervalMs: 5,
      httpRequestTimeoutMs: -1,
      httpRequestMaxRetries: 0,
      blockedCidrs: "10.0.0.0/8,bogus",
      maxBinaryBytes: 1,
    },
    { log: sink.logger("wasm"), registry: newRegistry(), clock: { now: () => 0 } },
  );
  expect(w.component.name).toBe("wasm");
  const text = lines.join("\n");
  expect(text).toContain("WASM_MODULE_EXPIRY=0 is outside 1..31536000000; using 86400000");
  expect(text).toContain("WASM_PURGE_INTERVAL=5 is outside");
  expect(text).toContain("WASM_HTTP_REQUEST_TIMEOUT=-1 is outside");
  expect(text).toContain("WASM_HTTP_REQUEST_MAX_RETRIES=0 is outside 1..100; using 5");
  expect(text).toContain("ISTIO_WASM_MAX_BINARY_SIZE_BYTES=1 is outside");
  expect(text).toContain('BLOCKED_CIDRS_IN_WASM_FETCH: "bogus" is not a CIDR');
});

test("the hook built from AgentConfig loads the conversion on the first ECDS response and converts", async () => {
  const { T, URL_OF, any, anyBytes, readExtensionConfig } = await import("./protos.ts");
  const { ModuleServer, wasmModule, sha256 } = await import("./support.ts");
  const root = mkdtempSync(join(tmpdir(), "wasm-factory-"));
  const server = new ModuleServer().start();
  try {
    const mod = wasmModule("factory");
    server.route("/m.wasm", () => new Response(mod));
    const cfg = testConfig(root, {}, { discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" });
    const { sink } = memoryLogger();
    const { hook } = wasmFromConfig(cfg, { sink, registry: newRegistry(), now: () => 0 })!;
    const res = (await import("../xds/harness.ts")).TYPES.Res;
    const A = res.root.lookupType("google.protobuf.Any");
    const ec = A.decode(
      anyBytes(T.ec, {
        name: "p",
        typed_config: any(T.httpWasm, { config: { vm_config: { code: { remote: { http_uri: { uri: server.url("/m.wasm") } } } } } }),
      }),
    );
    const msg = res.encode(res.create({ typeUrl: URL_OF(T.ec), nonce: "n1", versionInfo: "v1", resources: [ec] })).finish();
    const out = await hook.convert(msg, false);
    if (out.kind !== "forward") throw new Error(JSON.stringify(out));
    const decoded = res.decode(out.message) as unknown as { resources: { typeUrl: string; value: Uint8Array }[] };
    const file: string = readExtensionConfig(A.encode(A.create(decoded.resources[0]!)).finish()).config.config.vm_config.code.local.filename;
    expect(file.startsWith(join(root, "var/lib/istio/data") + "/")).toBe(true);
    expect(sha256(new Uint8Array(await Bun.file(file).arrayBuffer()))).toBe(sha256(mod));
  } finally {
    server.stop();
    rmSync(root, { recursive: true, force: true });
  }
});
