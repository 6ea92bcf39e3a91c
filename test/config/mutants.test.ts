// ProxyConfig layering, one function at a time, with literal inputs and outputs: the name
// normalisation (camelCase, map keys kept), the shapes a layer may have, the metadata merge, the
// proxyHeaders merge, the serviceCluster/tracingServiceName oneof and the sources record. Cases
// found by mutation testing (npm run mutate -- config).

import { describe, expect, test } from "bun:test";
import { camelCase, ConfigError, layerProxyConfig, parseLayer, type LayerInput } from "../../src/config/layering.ts";

const env = (text: string): LayerInput => ({ layer: "PROXY_CONFIG", origin: "PROXY_CONFIG", text });
const anno = (text: string): LayerInput => ({ layer: "annotation", origin: "annotation proxy.istio.io/config", text });
const mesh = (text: string): LayerInput => ({ layer: "mesh config", origin: "mesh config /m", text, meshConfig: true });

function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a throw");
}

describe("camelCase", () => {
  test.each([
    ["drain_duration", "drainDuration"],
    ["stat_name_length", "statNameLength"],
    ["file_flush_min_size_kb", "fileFlushMinSizeKb"],
    ["x_1y", "x1y"],
    ["alreadyCamel", "alreadyCamel"],
    ["trailing_", "trailing_"],
  ])("%s -> %s", (input, want) => {
    expect(camelCase(input)).toBe(want);
  });
});

describe("parseLayer", () => {
  test("empty, blank and null documents are no layer", () => {
    expect(parseLayer(env(""))).toBeUndefined();
    expect(parseLayer(env("  \n\t"))).toBeUndefined();
    expect(parseLayer(env("null"))).toBeUndefined();
    expect(parseLayer(env("~"))).toBeUndefined();
  });

  test("nested message fields are camelCased, inside lists too; map fields keep their keys", () => {
    const got = parseLayer(
      env(
        [
          "envoy_metrics_service:",
          "  tls_settings: {ca_certificates: /c}",
          "proxy_stats_matcher:",
          "  inclusion_prefixes: [a_b]",
          "proxy_metadata: {SOME_KEY: v, other_key: w}",
          "runtime_values: {re_key: x}",
          "readiness_probe: {http_get: {path: /p}}",
          "image: {image_type: distroless}",
          "tracing: {custom_tags: {my_tag: {literal: {value: v}}}}",
          "gateway_topology: {num_trusted_proxies: 1}",
          "extra_stat_tags: [x_y]",
          "private_key_provider: {crypto_mb: {poll_delay: 1s}}",
          "list_of_things: [{a_b: 1}]",
        ].join("\n"),
      ),
    );
    expect(got).toEqual({
      envoyMetricsService: { tlsSettings: { caCertificates: "/c" } },
      proxyStatsMatcher: { inclusionPrefixes: ["a_b"] },
      proxyMetadata: { SOME_KEY: "v", other_key: "w" },
      runtimeValues: { re_key: "x" },
      readinessProbe: { httpGet: { path: "/p" } },
      image: { imageType: "distroless" },
      tracing: { customTags: { my_tag: { literal: { value: "v" } } } },
      gatewayTopology: { numTrustedProxies: 1 },
      extraStatTags: ["x_y"],
      privateKeyProvider: { cryptoMb: { pollDelay: "1s" } },
      listOfThings: [{ aB: 1 }],
    });
  });

  test("a layer must be a mapping: scalars and lists are refused naming the origin", () => {
    const scalar = thrown(() => parseLayer(env("5")));
    expect(scalar).toBeInstanceOf(ConfigError);
    expect(scalar.message).toBe("PROXY_CONFIG: expected a ProxyConfig mapping, got number");
    expect(thrown(() => parseLayer(env("- a\n- b"))).message).toBe("PROXY_CONFIG: expected a ProxyConfig mapping, got a list");
    expect(thrown(() => parseLayer(mesh("just text"))).message).toBe("mesh config /m: expected a MeshConfig mapping, got string");
  });

  test("malformed text names the origin and gives the parser's first line only", () => {
    const e = thrown(() => parseLayer(anno("a: [1, 2")));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.message.startsWith("annotation proxy.istio.io/config: malformed YAML/JSON at line 1, column 9: ")).toBe(true);
    expect(e.message).not.toContain("\n");
  });

  test("a mesh file gives only its defaultConfig, spelled either way", () => {
    expect(parseLayer(mesh("enableTracing: true\ndefaultConfig:\n  stat_name_length: 10"))).toEqual({ statNameLength: 10 });
    expect(parseLayer(mesh("default_config:\n  statNameLength: 11"))).toEqual({ statNameLength: 11 });
    expect(parseLayer(mesh("enableTracing: true"))).toBeUndefined();
    expect(parseLayer(mesh("defaultConfig: null"))).toBeUndefined();
    expect(thrown(() => parseLayer(mesh("defaultConfig: 3"))).message).toBe("mesh config /m: defaultConfig must be a mapping");
    expect(thrown(() => parseLayer(mesh("defaultConfig: [a]"))).message).toBe("mesh config /m: defaultConfig must be a mapping");
  });

  test("outside a mesh file, defaultConfig is just an unknown field", () => {
    expect(parseLayer(env("defaultConfig: {statNameLength: 3}"))).toEqual({ defaultConfig: { statNameLength: 3 } });
  });
});

