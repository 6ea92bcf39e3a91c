import { describe, expect, test } from "bun:test";
import { ConfigError, loadAgentConfig } from "../../src/config/load.ts";
import { annotationsFile, inputs } from "./support.ts";

const MESH = "./etc/istio/config/mesh";
const ANNOS = "./etc/istio/pod/annotations";

describe("ProxyConfig layering: defaults < mesh file < PROXY_CONFIG < annotation", () => {
  test("Istio's defaults when nothing is given", () => {
    const { config } = loadAgentConfig(inputs());
    expect(config.proxyConfig).toMatchObject({
      configPath: "./etc/istio/proxy",
      binaryPath: "/usr/local/bin/envoy",
      serviceCluster: "istio-proxy",
      drainDuration: "45s",
      terminationDrainDuration: "5s",
      proxyAdminPort: 15000,
      controlPlaneAuthPolicy: "MUTUAL_TLS",
      discoveryAddress: "istiod.istio-system.svc:15012",
      statNameLength: 189,
      statusPort: 15020,
    });
    // Istio's mesh.DefaultProxyConfig() has no tracing: no tracer unless one is configured.
    expect(Object.keys(config.proxyConfig)).not.toContain("tracing");
    expect(config.proxyConfigSources.drainDuration).toBe("default");
  });

  test.each([
    ["file only", { mesh: "discoveryAddress: file:1" }, "file:1", "mesh config ./etc/istio/config/mesh"],
    ["file < env", { mesh: "discoveryAddress: file:1", env: "discoveryAddress: env:1" }, "env:1", "PROXY_CONFIG"],
    [
      "env < annotation",
      { mesh: "discoveryAddress: file:1", env: "discoveryAddress: env:1", anno: "discoveryAddress: anno:1" },
      "anno:1",
      "annotation proxy.istio.io/config",
    ],
    ["file < annotation", { mesh: "discoveryAddress: file:1", anno: "discoveryAddress: anno:1" }, "anno:1", "annotation proxy.istio.io/config"],
  ])("%s", (_name, layers: { mesh?: string; env?: string; anno?: string }, want, source) => {
    const files: Record<string, string> = {};
    if (layers.mesh) files[MESH] = `defaultConfig:\n  ${layers.mesh}\n`;
    if (layers.anno) files[ANNOS] = annotationsFile({ "proxy.istio.io/config": layers.anno });
    const { config } = loadAgentConfig(inputs({ files, env: layers.env ? { PROXY_CONFIG: layers.env } : {} }));
    expect(config.proxyConfig.discoveryAddress).toBe(want);
    expect(config.proxyConfigSources.discoveryAddress).toBe(source);
  });

  test("proxyMetadata maps merge across layers; other fields are replaced", () => {
    const files = {
      [MESH]: "defaultConfig:\n  proxyMetadata:\n    A: file\n    B: file\n  extraStatTags: [x, y]\n",
      [ANNOS]: annotationsFile({ "proxy.istio.io/config": "proxyMetadata:\n  C: anno\n  A: anno\n" }),
    };
    const { config } = loadAgentConfig(inputs({ files, env: { PROXY_CONFIG: '{"proxyMetadata":{"B":"env"},"extraStatTags":["z"]}' } }));
    expect(config.proxyConfig.proxyMetadata).toEqual({ A: "anno", B: "env", C: "anno" });
    expect(config.proxyConfig.extraStatTags).toEqual(["z"]);
  });

  test("snake_case names are accepted and metadata keys kept verbatim", () => {
    const { config } = loadAgentConfig(inputs({ env: { PROXY_CONFIG: "drain_duration: 10s\nproxy_metadata:\n  ISTIO_META_x_y: v\n" } }));
    expect(config.proxyConfig.drainDuration).toBe("10s");
    expect(config.proxyConfig.proxyMetadata).toEqual({ ISTIO_META_x_y: "v" });
  });

  test("Go-style durations are normalised to protobuf JSON", () => {
    const { config } = loadAgentConfig(inputs({ env: { PROXY_CONFIG: "drainDuration: 1m0s\nterminationDrainDuration: 1.5s" } }));
    expect(config.proxyConfig.drainDuration).toBe("60s");
    expect(config.proxyConfig.terminationDrainDuration).toBe("1.500s");
  });

  test("only the mesh file's defaultConfig is used", () => {
    const { config } = loadAgentConfig(
      inputs({ files: { [MESH]: "enableTracing: true\naccessLogFile: /dev/stdout\ndefaultConfig:\n  statNameLength: 10\n" } }),
    );
    expect(config.proxyConfig.statNameLength).toBe(10);
    expect(config.proxyConfig).not.toHaveProperty("accessLogFile");
  });

  test("unknown fields are ignored with a warning naming the layer", () => {
    const { config, warnings } = loadAgentConfig(inputs({ env: { PROXY_CONFIG: "noSuchField: 1" } }));
    expect(config.proxyConfig).not.toHaveProperty("noSuchField");
    expect(warnings).toContain("PROXY_CONFIG: noSuchField: unknown ProxyConfig field, ignored");
  });

  test("a missing mesh file is fine; an unreadable one is an error", () => {
    expect(() => loadAgentConfig(inputs())).not.toThrow();
    expect(() => loadAgentConfig(inputs({ unreadable: [MESH] }))).toThrow(/mesh config file \.\/etc\/istio\/config\/mesh: cannot be read: EACCES/);
  });

  test("a malformed mesh file is an error naming the file", () => {
    expect(() => loadAgentConfig(inputs({ files: { [MESH]: "defaultConfig: [\n" } }))).toThrow(/^mesh config \.\/etc\/istio\/config\/mesh: malformed YAML/);
    expect(() => loadAgentConfig(inputs({ files: { [MESH]: "defaultConfig: 3\n" } }))).toThrow(/defaultConfig must be a mapping/);
  });

  test("malformed PROXY_CONFIG names PROXY_CONFIG", () => {
    expect(() => loadAgentConfig(inputs({ env: { PROXY_CONFIG: "{bad" } }))).toThrow(/^PROXY_CONFIG: malformed YAML\/JSON/);
    expect(() => loadAgentConfig(inputs({ env: { PROXY_CONFIG: "- a\n- b" } }))).toThrow(/PROXY_CONFIG: expected a ProxyConfig mapping, got a list/);
  });
});

