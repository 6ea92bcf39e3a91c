// The start path's YAML shortcuts must give exactly what the `yaml` package gives.

import { describe, expect, test } from "bun:test";
import { parse, stringify } from "yaml";
import { parseYamlOrJson, stringifySimpleYaml } from "../../src/lib/yaml.ts";
import { defaultProxyConfig } from "../../src/config/proxyconfig.ts";
import { proxyConfigYaml } from "../../src/config/redact.ts";

const lib = (v: unknown) => stringify(v, { sortMapEntries: true });

describe("stringifySimpleYaml", () => {
  const configs: Record<string, unknown>[] = [
    defaultProxyConfig() as Record<string, unknown>,
    {
      binaryPath: "/usr/local/bin/envoy",
      configPath: "./etc/istio/proxy",
      discoveryAddress: "istiod.istio-system.svc:15012",
      drainDuration: "45s",
      proxyAdminPort: 15000,
      statusPort: 15020,
      holdApplicationUntilProxyStarts: true,
      concurrency: 2,
      tracing: { zipkin: { address: "zipkin.istio-system:9411" } },
      proxyMetadata: { ISTIO_META_DNS_CAPTURE: "true", DNS_AGENT: "", ISTIO_META_ENABLE_HBONE: "1" },
      extraStatTags: ["request_protocol", "upstream_cluster"],
      proxyStatsMatcher: { inclusionPrefixes: ["cluster.outbound", "listener"] },
    },
  ];
  test.each(configs.map((c, i) => [i, c] as const))("config %d: same text as yaml.stringify, or undefined", (_i, c) => {
    const mine = stringifySimpleYaml(c);
    if (mine !== undefined) expect(mine).toBe(lib(c));
  });

  test("the default ProxyConfig is simple (the start path does not load yaml for it)", () => {
    expect(stringifySimpleYaml(defaultProxyConfig() as Record<string, unknown>)).toBe(lib(defaultProxyConfig()));
  });

  // Every scalar it prints plain must be printed plain by yaml too, and read back as the same value.
  const scalars: unknown[] = [
    "a",
    "abc",
    "15s",
    "0.5s",
    "1.2.3.4",
    "10.0.0.1:8080",
    "[::1]:80",
    "::1",
    "a:b",
    "a:",
    "-a",
    "-1",
    "+1",
    "1",
    "01",
    "0x1f",
    "0o17",
    "0b1",
    "1e3",
    "1_000",
    ".5",
    "1.",
    "~",
    "null",
    "Null",
    "true",
    "True",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Y",
    "N",
    ".inf",
    ".nan",
    "12:30",
    "1:20:30",
    "a b",
    "a #b",
    "#a",
    "&a",
    "*a",
    "!a",
    "|a",
    ">a",
    "%a",
    "@a",
    "`a",
    "'a'",
    '"a"',
    "a,b",
    "a[b]",
    "a{b}",
    "a?b",
    "?a",
    "a=b",
    "a+b",
    "a%b",
    "a@b",
    "a/b",
    "/a",
    "_a",
    "a_",
    "x".repeat(59),
    "x".repeat(61),
    "",
    " a",
    "a ",
    "<redacted>",
    "é",
    "a\nb",
    "a\tb",
    0,
    1,
    -1,
    15020,
    2 ** 53,
    1.5,
    -0,
    NaN,
    Infinity,
    true,
    false,
    null,
  ];
  test.each(scalars.map((s) => [JSON.stringify(s) ?? String(s), s] as const))("scalar %s", (_n, s) => {
    const doc = { key: s };
    const mine = stringifySimpleYaml(doc);
    if (mine === undefined) return; // left to yaml
    expect(mine).toBe(lib(doc));
    expect(parse(mine)).toEqual(doc);
  });

  test("keys are sorted as yaml sorts them; odd keys and empty collections are left to yaml", () => {
    const doc = { b: 1, B: 2, a_b: 3, "a-b": 4, a: { z: "x", w: ["p", "q"] } };
    expect(stringifySimpleYaml(doc)).toBe(lib(doc));
    expect(stringifySimpleYaml({ "a b": 1 })).toBeUndefined();
    expect(stringifySimpleYaml({ "1": 1 })).toBeUndefined();
    expect(stringifySimpleYaml({ a: {} })).toBeUndefined();
    expect(stringifySimpleYaml({ a: [] })).toBeUndefined();
    expect(stringifySimpleYaml({ a: [{ b: 1 }] })).toBeUndefined();
  });

  test("proxyConfigYaml gives yaml's text whichever way it goes", () => {
    for (const c of [...configs, { a: "needs quoting: yes", b: [{ c: 1 }] }]) expect(proxyConfigYaml(c)).toBe(lib(c).trimEnd());
  });
});

describe("parseYamlOrJson", () => {
  const texts = [
    '{"binaryPath":"/e","statusPort":15020,"proxyMetadata":{"A":"1"},"tracing":{"zipkin":{"address":"z:9411"}}}',
    '  \n{"a": [1, 2.5, -0, 1e3, true, null, "x\\"y:z", {"b": {}}], "c": "\\u00e9"}',
    '{"a":1,"a":2}',
    '{"a":{"b":1,"b":2}}',
    "{a: 1}",
    '{"a": 1} # comment',
    "a: 1\nb: [1, 2]",
    '{"a": "b: c"}',
    "",
    "[1, 2]",
  ];
  test.each(texts.map((t) => [t] as const))("%p: same value or same error as yaml", (t) => {
    let want: unknown;
    let wantErr: string | undefined;
    try {
      want = parse(t, { prettyErrors: false });
    } catch (e) {
      wantErr = (e as Error).message;
    }
    if (wantErr !== undefined) expect(() => parseYamlOrJson(t, { prettyErrors: false })).toThrow(wantErr);
    else expect(parseYamlOrJson(t, { prettyErrors: false })).toEqual(want);
  });
});
