// Writing the bootstrap for `agent proxy`: template precedence, the built-in default template
// (validated strictly against Envoy's Bootstrap schema and kept as a golden file), output location
// and modes, ISTIO_BOOTSTRAP_OVERRIDE, and the proxyless gRPC bootstrap.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validateBootstrapConfig } from "@grpc/grpc-js-xds/build/src/xds-bootstrap.js";
import {
  BootstrapError,
  bootstrapOverrideToJson,
  grpcBootstrapJson,
  prepareBootstrapTemplate,
  writeBootstrap,
  writeGrpcBootstrap,
} from "../../src/bootstrap/index.ts";
import { buildNode } from "../../src/config/metadata.ts";
import { EnvoySchema } from "./envoy_schema.ts";
import { baseNodeInputs, typicalAgentConfig } from "./fixtures.ts";
import { expectGolden } from "../support/golden.ts";

let tmp: string;
let schema: EnvoySchema;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "bootstrap-write-"));
  schema = new EnvoySchema();
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const fresh = (name: string) => {
  const d = join(tmp, name);
  mkdirSync(d, { recursive: true });
  return d;
};

describe("built-in default template", () => {
  test("renders a typical pod's bootstrap that Envoy's schema accepts, equal to the golden file", async () => {
    const root = fresh("default");
    const r = await writeBootstrap(typicalAgentConfig(root));
    expect(r.custom).toBe(false);
    expect(r.path).toBe(join(root, "etc/istio/proxy/envoy-rev.json"));
    expect(statSync(join(root, "etc/istio/proxy")).mode & 0o777).toBe(0o700);
    const text = readFileSync(r.path, "utf8");
    const json = JSON.parse(text);
    expect(schema.validateBootstrap(json)).toEqual([]);
    expect(json.static_resources.listeners.map((l: { name: string }) => l.name)).toEqual(["0.0.0.0_15090", "0.0.0.0_15021"]);
    expect(json.static_resources.clusters.map((c: { name: string }) => c.name)).toEqual(["prometheus_stats", "agent", "sds-grpc", "xds-grpc"]);
    expect(json.node.cluster).toBe("reviews.bookinfo");
    const golden = join(import.meta.dir, "golden/default_bootstrap.json");
    expectGolden(golden, text);
  });

  test("every optional section of the default template still validates", async () => {
    const root = fresh("default-all");
    const cfg = typicalAgentConfig(root, {
      ISTIO_META_ENABLE_HBONE: "true",
      ISTIO_DUAL_STACK: "true",
      ISTIO_META_LOAD_STATS_CONFIG_JSON: '{"api_type":"GRPC","grpc_services":[{"envoy_grpc":{"cluster_name":"xds-grpc"}}]}',
    });
    cfg.node.ips = ["10.44.0.17", "fd00::17"];
    cfg.annotations["sidecar.istio.io/statsHistogramBuckets"] = '{"cluster_manager":[1,5,10]}';
    cfg.annotations["sidecar.istio.io/statsFlushInterval"] = "10s";
    cfg.annotations["sidecar.istio.io/statsEvictionInterval"] = "20s";
    cfg.annotations["sidecar.istio.io/extraStatTags"] = "my_tag";
    cfg.proxyConfig = {
      ...cfg.proxyConfig,
      statsdUdpAddress: "10.0.0.9:9125",
      tracing: { zipkin: { address: "zipkin:9411" }, tlsSettings: { mode: "ISTIO_MUTUAL" } },
    };
    cfg.flags.outlierLogPath = "/dev/stdout";
    const r = await writeBootstrap(cfg, { customCredentialsFileExists: true, logAsJson: true });
    const json = JSON.parse(readFileSync(r.path, "utf8"));
    expect(schema.validateBootstrap(json)).toEqual([]);
    expect(json.bootstrap_extensions[0].name).toBe("metadata_discovery");
    expect(json.static_resources.listeners[1].additional_addresses[0].address.socket_address.address).toBe("::");
    expect(json.stats_config.histogram_bucket_settings).toEqual([{ match: { prefix: "cluster_manager" }, buckets: [1, 5, 10] }]);
    expect(json.application_log_config.log_format.json_format).toBeDefined();
    expect(json.static_resources.clusters.some((c: { name: string }) => c.name === "sds-files-grpc")).toBe(true);
  });
});