describe("after layering", () => {
  test("ISTIO_GPRC_MAXSTREAMS above the per-connection stream limit is a warning when set, not when defaulted", () => {
    const msg =
      "ISTIO_GPRC_MAXSTREAMS=5000: the agent's gRPC servers allow at most 1000 streams per connection (an HTTP/2 flood limit, docs/xds.md); 1000 applies";
    expect(loadAgentConfig(inputs({ env: { ISTIO_GPRC_MAXSTREAMS: "5000" } })).warnings).toContain(msg);
    expect(loadAgentConfig(inputs({ env: { ISTIO_GPRC_MAXSTREAMS: "1000" } })).warnings.filter((w) => w.startsWith("ISTIO_GPRC_MAXSTREAMS"))).toEqual([]);
    expect(loadAgentConfig(inputs({ env: {} })).warnings.filter((w) => w.startsWith("ISTIO_GPRC_MAXSTREAMS"))).toEqual([]);
  });

  test("ISTIO_CPU_LIMIT sets concurrency when unset; an explicit value wins; --concurrency wins over all", () => {
    expect(loadAgentConfig(inputs({ env: { ISTIO_CPU_LIMIT: "3" } })).config.proxyConfig.concurrency).toBe(3);
    expect(loadAgentConfig(inputs({ env: { ISTIO_CPU_LIMIT: "3", PROXY_CONFIG: "concurrency: 2" } })).config.proxyConfig.concurrency).toBe(2);
    const r = loadAgentConfig(inputs({ env: { ISTIO_CPU_LIMIT: "3", PROXY_CONFIG: "concurrency: 2" }, flags: { concurrency: 5 } }));
    expect(r.config.proxyConfig.concurrency).toBe(5);
    expect(r.warnings.some((w) => w.includes("legacy --concurrency=5"))).toBe(true);
  });

  test("--serviceCluster fills an empty serviceCluster", () => {
    const { config } = loadAgentConfig(inputs({ env: { PROXY_CONFIG: 'serviceCluster: ""' }, flags: { serviceCluster: "mine" } }));
    expect(config.proxyConfig.serviceCluster).toBe("mine");
  });

  test("--templateFile applies only without customConfigFile", () => {
    expect(loadAgentConfig(inputs({ flags: { templateFile: "/t.json" } })).config.proxyConfig.proxyBootstrapTemplatePath).toBe("/t.json");
    const c = loadAgentConfig(inputs({ flags: { templateFile: "/t.json" }, env: { PROXY_CONFIG: "customConfigFile: /c.json" } })).config;
    expect(c.proxyConfig.proxyBootstrapTemplatePath).toBeUndefined();
  });

  test("discoveryAddress and status port annotations override after validation", () => {
    const files = { [ANNOS]: annotationsFile({ "sidecar.istio.io/discoveryAddress": "other:15012", "status.sidecar.istio.io/port": "15999" }) };
    const { config } = loadAgentConfig(inputs({ files }));
    expect(config.proxyConfig.discoveryAddress).toBe("other:15012");
    expect(config.proxyConfig.statusPort).toBe(15999);
  });

  test("a bad discoveryAddress annotation is refused naming the annotation", () => {
    for (const bad of ["not an address", "istiod", "istiod:99999", "ist iod:15012"]) {
      const files = { [ANNOS]: annotationsFile({ "sidecar.istio.io/discoveryAddress": bad }) };
      expect(() => loadAgentConfig(inputs({ files }))).toThrow(`annotation sidecar.istio.io/discoveryAddress=${JSON.stringify(bad)}`);
    }
  });

  test("a non-integer status port annotation disables the status server with a warning", () => {
    const files = { [ANNOS]: annotationsFile({ "status.sidecar.istio.io/port": "abc" }) };
    const r = loadAgentConfig(inputs({ files }));
    expect(r.config.proxyConfig.statusPort ?? 0).toBe(0); // 0 = off; protobuf JSON leaves zero out
    expect(r.warnings.some((w) => w.startsWith("Invalid annotation status.sidecar.istio.io/port=abc"))).toBe(true);
  });

  test("bad env values are reported by name and fall back to the default", () => {
    const r = loadAgentConfig(inputs({ env: { ISTIO_META_DNS_CAPTURE: "yes", ISTIO_CPU_LIMIT: "two", DNS_FORWARD_TIMEOUT: "5" } }));
    expect(r.config.env.ISTIO_META_DNS_CAPTURE).toBe(false);
    expect(r.config.env.ISTIO_CPU_LIMIT).toBe(0);
    expect(r.config.env.DNS_FORWARD_TIMEOUT).toBe(5000);
    expect(r.warnings.filter((w) => w.startsWith("Invalid environment variable value")).length).toBe(3);
    expect(r.warnings.join("\n")).toContain('ISTIO_META_DNS_CAPTURE="yes"');
  });

  test("unknown proxy type", () => {
    expect(() => loadAgentConfig(inputs({ type: "gateway" }))).toThrow(ConfigError);
  });
});

