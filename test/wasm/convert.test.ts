// Istio's pkg/wasm/convert_test.go cases (TestWasmConvertWithWrongMessages, TestWasmConvert),
// inputs built with Envoy's real protos and outputs decoded with them, plus the network filter,
// failure_policy, env stripping and sha256 "nil" cases convert.go handles.

import { describe, expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { WasmConverter } from "../../src/wasm/convert.ts";
import { wasmMetrics } from "../../src/wasm/metrics.ts";
import { WasmSchema } from "../../src/wasm/schema.ts";
import type { GetOptions, ModuleSource } from "../../src/wasm/types.ts";
import { encodeFields, lenField, parseFields, replaceField, varintField } from "../../src/lib/protowire.ts";
import { T, URL_OF, any, anyBytes, encode, readExtensionConfig, struct } from "./protos.ts";

/** convert_test.go mockCache: the module path and error come from the URL's query. */
class MockCache implements ModuleSource {
  calls: { url: string; opts: GetOptions }[] = [];
  constructor(private readonly want: { secret?: string; policy?: string } = {}) {}
  async get(url: string, opts: GetOptions): Promise<string> {
    this.calls.push({ url, opts });
    const q = new URL(url).searchParams;
    if (this.want.secret !== undefined && new TextDecoder().decode(opts.pullSecret) !== this.want.secret) throw new Error(`wrong secret for ${url}`);
    if ((this.want.policy ?? "Unspecified") !== opts.pullPolicy) throw new Error(`wrong pull policy for ${url}, got ${opts.pullPolicy}`);
    if (q.get("error")) throw new Error(q.get("error")!);
    return q.get("module") ?? "";
  }
}

function converter(cache: ModuleSource = new MockCache()) {
  const registry = newRegistry();
  const metrics = wasmMetrics(registry);
  return { c: new WasmConverter({ cache, schema: new WasmSchema(), metrics, log: silentLogger(), clock: { now: () => 0 } }), registry };
}

const remoteVm = (uri: string, extra: Record<string, unknown> = {}) => ({ vm_config: { code: { remote: { http_uri: { uri } } }, ...extra } });
const typedStructEc = (name: string, wasmJson: Record<string, unknown>, typeUrl = URL_OF(T.httpWasm)) =>
  anyBytes(T.ec, { name, typed_config: any(T.typedStruct, { type_url: typeUrl, value: struct(wasmJson) }) });
const anyEc = (name: string, type: string, msg: Record<string, unknown>) => anyBytes(T.ec, { name, typed_config: any(type, msg) });

// extensionConfigMap of convert_test.go
const M = {
  nilTypedConfig: () => anyBytes(T.ec, { name: "nil-typed-config" }),
  empty: () => anyEc("empty", T.struct, {}),
  noWasm: () => anyEc("no-wasm", T.typedStruct, { type_url: "type.googleapis.com/sometype" }),
  noRemoteLoad: () =>
    typedStructEc("no-remote-load", {
      config: { vmConfig: { runtime: "envoy.wasm.runtime.null", code: { local: { inlineString: "envoy.wasm.metadata_exchange" } } } },
    }),
  noHttpUri: () => typedStructEc("remote-load-fail", { config: { vmConfig: { code: { remote: {} } } } }),
  remoteLoadSuccess: () =>
    typedStructEc("remote-load-success", { config: { vmConfig: { code: { remote: { httpUri: { uri: "http://test?module=test.wasm" } } } } } }),
  remoteLoadSuccessWithoutTypedStruct: () => anyEc("remote-load-success", T.httpWasm, { config: remoteVm("http://test?module=test.wasm") }),
  remoteLoadFailClose: () =>
    typedStructEc("remote-load-fail", {
      config: { vmConfig: { code: { remote: { httpUri: { uri: "http://test?module=test.wasm&error=download-error" } } } } },
    }),
  remoteLoadFailOpen: () =>
    typedStructEc("remote-load-fail", {
      config: { vmConfig: { code: { remote: { httpUri: { uri: "http://test?module=test.wasm&error=download-error" } } } }, failOpen: true },
    }),
  remoteLoadSecret: () =>
    typedStructEc("remote-load-success", {
      config: {
        vmConfig: {
          code: { remote: { httpUri: { uri: "http://test?module=test.wasm" } } },
          environmentVariables: { keyValues: { ISTIO_META_WASM_IMAGE_PULL_SECRET: "secret" } },
        },
      },
    }),
};

/** The expected outputs, as decoded objects. */
const LOCAL_FILE = {
  name: "remote-load-success",
  typeUrl: URL_OF(T.httpWasm),
  config: { config: { vm_config: { code: { local: { filename: "test.wasm" } } } } },
};
const ALLOW = { name: "remote-load-fail", typeUrl: URL_OF(T.httpRbac), config: { rules_stat_prefix: "wasm-default-allow" } };
const DENY = { name: "remote-load-fail", typeUrl: URL_OF(T.httpRbac), config: { rules: {}, rules_stat_prefix: "wasm-default-deny" } };

function shape(b: Uint8Array) {
  const r = readExtensionConfig(b);
  expect(r.anyType).toBe(URL_OF(T.ec));
  return { name: r.name, typeUrl: r.typeUrl, config: r.config };
}

describe("TestWasmConvertWithWrongMessages", () => {
  const cases: [string, () => Uint8Array][] = [
    ["wrong typed config", () => anyBytes(T.empty, {})],
    ["wrong value in typed struct", () => typedStructEc("wrong-input", { wrong: "value" })],
    ["empty wasm in typed struct", () => typedStructEc("wrong-input", {})],
    ["no remote and local code in wasm", () => typedStructEc("wrong-input", { config: { vmConfig: { code: {} } } })],
    ["empty wasm in typed extension config", () => anyEc("wrong-input", T.httpWasm, {})],
    [
      "wrong wasm filter value",
      () =>
        anyBytes(T.ec, { name: "wrong-input", typed_config: { type_url: URL_OF(T.httpWasm), value: encode(T.vmConfig, { runtime: "test", vm_id: "test" }) } }),
    ],
    [
      "wrong typed struct value",
      () =>
        anyBytes(T.ec, {
          name: "wrong-input",
          typed_config: { type_url: URL_OF(T.typedStruct), value: encode(T.vmConfig, { runtime: "test", vm_id: "test" }) },
        }),
    ],
  ];
  for (const [name, input] of cases) {
    test(name, async () => {
      const out = await converter().c.convertResources([input()]);
      expect(out.ok).toBe(false);
    });
  }
});

describe("TestWasmConvert", () => {
  const cases: { name: string; input: (() => Uint8Array)[]; want: (object | "same")[]; wantErr: boolean }[] = [
    { name: "nil typed config ", input: [M.nilTypedConfig], want: ["same"], wantErr: true },
    { name: "remote load success", input: [M.remoteLoadSuccess], want: [LOCAL_FILE], wantErr: false },
    { name: "remote load success without typed struct", input: [M.remoteLoadSuccessWithoutTypedStruct], want: [LOCAL_FILE], wantErr: false },
    { name: "mix", input: [M.remoteLoadFailClose, M.remoteLoadSuccess], want: [DENY, LOCAL_FILE], wantErr: false },
    { name: "remote load fail open", input: [M.remoteLoadFailOpen], want: [ALLOW], wantErr: false },
    { name: "remote load fail close", input: [M.remoteLoadFailClose], want: [DENY], wantErr: false },
    { name: "no typed struct", input: [M.empty], want: ["same"], wantErr: false },
    { name: "no wasm", input: [M.noWasm], want: ["same"], wantErr: false },
    { name: "no remote load", input: [M.noRemoteLoad], want: ["same"], wantErr: false },
    { name: "no uri", input: [M.noHttpUri], want: [DENY], wantErr: false },
    { name: "secret", input: [M.remoteLoadSecret], want: [LOCAL_FILE], wantErr: false },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const inputs = c.input.map((f) => f());
      const out = await converter().c.convertResources(inputs);
      expect(out.ok).toBe(!c.wantErr);
      if (!out.ok) return; // Istio NACKs: nothing is forwarded, the inputs are what they were
      expect(out.resources.length).toBe(c.want.length);
      out.resources.forEach((r, i) => {
        if (c.want[i] === "same") expect(Buffer.from(r).equals(Buffer.from(inputs[i]!))).toBe(true);
        else expect(shape(r)).toEqual(c.want[i] as any);
      });
    });
  }
});