describe("layerProxyConfig", () => {
  test("with no layers: Istio's defaults, each field's source is default, nothing unknown", () => {
    const { config, sources, unknownFields } = layerProxyConfig([]);
    expect(config.serviceCluster).toBe("istio-proxy");
    expect(sources).toEqual({
      configPath: "default",
      binaryPath: "default",
      serviceCluster: "default",
      drainDuration: "default",
      terminationDrainDuration: "default",
      proxyAdminPort: "default",
      controlPlaneAuthPolicy: "default",
      discoveryAddress: "default",
      statNameLength: "default",
      statusPort: "default",
    });
    // Istio's default ProxyConfig has no tracer (no Zipkin unless configured).
    expect(config.tracing).toBeUndefined();
    expect(unknownFields).toEqual([]);
  });

  test("unknown fields are listed with their origin and do not reach the config", () => {
    const { config, unknownFields, sources } = layerProxyConfig([env("noSuch: 1\nstatusPort: 1"), anno("alsoNot: 2")]);
    expect(unknownFields).toEqual(["PROXY_CONFIG: noSuch", "annotation proxy.istio.io/config: alsoNot"]);
    expect(config).not.toHaveProperty("noSuch");
    expect(sources.statusPort).toBe("PROXY_CONFIG");
    expect(sources).not.toHaveProperty("noSuch");
  });

  test("proxyMetadata merges key by key; values become strings; null keeps what was there", () => {
    const { config, sources } = layerProxyConfig([
      env("proxyMetadata: {A: 1, B: true, C: null, D: {x: 1}}"),
      anno("proxyMetadata: {A: two}"),
      mesh("defaultConfig: {proxyMetadata: null}"),
    ]);
    expect(config.proxyMetadata).toEqual({ A: "two", B: "true", C: "", D: '{"x":1}' });
    expect(sources.proxyMetadata).toBe("mesh config /m");
  });

  test("proxyMetadata that is not a map is refused naming the layer", () => {
    expect(thrown(() => layerProxyConfig([anno("proxyMetadata: [a]")])).message).toBe(
      "annotation proxy.istio.io/config: proxyMetadata must be a map of strings",
    );
    expect(thrown(() => layerProxyConfig([env("proxyMetadata: text")])).message).toBe("PROXY_CONFIG: proxyMetadata must be a map of strings");
  });

  test("proxyHeaders keeps sub-fields a later layer leaves unset; a non-map replaces", () => {
    const merged = layerProxyConfig([env("proxyHeaders: {server: {disabled: true}, requestId: {disabled: true}}"), anno("proxyHeaders: {server: {value: x}}")]);
    expect(merged.config.proxyHeaders).toEqual({ server: { value: "x" }, requestId: { disabled: true } });
    const replaced = layerProxyConfig([env("proxyHeaders: {server: {disabled: true}}"), anno("proxyHeaders: [x]")]);
    expect(replaced.config.proxyHeaders as unknown).toEqual(["x"]);
    const afterList = layerProxyConfig([env("proxyHeaders: [x]"), anno("proxyHeaders: {server: {value: y}}")]);
    expect(afterList.config.proxyHeaders).toEqual({ server: { value: "y" } });
  });

  test("other fields are replaced whole, and the last layer is their source", () => {
    const { config, sources } = layerProxyConfig([env("tracing: {zipkin: {address: a:1}}"), anno("tracing: {datadog: {address: b:2}}")]);
    expect(config.tracing).toEqual({ datadog: { address: "b:2" } });
    expect(sources.tracing).toBe("annotation proxy.istio.io/config");
  });

  test("tracingServiceName set by a layer clears the default serviceCluster (a oneof), not an explicit one", () => {
    const only = layerProxyConfig([env("tracingServiceName: APP_LABEL_AND_NAMESPACE")]);
    expect(only.config).not.toHaveProperty("serviceCluster");
    const both = layerProxyConfig([env("serviceCluster: mine"), anno("tracingServiceName: CANONICAL_NAME_ONLY")]);
    expect(both.config.serviceCluster).toBe("mine");
    expect(layerProxyConfig([env("statusPort: 1")]).config.serviceCluster).toBe("istio-proxy");
  });
});