describe("node identity", () => {
  test("node ID is type~ip~pod.ns~domain with the default domain", () => {
    const { config } = loadAgentConfig(inputs({ env: { POD_NAME: "app-1", POD_NAMESPACE: "ns", INSTANCE_IP: "10.9.9.9" } }));
    expect(config.node.nodeId).toBe("sidecar~10.9.9.9~app-1.ns~ns.svc.cluster.local");
    expect(config.node.ips).toEqual(["10.9.9.9", "10.1.2.3"]);
    expect(config.node.ipMode).toBe("ipv4");
  });

  test("--domain and router type", () => {
    const { config } = loadAgentConfig(
      inputs({ type: "router", env: { POD_NAME: "gw", POD_NAMESPACE: "istio-system" }, flags: { domain: "istio-system.svc.example.org" } }),
    );
    expect(config.node.nodeId).toBe("router~10.1.2.3~gw.istio-system~istio-system.svc.example.org");
  });

  test("excluded interfaces are dropped via annotation", () => {
    const files = { [ANNOS]: annotationsFile({ "traffic.sidecar.istio.io/excludeInterfaces": "eth0" }) };
    const { config } = loadAgentConfig(inputs({ files }));
    expect(config.node.ips).toEqual(["127.0.0.1", "::1"]);
    expect(config.node.ipMode).toBe("dual");
  });
});

describe("GODEBUG=fips140=only", () => {
  test("GODEBUG=fips140=only is treated as COMPLIANCE_POLICY=fips-140-3", () => {
    const { config, notes } = loadAgentConfig(inputs({ env: { GODEBUG: "http2client=0,fips140=only" } }));
    expect(config.env.COMPLIANCE_POLICY).toBe("fips-140-3");
    expect(notes).toContain("GODEBUG=http2client=0,fips140=only: COMPLIANCE_POLICY=fips-140-3 applies");
  });

  test("an explicit COMPLIANCE_POLICY wins; other GODEBUG settings imply nothing", () => {
    expect(loadAgentConfig(inputs({ env: { GODEBUG: "fips140=only", COMPLIANCE_POLICY: "fips-140-2" } })).config.env.COMPLIANCE_POLICY).toBe("fips-140-2");
    expect(loadAgentConfig(inputs({ env: { GODEBUG: "fips140=on" } })).config.env.COMPLIANCE_POLICY).toBe("");
  });
});
