// Template parameters (Istio's toTemplateParams) and the option converters.

import { describe, expect, test } from "bun:test";
import { addressJson, keepaliveJson, splitHostPort, transportSocketJson } from "../../src/bootstrap/converters.ts";
import { BootstrapError } from "../../src/bootstrap/errors.ts";
import { DEFAULT_BOOTSTRAP_FLAGS, globalDownstreamMaxConnections, runtimeFlags, serviceCluster, toTemplateParams } from "../../src/bootstrap/params.ts";
import { statsParams, substituteValues } from "../../src/bootstrap/stats.ts";
import { buildNode, type NodeMetadataInputs } from "../../src/config/metadata.ts";
import type { ProxyConfig } from "../../src/config/proxyconfig.ts";
import { baseNodeInputs } from "./fixtures.ts";

function node(over: Partial<NodeMetadataInputs> = {}) {
  return buildNode(
    baseNodeInputs({
      proxyConfig: { configPath: "./etc/istio/proxy", discoveryAddress: "istiod.istio-system.svc:15012", proxyAdminPort: 15000, statusPort: 15020 },
      ...over,
    }),
  );
}

const params = (over: Partial<NodeMetadataInputs> = {}, flags = DEFAULT_BOOTSTRAP_FLAGS) =>
  toTemplateParams({ node: node(over), compliancePolicy: "", logAsJson: false, flags }).params;