describe("beyond convert_test.go: what convert.go does", () => {
  test("network Wasm filter: rewritten to the local file; on failure the network RBAC fallback", async () => {
    const ok = anyEc("net", T.networkWasm, { config: remoteVm("http://test?module=/data/net.wasm") });
    const bad = anyEc("net-bad", T.networkWasm, { config: { ...remoteVm("http://test?error=boom"), fail_open: true } });
    const badClosed = anyEc("net-closed", T.networkWasm, { config: remoteVm("http://test?error=boom") });
    const out = await converter().c.convertResources([ok, bad, badClosed]);
    expect(out.ok).toBe(true);
    if (!out.ok) return;
    expect(shape(out.resources[0]!)).toEqual({
      name: "net",
      typeUrl: URL_OF(T.networkWasm),
      config: { config: { vm_config: { code: { local: { filename: "/data/net.wasm" } } } } },
    });
    expect(shape(out.resources[1]!)).toEqual({ name: "net-bad", typeUrl: URL_OF(T.networkRbac), config: { stat_prefix: "wasm-default-allow" } });
    expect(shape(out.resources[2]!)).toEqual({ name: "net-closed", typeUrl: URL_OF(T.networkRbac), config: { rules: {}, stat_prefix: "wasm-default-deny" } });
  });

  test("failure_policy wins over fail_open: FAIL_OPEN allows, FAIL_CLOSED denies even with fail_open", async () => {
    // failure_policy (field 7) is newer than the bundled protos: added at the wire level.
    const withPolicy = (name: string, policy: number, failOpen: boolean) => {
      const wasm = parseFields(encode(T.httpWasm, { config: { ...remoteVm("http://test?error=x"), fail_open: failOpen } }));
      const plugin = [...parseFields(wasm[0]!.data), varintField(7, policy)];
      const wasmBytes = encodeFields(replaceField(wasm, 1, lenField(1, encodeFields(plugin))));
      return anyBytes(T.ec, { name, typed_config: { type_url: URL_OF(T.httpWasm), value: wasmBytes } });
    };
    const out = await converter().c.convertResources([withPolicy("open", 3, false), withPolicy("closed", 2, true)]);
    if (!out.ok) throw new Error(out.error);
    expect(shape(out.resources[0]!).config).toEqual({ rules_stat_prefix: "wasm-default-allow" });
    expect(shape(out.resources[1]!).config).toEqual({ rules: {}, rules_stat_prefix: "wasm-default-deny" });
  });

  test("ISTIO_META_* VM env keys are stripped; others and host keys stay; policy, version and secret reach the cache", async () => {
    const cache = new MockCache({ secret: "s3cret", policy: "Always" });
    const keyValues = {
      ISTIO_META_WASM_IMAGE_PULL_SECRET: "s3cret",
      ISTIO_META_WASM_IMAGE_PULL_POLICY: "Always",
      ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION: "42",
      KEEP: "me",
    };
    const r = anyEc("ns.plugin", T.httpWasm, {
      config: {
        vm_config: {
          code: { remote: { http_uri: { uri: "http://test?module=m.wasm", timeout: { seconds: 30 } }, sha256: "nil" } },
          environment_variables: { key_values: keyValues, host_env_keys: ["HOST"] },
        },
      },
    });
    const only = anyEc("ns.only", T.httpWasm, {
      config: {
        vm_config: {
          code: { remote: { http_uri: { uri: "http://test?module=o.wasm" } } },
          environment_variables: { key_values: { ISTIO_META_WASM_IMAGE_PULL_SECRET: "s3cret", ISTIO_META_WASM_IMAGE_PULL_POLICY: "Always" } },
        },
      },
    });
    const out = await converter(cache).c.convertResources([r, only]);
    if (!out.ok) throw new Error(out.error);
    expect(shape(out.resources[0]!).config.config.vm_config.environment_variables).toEqual({ key_values: { KEEP: "me" }, host_env_keys: ["HOST"] });
    expect(shape(out.resources[1]!).config.config.vm_config.environment_variables).toBeUndefined();
    const first = cache.calls.find((c) => c.url.includes("m.wasm"))!;
    expect(first.opts).toMatchObject({ checksum: "", resourceName: "ns.plugin", resourceVersion: "42", requestTimeoutMs: 30000, pullPolicy: "Always" });
    expect(cache.calls.find((c) => c.url.includes("o.wasm"))!.opts.requestTimeoutMs).toBe(5000);
  });

  test("an empty pull secret is a fetch failure: deny fallback, the cache is not asked", async () => {
    const cache = new MockCache();
    const r = anyEc("ns.p", T.httpWasm, {
      config: {
        vm_config: {
          code: { remote: { http_uri: { uri: "http://test?module=m.wasm" } } },
          environment_variables: { key_values: { ISTIO_META_WASM_IMAGE_PULL_SECRET: "" } },
        },
      },
    });
    const { c, registry } = converter(cache);
    const out = await c.convertResources([r]);
    if (!out.ok) throw new Error(out.error);
    expect(shape(out.resources[0]!).config).toEqual({ rules: {}, rules_stat_prefix: "wasm-default-deny" });
    expect(cache.calls.length).toBe(0);
    expect(await registry.getSingleMetricAsString("istio_agent_wasm_config_conversion_count")).toContain(
      'istio_agent_wasm_config_conversion_count{result="fetch_failure"} 1',
    );
  });

  test("fields the agent does not know survive the rewrite byte for byte", async () => {
    const wasm = parseFields(
      encode(T.httpWasm, { config: { name: "p", root_id: "r", ...remoteVm("http://test?module=x.wasm", { vm_id: "v", runtime: "envoy.wasm.runtime.v8" }) } }),
    );
    const unknown = lenField(99, new Uint8Array([1, 2, 3]));
    const wasmBytes = encodeFields([...wasm, unknown]);
    const input = anyBytes(T.ec, { name: "n", typed_config: { type_url: URL_OF(T.httpWasm), value: wasmBytes } });
    const out = await converter().c.convertResources([input]);
    if (!out.ok) throw new Error(out.error);
    const r = shape(out.resources[0]!);
    expect(r.config.config).toEqual({
      name: "p",
      root_id: "r",
      vm_config: { vm_id: "v", runtime: "envoy.wasm.runtime.v8", code: { local: { filename: "x.wasm" } } },
    });
    const ec = parseFields(parseFields(out.resources[0]!)[1]!.data);
    const tc = parseFields(ec[1]!.data);
    const fields = parseFields(tc[1]!.data);
    expect(fields.some((f) => f.no === 99 && Buffer.from(f.data).equals(Buffer.from([1, 2, 3])))).toBe(true);
  });

  test("metrics: conversion results by Istio's labels, duration observed once per response", async () => {
    const { c, registry } = converter();
    await c.convertResources([M.remoteLoadSuccess(), M.noWasm(), M.remoteLoadFailClose(), M.noHttpUri()]);
    const text = await registry.metrics();
    expect(text).toContain('istio_agent_wasm_config_conversion_count{result="success"} 1');
    expect(text).toContain('istio_agent_wasm_config_conversion_count{result="no_remote_load"} 1');
    expect(text).toContain('istio_agent_wasm_config_conversion_count{result="fetch_failure"} 1');
    expect(text).toContain('istio_agent_wasm_config_conversion_count{result="miss_remote_fetch_hint"} 1');
    expect(text).toContain("istio_agent_wasm_config_conversion_duration_count 1");
    await c.convertResources([anyBytes(T.empty, {})]);
    expect(await registry.metrics()).toContain('istio_agent_wasm_config_conversion_count{result="unmarshal_failure"} 1');
  });
});