describe("template selection and output", () => {
  test("ISTIO_BOOTSTRAP > proxyBootstrapTemplatePath > image default; .yaml templates give envoy-rev.yaml", async () => {
    const root = fresh("precedence");
    mkdirSync(join(root, "var/lib/istio/envoy"), { recursive: true });
    writeFileSync(join(root, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), '{"from":"image","node":"{{ .nodeID }}"}');
    writeFileSync(join(root, "tmpl.yaml"), "from: templateFile\n");
    writeFileSync(join(root, "override.json"), '{"from":"ISTIO_BOOTSTRAP"}');
    const cfg = typicalAgentConfig(root);
    let r = await writeBootstrap(cfg);
    expect(JSON.parse(readFileSync(r.path, "utf8")).from).toBe("image");
    cfg.proxyConfig = { ...cfg.proxyConfig, proxyBootstrapTemplatePath: "tmpl.yaml" };
    r = await writeBootstrap(cfg);
    expect(r.path).toBe(join(root, "etc/istio/proxy/envoy-rev.yaml"));
    expect(readFileSync(r.path, "utf8")).toBe("from: templateFile\n");
    const withEnv = typicalAgentConfig(root, { ISTIO_BOOTSTRAP: "override.json" });
    withEnv.proxyConfig = cfg.proxyConfig;
    r = await writeBootstrap(withEnv);
    expect(JSON.parse(readFileSync(r.path, "utf8")).from).toBe("ISTIO_BOOTSTRAP");
  });

  test("customConfigFile is handed to Envoy as is", async () => {
    const root = fresh("custom");
    const cfg = typicalAgentConfig(root);
    cfg.proxyConfig = { ...cfg.proxyConfig, customConfigFile: "/etc/envoy/custom.yaml" };
    const r = await writeBootstrap(cfg);
    expect(r).toMatchObject({ path: "/etc/envoy/custom.yaml", custom: true });
    expect(existsSync(join(root, "etc/istio/proxy/envoy-rev.json"))).toBe(false);
  });

  test("lightstep tracing writes the token file next to the bootstrap", async () => {
    const root = fresh("lightstep");
    writeFileSync(join(root, "t.json"), '{"token":"{{ .lightstepToken }}"}');
    const cfg = typicalAgentConfig(root, { ISTIO_BOOTSTRAP: "t.json" });
    cfg.proxyConfig = { ...cfg.proxyConfig, tracing: { lightstep: { address: "ls:8080", accessToken: "secret-token" } } };
    const r = await writeBootstrap(cfg);
    expect(JSON.parse(readFileSync(r.path, "utf8")).token).toBe("etc/istio/proxy/lightstep_access_token.txt");
    expect(readFileSync(join(root, "etc/istio/proxy/lightstep_access_token.txt"), "utf8")).toBe("secret-token");
  });

  test("template errors name the template file, line and column", async () => {
    const root = fresh("broken");
    writeFileSync(join(root, "bad.json"), '{\n  "a": "{{ .nodeID }",\n}');
    const cfg = typicalAgentConfig(root, { ISTIO_BOOTSTRAP: "bad.json" });
    const err = await writeBootstrap(cfg).catch((e) => e);
    expect(err).toBeInstanceOf(BootstrapError);
    expect(err.message).toContain("bad.json:2:");
    expect(err.input).toBe("bad.json");
    const missing = await writeBootstrap(typicalAgentConfig(root, { ISTIO_BOOTSTRAP: "nope.json" })).catch((e) => e);
    expect(missing.message).toContain("cannot read bootstrap template nope.json");
  });

  // The agent reads and parses the template while its sockets come up (src/agent.ts), then renders
  // and writes once they listen: the write uses the template as it was read then.
  test("a template prepared ahead is the one rendered; its errors surface from writeBootstrap", async () => {
    const root = fresh("prepared");
    writeFileSync(join(root, "t.json"), '{"id":"{{ .nodeID }}","v":1}');
    const cfg = typicalAgentConfig(root, { ISTIO_BOOTSTRAP: "t.json" });
    const template = prepareBootstrapTemplate(cfg);
    expect(template).toBeDefined();
    await template;
    writeFileSync(join(root, "t.json"), '{"id":"{{ .nodeID }}","v":2}');
    const r = await writeBootstrap(cfg, { template: template! });
    expect(JSON.parse(readFileSync(r.path, "utf8"))).toEqual({ id: cfg.node.nodeId, v: 1 });

    const bad = typicalAgentConfig(root, { ISTIO_BOOTSTRAP: "nope.json" });
    const err = await writeBootstrap(bad, { template: prepareBootstrapTemplate(bad)! }).catch((e) => e);
    expect(err).toBeInstanceOf(BootstrapError);
    expect(err.message).toContain("cannot read bootstrap template nope.json");

    const custom = typicalAgentConfig(root, {});
    custom.proxyConfig = { ...custom.proxyConfig, customConfigFile: "/etc/envoy/custom.yaml" };
    expect(prepareBootstrapTemplate(custom)).toBeUndefined();
  });
});