describe("toTemplateParams", () => {
  test("IP family decides localhost, wildcard and DNS lookup family", () => {
    expect(params()).toMatchObject({ localhost: "127.0.0.1", wildcard: "0.0.0.0", dns_lookup_family: "V4_ONLY" });
    expect(params({ instanceIps: ["fd00::1"] })).toMatchObject({ localhost: "::1", wildcard: "::", dns_lookup_family: "V6_ONLY" });
    const mixed = params({ instanceIps: ["fd00::1", "10.0.0.1"] });
    expect(mixed).toMatchObject({ localhost: "127.0.0.1", dns_lookup_family: "V4_ONLY" });
    expect(mixed.dual_stack).toBeUndefined();
    const dual = params({ instanceIps: ["fd00::1", "10.0.0.1"] }, { ...DEFAULT_BOOTSTRAP_FLAGS, dualStack: true });
    expect(dual).toMatchObject({
      localhost: "::1",
      additional_localhost: "127.0.0.1",
      wildcard: "::",
      additional_wildcard: "0.0.0.0",
      dns_lookup_family: "ALL",
      dual_stack: true,
    });
  });

  test("xDS type and metadata discovery (waypoints force both; SotW disables discovery)", () => {
    expect(params()).toMatchObject({ xds_type: "DELTA_GRPC", metadata_discovery: false });
    const sotw = { ...DEFAULT_BOOTSTRAP_FLAGS, deltaXds: false };
    expect(params({ metadataDiscovery: true }, sotw)).toMatchObject({ xds_type: "GRPC", metadata_discovery: false });
    expect(params({ id: "waypoint~10.0.0.1~w.ns~ns.svc.cluster.local" }, sotw)).toMatchObject({
      xds_type: "DELTA_GRPC",
      metadata_discovery: true,
      nodeType: "waypoint",
    });
  });

  test("options Istio skips when zero are absent", () => {
    const p = params();
    for (const k of [
      "outlier_log_path",
      "custom_file_path",
      "secure_metrics_port",
      "region",
      "zone",
      "sub_zone",
      "statsd",
      "zipkin",
      "tracing_tls",
      "sts",
      "envoy_status_port_enable_proxy_protocol",
      "enable_self_discovery",
      "load_stats_config_json_str",
    ]) {
      expect(p[k]).toBeUndefined();
    }
    expect(p.pilot_SAN).toBe("[]");
    expect(p.discovery_host).toBe("istiod.istio-system.svc");
    expect(p.pilot_grpc_address).toBe('{"address": "istiod.istio-system.svc", "port_value": 15012}');
  });

  test("file credentials add the files socket; STS port adds sts params; LRS from metadata", () => {
    const p = params({ customCredentialsFileExists: true, stsPort: 15463, envs: ['ISTIO_META_LOAD_STATS_CONFIG_JSON={"api_type":"GRPC"}'] });
    expect(p.custom_file_path).toBe("./var/run/secrets/credential-uds/files-socket");
    expect(p).toMatchObject({ sts: true, sts_port: 15463 });
    expect(p.load_stats_config_json_str).toBe('{"api_type":"GRPC"}');
  });

  test("tracing: lightstep token file is returned, not written; $(HOST_IP) substitution", () => {
    const pc: ProxyConfig = {
      configPath: "./etc/istio/proxy",
      discoveryAddress: "x:1",
      tracing: { lightstep: { address: "ls:8080", accessToken: "tok" }, tlsSettings: { mode: "ISTIO_MUTUAL" } },
    };
    const r = toTemplateParams({ node: node({ proxyConfig: pc }), compliancePolicy: "", logAsJson: false, flags: DEFAULT_BOOTSTRAP_FLAGS });
    expect(r.lightstepToken).toEqual({ path: "etc/istio/proxy/lightstep_access_token.txt", token: "tok" });
    expect(r.params.lightstepToken).toBe("etc/istio/proxy/lightstep_access_token.txt");
    expect(JSON.parse(r.params.tracing_tls as string).typed_config.sni).toBe("tracer");
    const dd: ProxyConfig = { discoveryAddress: "x:1", tracing: { datadog: { address: "$(HOST_IP):8126" } } };
    const p = toTemplateParams({
      node: node({ proxyConfig: dd }),
      compliancePolicy: "",
      logAsJson: false,
      flags: { ...DEFAULT_BOOTSTRAP_FLAGS, hostIp: "10.1.1.1" },
    }).params;
    expect(p.datadog).toBe('{"address": "10.1.1.1", "port_value": 8126}');
  });

  test("service cluster naming", () => {
    expect(serviceCluster({ serviceCluster: "custom" }, { app: "a" }, "ns", "")).toBe("custom");
    expect(serviceCluster({ serviceCluster: "istio-proxy" }, { app: "a" }, "ns", "")).toBe("a.ns");
    expect(serviceCluster({}, {}, "ns", "wl")).toBe("wl.ns");
    expect(serviceCluster({}, {}, "ns", "")).toBe("istio-proxy.ns");
    expect(serviceCluster({}, {}, "", "")).toBe("istio-proxy");
    expect(serviceCluster({ tracingServiceName: "CANONICAL_NAME_AND_NAMESPACE" }, { "service.istio.io/canonical-name": "cn", app: "a" }, "ns", "")).toBe(
      "cn.ns",
    );
    expect(serviceCluster({ tracingServiceName: "CANONICAL_NAME_ONLY" }, { app: "a" }, "ns", "")).toBe("a");
  });

  test("runtime flags: defaults, FIPS, fragment stripping, overrides", () => {
    const f = runtimeFlags({ runtimeValues: { "re2.max_program_size.error_level": "", a: "true", b: "false", c: "7" } }, "fips-140-2", false);
    expect(f["re2.max_program_size.error_level"]).toBeUndefined();
    expect(f).toMatchObject({
      a: true,
      b: false,
      c: "7",
      "envoy.reloadable_features.google_grpc_disable_tls_13": true,
      "envoy.reloadable_features.http_strip_fragment_from_path_unsafe_if_disabled": "false",
    });
    expect(runtimeFlags({}, "fips-140-3", true)["envoy.reloadable_features.google_grpc_disable_tls_13"]).toBeUndefined();
  });

  test("global downstream connection limit precedence", () => {
    const rt = { runtimeValues: { "overload.global_downstream_max_connections": "5000" } };
    expect(globalDownstreamMaxConnections({})).toBe(2147483647);
    expect(globalDownstreamMaxConnections(rt)).toBe(5000);
    expect(globalDownstreamMaxConnections({ ...rt, proxyMetadata: { ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS: "20000" } })).toBe(20000);
    expect(globalDownstreamMaxConnections({ ...rt, proxyMetadata: { ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS: "x" } })).toBe(5000);
    expect(
      globalDownstreamMaxConnections({
        connectionSettings: { globalDownstreamConnectionLimit: 15000 },
        proxyMetadata: { ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS: "1" },
      }),
    ).toBe(15000);
  });
});

