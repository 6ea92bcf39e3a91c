// Node metadata assembly (Istio's GetNodeMetaData) and the downward-API file parser.

import { describe, expect, test } from "bun:test";
import { buildNode, buildNodeMetadata, pilotSanFor, type NodeMetadataInputs } from "../../src/config/metadata.ts";
import { baseNodeInputs } from "./fixtures.ts";
import { DownwardApiError, formatDownwardApi, parseDownwardApi } from "../../src/config/downward.ts";

function inputs(over: Partial<NodeMetadataInputs> = {}): NodeMetadataInputs {
  return baseNodeInputs({
    proxyConfig: { discoveryAddress: "istiod:15012" },
    instanceIps: ["10.0.0.1", "10.0.0.2", "10.0.0.1"],
    pilotSubjectAltName: ["istiod.istio-system.svc"],
    envoySkipDeprecatedLogs: true,
    istioVersion: "1.2.3",
    ...over,
  });
}

describe("buildNodeMetadata", () => {
  test("typed fields from the inputs, StringBool encoding, deduplicated IPs", () => {
    const md = buildNodeMetadata(inputs({ exitOnZeroActiveConnections: true, stsPort: 15463, envoySecureMetricsPort: 15091 }));
    expect(md).toEqual({
      ENVOY_PROMETHEUS_PORT: 15090,
      ENVOY_SECURE_METRICS_PORT: 15091,
      ENVOY_SKIP_DEPRECATED_LOGS: "true",
      ENVOY_STATUS_PORT: 15021,
      EXIT_ON_ZERO_ACTIVE_CONNECTIONS: "true",
      INSTANCE_IPS: "10.0.0.1,10.0.0.2",
      ISTIO_VERSION: "1.2.3",
      METADATA_DISCOVERY: "false",
      PILOT_SAN: ["istiod.istio-system.svc"],
      PROXY_CONFIG: { discoveryAddress: "istiod:15012" },
      STS_PORT: "15463",
      WORKLOAD_IDENTITY_SOCKET_FILE: "socket",
    });
  });

  test("PROXY_CONFIG as protobuf JSON: scalar fields set to their zero are left out, wrappers kept (found by the injection differential)", () => {
    const md = buildNodeMetadata(
      inputs({
        proxyConfig: {
          interceptionMode: "REDIRECT",
          controlPlaneAuthPolicy: "NONE",
          statNameLength: 0,
          meshId: "",
          concurrency: 0,
          holdApplicationUntilProxyStarts: false,
          serviceCluster: "istio-proxy",
        },
      }),
    );
    expect(md.PROXY_CONFIG).toEqual({ concurrency: 0, holdApplicationUntilProxyStarts: false, serviceCluster: "istio-proxy" });
    expect(buildNodeMetadata(inputs({ proxyConfig: { interceptionMode: "TPROXY", controlPlaneAuthPolicy: "MUTUAL_TLS" } })).PROXY_CONFIG).toEqual({
      interceptionMode: "TPROXY",
      controlPlaneAuthPolicy: "MUTUAL_TLS",
    });
  });

  test("ISTIO_META_* over proxyMetadata, ISTIO_METAJSON_* merged at top level, raw keys kept", () => {
    const md = buildNodeMetadata(
      inputs({
        proxyConfig: { proxyMetadata: { ISTIO_META_NETWORK: "from-pc", ISTIO_META_FOO: "pc", OTHER: "ignored" } },
        envs: ["ISTIO_META_NETWORK=net1", "ISTIO_META_DNS_CAPTURE=1", "ISTIO_META_ENABLE_HBONE=false", 'ISTIO_METAJSON_X={"k":"v","n":2}', "PATH=/bin"],
        dnsProxyAddr: "localhost:15053",
      }),
    );
    expect(md.NETWORK).toBe("net1");
    expect(md.FOO).toBe("pc");
    expect(md.OTHER).toBeUndefined();
    expect(md.DNS_CAPTURE).toBe("true"); // "1" parsed as a Go bool, re-encoded
    expect(md.ENABLE_HBONE).toBe("false"); // typed false is omitted; the raw string stays
    expect(md.k).toBe("v");
    expect(md.n).toBe(2);
    expect(md.DNS_PROXY_ADDR).toBe("localhost:15053");
    expect(md.PATH).toBeUndefined();
  });

  test("ENABLE_HBONE turns metadata discovery on unless PEER_METADATA_DISCOVERY says otherwise", () => {
    expect(buildNodeMetadata(inputs({ envs: ["ISTIO_META_ENABLE_HBONE=true"] })).METADATA_DISCOVERY).toBe("true");
    expect(buildNodeMetadata(inputs({ envs: ["ISTIO_META_ENABLE_HBONE=true"], metadataDiscovery: false })).METADATA_DISCOVERY).toBe("false");
    expect(buildNodeMetadata(inputs({ metadataDiscovery: true })).METADATA_DISCOVERY).toBe("true");
  });

  test("labels: ISTIO_METAJSON_LABELS, pod labels file without pod-template-hash, locality label rewritten", () => {
    const node = buildNode(
      inputs({
        envs: ['ISTIO_METAJSON_LABELS={"app":"a","istio-locality":"r.z.s"}', "POD_NAME=p", "POD_NAMESPACE=ns", "SERVICE_ACCOUNT=sa"],
      }),
    );
    expect(node.locality).toEqual({ region: "r", zone: "z", subZone: "s" });
    const md = buildNodeMetadata(
      inputs({ envs: ['ISTIO_METAJSON_LABELS={"app":"a","istio-locality":"r.z.s"}', "POD_NAME=p", "POD_NAMESPACE=ns", "SERVICE_ACCOUNT=sa"] }),
    );
    // LABELS and STATIC_LABELS are one map in Istio, so both see the rewrite.
    expect(md.LABELS).toEqual({ app: "a", "istio-locality": "r/z/s" });
    expect(md.STATIC_LABELS).toEqual({ app: "a", "istio-locality": "r/z/s" });
    expect(md["istio-locality"]).toBe("r.z.s");
    expect([md.NAME, md.NAMESPACE, md.SERVICE_ACCOUNT]).toEqual(["p", "ns", "sa"]);

    const withFile = buildNodeMetadata(
      inputs({ envs: ['ISTIO_METAJSON_LABELS={"app":"a"}'], podLabels: { version: "v1", "pod-template-hash": "x", "topology.istio.io/locality": "r1/z1" } }),
    );
    expect(withFile.LABELS).toEqual({ app: "a", version: "v1", "topology.istio.io/locality": "r1/z1", "istio-locality": "r1/z1" });
    expect(withFile.STATIC_LABELS).toEqual({ app: "a" });
  });

  test("platform locality when no label; annotations file; credential flags", () => {
    const node = buildNode(
      inputs({
        platform: { isKubernetes: false, locality: { region: "us", zone: "us-1", subZone: "" }, labels: { vm: "yes" }, metadata: { gcp_project: "p" } },
        podAnnotations: { "a/b": "c" },
        credentialSocketExists: true,
        customCredentialsFileExists: true,
      }),
    );
    expect(node.locality).toEqual({ region: "us", zone: "us-1", subZone: "" });
    const md = buildNodeMetadata(
      inputs({
        platform: { isKubernetes: false, labels: { vm: "yes" }, metadata: { gcp_project: "p" } },
        podAnnotations: { "a/b": "c" },
        credentialSocketExists: true,
      }),
    );
    expect(md.STATIC_LABELS).toEqual({ vm: "yes" });
    expect(md.PLATFORM_METADATA).toEqual({ gcp_project: "p" });
    expect(md.ANNOTATIONS).toEqual({ "a/b": "c" });
    expect(md.credential).toBe("true");
    expect(node.raw["file-credential"]).toBe("true");
  });

  test("values that do not fit a typed field are reported and kept as given", () => {
    const node = buildNode(inputs({ envs: ["ISTIO_META_DNS_CAPTURE=yes", "ISTIO_METAJSON_BAD=[1]", "ISTIO_META_POD_PORTS=notjson"] }));
    expect(node.problems.join("\n")).toContain("DNS_CAPTURE");
    expect(node.problems.join("\n")).toContain("ISTIO_METAJSON_BAD");
    expect(node.problems.join("\n")).toContain("POD_PORTS");
    const md = buildNodeMetadata(inputs({ envs: ["ISTIO_META_DNS_CAPTURE=yes"] }));
    expect(md.DNS_CAPTURE).toBe("yes");
  });

  test("POD_PORTS is re-encoded as Istio's typed list", () => {
    const md = buildNodeMetadata(inputs({ envs: ['ISTIO_META_POD_PORTS=[{"protocol":"TCP","containerPort":80,"name":"http"}]'] }));
    expect(md.POD_PORTS).toBe('[{"name":"http","containerPort":80,"protocol":"TCP"}]');
  });

  test('POD_PORTS metadata carries "protocol":"" when absent (and drops an empty name), as Go\'s PodPort', () => {
    const md = buildNodeMetadata(inputs({ envs: ['ISTIO_META_POD_PORTS=[{"containerPort":8080},{"name":"","containerPort":9090,"protocol":"UDP"}]'] }));
    expect(md.POD_PORTS).toBe('[{"containerPort":8080,"protocol":""},{"containerPort":9090,"protocol":"UDP"}]');
  });

  test("pilot SAN is the discovery host, localhost meaning istiod", () => {
    expect(pilotSanFor("istiod-rev.istio-system.svc:15012")).toBe("istiod-rev.istio-system.svc");
    expect(pilotSanFor("localhost:15012")).toBe("istiod.istio-system.svc");
  });
});

describe("downward API files", () => {
  test('key="Go-quoted" lines, lines without = skipped', () => {
    const text = 'app="reviews"\nistio.io/x="{\\"paths\\":[\\"/m\\"]}"\n\nnote="tab\\tand \\u00e9"\ngarbage\n';
    expect(parseDownwardApi(text)).toEqual({ app: "reviews", "istio.io/x": '{"paths":["/m"]}', note: "tab\tand é" });
  });

  test("a bad quoted value names the file and line", () => {
    expect(() => parseDownwardApi('a="ok"\nb=unquoted\n', "./etc/istio/pod/labels")).toThrow(DownwardApiError);
    expect(() => parseDownwardApi('a="ok"\nb=unquoted\n', "./etc/istio/pod/labels")).toThrow("./etc/istio/pod/labels:2");
  });

  test("format and parse round-trip", () => {
    const v = { z: "1", a: 'q"uote\n', u: "ünï" };
    expect(formatDownwardApi(v)).toBe('a="q\\"uote\\n"\nu="ünï"\nz="1"\n');
    expect(parseDownwardApi(formatDownwardApi(v))).toEqual(v);
  });
});