describe("every ProxyConfig field is known", () => {
  // The fields of istio.mesh.v1alpha1.ProxyConfig in istio/api mesh/v1alpha1/proxy.proto (read at
  // commit 00d4ed3c), in their proto (snake_case) spelling; then later fields and the ones this
  // agent accepts beyond that version (proxyHeaders, file flush settings: reference §2 and §5).
  const PROTO = [
    "config_path",
    "binary_path",
    "service_cluster",
    "tracing_service_name",
    "drain_duration",
    "parent_shutdown_duration",
    "discovery_address",
    "discovery_refresh_delay",
    "zipkin_address",
    "statsd_udp_address",
    "envoy_metrics_service_address",
    "proxy_admin_port",
    "availability_zone",
    "control_plane_auth_policy",
    "custom_config_file",
    "stat_name_length",
    "concurrency",
    "proxy_bootstrap_template_path",
    "interception_mode",
    "tracing",
    "sds",
    "envoy_access_log_service",
    "envoy_metrics_service",
    "proxy_metadata",
    "runtime_values",
    "status_port",
    "extra_stat_tags",
    "gateway_topology",
    "termination_drain_duration",
    "mesh_id",
    "readiness_probe",
    "proxy_stats_matcher",
    "hold_application_until_proxy_starts",
    "ca_certificates_pem",
    "image",
    "private_key_provider",
  ];
  const LATER = [
    "proxy_headers",
    "file_flush_interval",
    "file_flush_min_size_kb",
    "ca_certificate_pem",
    "sidecar_stats_template",
    "startup_probe",
    "drain_duration_seconds",
  ];
  test.each([...PROTO, ...LATER])("%s", (field) => {
    const value = field === "proxy_metadata" ? "{}" : "x";
    const { unknownFields, sources } = layerProxyConfig([env(`${field}: ${value}`)]);
    expect(unknownFields).toEqual([]);
    expect(sources[camelCase(field)]).toBe("PROXY_CONFIG");
  });
});

describe("layering: the remaining edges", () => {
  test("errors are ConfigErrors by name", () => {
    expect(thrown(() => parseLayer(env("5"))).name).toBe("ConfigError");
  });

  test("a malformed layer's message is the YAML parser's own first line, with the line and column", () => {
    // The text after the position is what the yaml library says for this input with prettyErrors off,
    // and its error code; column 4 is where the nested mapping `b:` starts.
    expect(thrown(() => parseLayer(env("a: b: c"))).message).toBe(
      "PROXY_CONFIG: malformed YAML/JSON at line 1, column 4: Nested mappings are not allowed in compact mappings (BLOCK_AS_IMPLICIT_KEY)",
    );
  });

  test("nested labels and annotations maps keep their keys", () => {
    expect(parseLayer(env("image: {image_type: x, labels: {app_name: a}, annotations: {some_key: b}}"))).toEqual({
      image: { imageType: "x", labels: { app_name: "a" }, annotations: { some_key: "b" } },
    });
  });

  test("a mesh file whose default_config is null is no layer", () => {
    expect(parseLayer(mesh("default_config: null"))).toBeUndefined();
  });

  test("an empty layer among others is skipped", () => {
    const { config, sources } = layerProxyConfig([env(""), anno("statusPort: 1")]);
    expect(config.statusPort).toBe(1);
    expect(sources.statusPort).toBe("annotation proxy.istio.io/config");
  });

  test("once proxyHeaders is set, other map-valued fields are still replaced as themselves", () => {
    const { config } = layerProxyConfig([env("proxyHeaders: {server: {disabled: true}}"), anno("tracing: {datadog: {address: d:1}}")]);
    expect(config.proxyHeaders).toEqual({ server: { disabled: true } });
    expect(config.tracing).toEqual({ datadog: { address: "d:1" } });
  });

  test("proxyHeaders: null or a string after a map replaces it", () => {
    const { config } = layerProxyConfig([env("proxyHeaders: {server: {disabled: true}}"), anno("proxyHeaders: null")]);
    expect(config.proxyHeaders).toBeNull();
    const text = layerProxyConfig([env("proxyHeaders: {server: {disabled: true}}"), anno("proxyHeaders: off")]);
    expect(text.config.proxyHeaders as unknown).toBe("off");
  });
});