describe("ISTIO_BOOTSTRAP_OVERRIDE", () => {
  test("YAML to compact JSON with sorted keys and $(HOST_IP) substituted", () => {
    const yaml = "tracing:\n  http:\n    name: dd\n    address: $(HOST_IP):8126\nb: 1\na: [true]\n";
    expect(bootstrapOverrideToJson(yaml, "10.0.0.5")).toBe('{"a":[true],"b":1,"tracing":{"http":{"address":"10.0.0.5:8126","name":"dd"}}}');
    expect(bootstrapOverrideToJson('{"x": "[$(HOST_IP)]:1", "y": "$(HOST_IP)"}', "fd00::1")).toBe('{"x":"[fd00::1]:1","y":"[fd00::1]"}');
    expect(() => bootstrapOverrideToJson("a: [", "", "/f.yaml")).toThrow("/f.yaml");
  });

  test("read by writeBootstrap; an unreadable file is a problem, not a failure", async () => {
    const root = fresh("override");
    writeFileSync(join(root, "custom_bootstrap.json"), '{"layered_runtime": {"layers": []}}');
    const ok = await writeBootstrap(typicalAgentConfig(root, { ISTIO_BOOTSTRAP_OVERRIDE: "custom_bootstrap.json" }));
    expect(ok.configYaml).toBe('{"layered_runtime":{"layers":[]}}');
    const bad = await writeBootstrap(typicalAgentConfig(root, { ISTIO_BOOTSTRAP_OVERRIDE: "missing.yaml" }));
    expect(bad.configYaml).toBeUndefined();
    expect(bad.problems.join()).toContain("missing.yaml");
  });
});

describe("gRPC proxyless bootstrap", () => {
  test("written atomically with 0644, accepted by @grpc/grpc-js-xds's bootstrap loader", async () => {
    const root = fresh("grpc");
    const cfg = typicalAgentConfig(root, { OUTPUT_CERTS: "/etc/certs" });
    const path = await writeGrpcBootstrap(cfg);
    expect(path).toBe(join(root, "etc/istio/proxy/grpc-bootstrap.json"));
    expect(statSync(path).mode & 0o777).toBe(0o644);
    const json = JSON.parse(readFileSync(path, "utf8"));
    const info = validateBootstrapConfig(json);
    expect(info.xdsServers[0]!.server_uri).toBe(`unix://${root}/etc/istio/proxy/XDS`);
    expect(info.node.id).toBe(cfg.node.nodeId);
    expect(info.serverListenerResourceNameTemplate).toBe("xds.istio.io/grpc/lds/inbound/%s");
    expect(info.certificateProviders.default!.pluginName).toBe("file_watcher");
    expect(json.node.metadata.GENERATOR).toBe("grpc");
    expect(json.node.metadata.PROXY_CONFIG.discoveryAddress).toBe("istiod.istio-system.svc:15012");
    expect(json.certificate_providers.default).toEqual({
      plugin_name: "file_watcher",
      config: {
        certificate_file: "/etc/certs/cert-chain.pem",
        private_key_file: "/etc/certs/key.pem",
        ca_certificate_file: "/etc/certs/root-cert.pem",
        refresh_interval: "900s",
      },
    });
    expect(json.server_listener_resource_name_template).toBe("xds.istio.io/grpc/lds/inbound/%s");
  });

  test("Istio's layout: typed metadata only, UserAgentVersionType null, no providers without OUTPUT_CERTS", () => {
    const node = buildNode(
      baseNodeInputs({
        id: "sidecar~127.0.0.1~pod1.fake-namespace~fake-namespace.svc.cluster.local",
        envs: ["ISTIO_META_UNTYPED=x"],
        instanceIps: ["127.0.0.1"],
        pilotSubjectAltName: ["istiod.istio-system.svc"],
        envoyStatusPort: 0,
        envoyPrometheusPort: 0,
        istioVersion: "version",
      }),
    );
    const text = grpcBootstrapJson({ node, xdsUdsPath: "etc/istio/XDS", discoveryAddress: "", certDir: "" });
    const json = JSON.parse(text);
    delete json.node.metadata.PROXY_CONFIG;
    expect(json).toEqual({
      xds_servers: [{ server_uri: "unix:///etc/istio/XDS", channel_creds: [{ type: "insecure" }], server_features: ["xds_v3"] }],
      node: {
        id: "sidecar~127.0.0.1~pod1.fake-namespace~fake-namespace.svc.cluster.local",
        metadata: {
          GENERATOR: "grpc",
          INSTANCE_IPS: "127.0.0.1",
          ISTIO_VERSION: "version",
          METADATA_DISCOVERY: "false",
          PILOT_SAN: ["istiod.istio-system.svc"],
          WORKLOAD_IDENTITY_SOCKET_FILE: "socket",
        },
        locality: {},
        UserAgentVersionType: null,
      },
      server_listener_resource_name_template: "xds.istio.io/grpc/lds/inbound/%s",
    });
    expect(text).toStartWith('{\n  "xds_servers": [\n    {\n      "server_uri": "unix:///etc/istio/XDS",');
  });
});