describe("stats options", () => {
  const base = { proxyConfig: {}, annotations: {}, instanceIps: ["10.0.0.1", "10.0.0.2"], exitOnZeroActiveConnections: false };
  test("annotation wins over proxyStatsMatcher; {pod_ip} expands; required patterns appended", () => {
    const problems: string[] = [];
    const p = statsParams(
      {
        ...base,
        proxyConfig: { proxyStatsMatcher: { inclusionPrefixes: ["pc"], inclusionSuffixes: ["sfx"] }, extraStatTags: ["a", ""] },
        annotations: { "sidecar.istio.io/statsInclusionPrefixes": "http.{pod_ip}_,x", "sidecar.istio.io/extraStatTags": "b,a" },
        exitOnZeroActiveConnections: true,
      },
      problems,
    );
    expect(p.inclusionPrefix).toEqual(["http.10.0.0.1_", "http.10.0.0.2_", "x", "cluster_manager", "listener_manager", "server", "cluster.xds-grpc", "wasm"]);
    expect(p.inclusionSuffix).toEqual(["sfx", "rbac.allowed", "rbac.denied", "shadow_allowed", "shadow_denied", "downstream_cx_active"]);
    expect(p.inclusionRegexps).toEqual(["vhost\\..*\\.route\\..*"]);
    expect(p.extraStatTags).toEqual(["a", "b"]);
    expect(problems).toEqual([]);
  });

  test("histogram buckets sorted by prefix; intervals; bad annotations reported", () => {
    const problems: string[] = [];
    const p = statsParams(
      {
        ...base,
        annotations: {
          "sidecar.istio.io/statsHistogramBuckets": '{"z":[1],"a":[0.5,10]}',
          "sidecar.istio.io/statsFlushInterval": "2500ms",
          "sidecar.istio.io/statsEvictionInterval": "10s",
        },
      },
      problems,
    );
    expect(JSON.parse(JSON.stringify((p.histogram_buckets as { json: unknown }[]).map((b) => b.json)))).toEqual([
      { match: { prefix: "a" }, buckets: [0.5, 10] },
      { match: { prefix: "z" }, buckets: [1] },
    ]);
    expect(String(p.stats_flush_interval)).toBe("2.5s");
    expect(p.stats_eviction_interval).toBe("10s");
    const bad = statsParams(
      {
        ...base,
        annotations: {
          "sidecar.istio.io/statsHistogramBuckets": "nope",
          "sidecar.istio.io/statsEvictionInterval": "7s",
          "sidecar.istio.io/statsFlushInterval": "x",
        },
      },
      problems,
    );
    expect(bad.histogram_buckets).toBeNull();
    expect(bad.stats_eviction_interval).toBeUndefined();
    expect(problems).toHaveLength(3);
  });

  test("substituteValues", () => {
    expect(substituteValues(["a{pod_ip}b{pod_ip}", "c"], "{pod_ip}", ["1", "2"])).toEqual(["a1b1", "a2b2", "c"]);
  });
});

describe("converters", () => {
  test("splitHostPort and address JSON", () => {
    expect(splitHostPort("[::1]:80")).toEqual(["::1", "80"]);
    expect(splitHostPort("h:1")).toEqual(["h", "1"]);
    expect(() => splitHostPort("host")).toThrow("missing port in address");
    expect(() => splitHostPort("a:b:c")).toThrow("too many colons");
    expect(() => addressJson("statsd", "nope", "")).toThrow(BootstrapError);
    expect(() => addressJson("statsd", "nope", "")).toThrow('unable to parse statsd address "nope"');
    expect(addressJson("zipkin", "$(HOST_IP):9411", "")).toBe('{"address": "$(HOST_IP)", "port_value": 9411}');
  });

  test("transport sockets by TLS mode", () => {
    expect(transportSocketJson({ mode: "DISABLE" }, "x", {}, true)).toBe("");
    const mutual = JSON.parse(
      transportSocketJson(
        { mode: "MUTUAL", clientCertificate: "/c", privateKey: "/k", caCertificates: "/ca", subjectAltNames: ["san"], sni: "s" },
        "x",
        { clientRootCert: "/meta-ca" },
        true,
      ),
    );
    expect(mutual.typed_config.sni).toBe("s");
    expect(mutual.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0].name).toBe("file-cert:/c~/k");
    expect(mutual.typed_config.common_tls_context.combined_validation_context.validation_context_sds_secret_config.name).toBe("file-root:/meta-ca");
    expect(mutual.typed_config.common_tls_context.combined_validation_context.default_validation_context).toEqual({
      match_subject_alt_names: [{ exact: "san" }],
    });
    const im = JSON.parse(transportSocketJson({ mode: "ISTIO_MUTUAL" }, "svc", {}, true));
    expect(im.typed_config.common_tls_context.alpn_protocols).toEqual(["istio", "h2"]);
    expect(im.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0].sds_config.initial_fetch_timeout).toBe("0s");
    expect(JSON.parse(transportSocketJson({ mode: "SIMPLE" }, "svc", {}, false)).typed_config.common_tls_context.alpn_protocols).toBeUndefined();
  });

  test("keepalive uses plain numbers (Envoy's JSON form)", () => {
    expect(keepaliveJson({ time: "1s", probes: 3, interval: "1m" })).toBe(
      '{"tcp_keepalive":{"keepalive_probes":3,"keepalive_time":1,"keepalive_interval":60}}',
    );
  });
});
