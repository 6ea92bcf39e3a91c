// The generated corpus of pod environments for the bootstrap differential: the env Istio's
// injector (or a VM's sidecar.env) gives the agent, varied over ProxyConfig fields, annotations,
// labels, ISTIO_META_* / ISTIO_METAJSON_*, ports, tracing, stats, dual stack, proxyless and the
// router role. Ports the agent binds are placeholders (<STATUS>, <ADMIN>, <DNS>) the runner
// fills with free ports, the same for both agents.

import type { Rng } from "./seeded.ts";

export interface PodCase {
  /** `proxy sidecar` or `proxy router`. */
  args: string[];
  env: Record<string, string>;
  /** Files in the pod's root (e.g. the downward-API annotations file). */
  files: Record<string, string>;
  /** DISABLE_ENVOY: only the gRPC bootstrap is compared. */
  proxyless: boolean;
}

const TRACING = [
  undefined,
  { zipkin: { address: "zipkin.obs:9411" } },
  { zipkin: { address: "zipkin.obs:9411" }, sampling: 12.5, maxPathTagLength: 99 },
  { datadog: { address: "$(HOST_IP):8126" } },
  { lightstep: { address: "ls.obs:8080", accessToken: "not-a-secret-token" } },
  { openCensusAgent: { address: "oc.obs:55678", context: ["W3C_TRACE_CONTEXT"] } },
];
const STATS = [
  undefined,
  { inclusionPrefixes: ["cluster.outbound", "http.inbound"] },
  { inclusionSuffixes: ["upstream_rq_timeout"], inclusionRegexps: [".*osconfig.*"] },
];

export function podCase(r: Rng, i: number): PodCase {
  const proxyless = r.chance(0.08);
  const router = !proxyless && r.chance(0.12);
  const ns = r.pick(["fake-namespace", "default", "shop"]);
  const name = `${r.pick(["reviews", "ratings", "gw"])}-${i}`;
  const env: Record<string, string> = {
    POD_NAME: name,
    POD_NAMESPACE: ns,
    SERVICE_ACCOUNT: r.pick(["fake-sa", "default", "bookinfo-reviews"]),
    INSTANCE_IP: r.pick(["10.1.2.3", "10.244.0.17", "fd00:10::17"]),
    CLOUD_PLATFORM: "none",
    ISTIO_META_ISTIO_VERSION: "1.32.0",
  };
  const pc: Record<string, unknown> = { discoveryAddress: "<XDS>", binaryPath: "<ENVOY>", statusPort: "<STATUS>", proxyAdminPort: "<ADMIN>" };
  if (r.chance(0.3)) pc.concurrency = r.pick([0, 1, 2, 4]);
  if (r.chance(0.2)) pc.drainDuration = r.pick(["5s", "45s", "1m30s"]);
  if (r.chance(0.2)) pc.terminationDrainDuration = r.pick(["1s", "10s"]);
  if (r.chance(0.15)) pc.statNameLength = r.pick([100, 250]);
  const tracing = r.pick(TRACING);
  if (tracing && r.chance(0.5)) pc.tracing = tracing;
  const stats = r.pick(STATS);
  if (stats && r.chance(0.4)) pc.proxyStatsMatcher = stats;
  if (r.chance(0.2)) pc.proxyMetadata = { FROM_PROXY_METADATA: "yes" };
  if (r.chance(0.15)) pc.holdApplicationUntilProxyStarts = true;
  if (r.chance(0.1)) pc.extraStatTags = ["request_host"];
  if (r.chance(0.1)) pc.serviceCluster = "custom-cluster";
  if (r.chance(0.1)) pc.meshId = "mesh-a";
  if (r.chance(0.1)) pc.proxyHeaders = { server: { value: "envoy-x" }, requestId: { disabled: true } };
  if (r.chance(0.15)) env.ISTIO_META_CLUSTER_ID = r.pick(["Kubernetes", "cluster-b"]);
  if (r.chance(0.15)) env.ISTIO_META_NETWORK = "net-1";
  if (r.chance(0.1)) env.ISTIO_META_MESH_ID = "mesh-b";
  if (r.chance(0.3))
    env.ISTIO_METAJSON_LABELS = JSON.stringify(
      r.pick([{ app: "reviews", version: "v1" }, { app: "gw", "topology.istio.io/subzone": "sz1" }, { "service.istio.io/canonical-name": "reviews" }]),
    );
  if (r.chance(0.2))
    env.ISTIO_METAJSON_ANNOTATIONS = JSON.stringify({
      "sidecar.istio.io/statsInclusionPrefixes": "cluster.outbound",
      "kubectl.kubernetes.io/default-container": "app",
    });
  if (r.chance(0.2)) env.ISTIO_META_POD_PORTS = JSON.stringify([{ name: "http", containerPort: 8080, protocol: "TCP" }]);
  if (r.chance(0.2)) env.ISTIO_META_APP_CONTAINERS = "app,helper";
  if (r.chance(0.2)) env.ISTIO_META_WORKLOAD_NAME = name.replace(/-\d+$/, "");
  if (r.chance(0.1)) env.ISTIO_META_OWNER = `kubernetes://apis/apps/v1/namespaces/${ns}/deployments/${name}`;
  if (r.chance(0.15)) env.ISTIO_META_INTERCEPTION_MODE = r.pick(["REDIRECT", "TPROXY"]);
  if (r.chance(0.1)) env.ISTIO_META_FOO = "bar";
  if (r.chance(0.1)) env.ISTIO_METAJSON_EXTRA = '{"k":"v","n":2}';
  if (r.chance(0.1)) env.ISTIO_META_REQUESTED_NETWORK_VIEW = "net-1,net-2";
  if (r.chance(0.1)) env.ISTIO_META_DNS_CAPTURE = "true";
  if (r.chance(0.1)) env.ISTIO_META_ENABLE_HBONE = "true";
  if (r.chance(0.1)) env.ISTIO_DUAL_STACK = "true";
  if (r.chance(0.1)) env.ISTIO_DELTA_XDS = r.pick(["true", "false"]);
  if (r.chance(0.1)) env.OUTPUT_CERTS = "etc/certs";
  if (r.chance(0.1)) env.PILOT_CERT_PROVIDER = "istiod";
  if (r.chance(0.1)) env.ISTIO_META_REQUESTED_NETWORK_VIEW = "";
  if (r.chance(0.08)) env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS = "true";
  if (r.chance(0.08)) env.ENABLE_NATIVE_SIDECARS = "true";
  if (r.chance(0.1)) env.TRUST_DOMAIN = "example.org";
  if (proxyless) {
    env.DISABLE_ENVOY = "true";
    env.ISTIO_META_GENERATOR = "grpc";
  }
  if (env.ISTIO_META_DNS_CAPTURE === "true") env.DNS_PROXY_ADDR = "127.0.0.1:<DNS>";
  env.PROXY_CONFIG = JSON.stringify(pc);
  const files: Record<string, string> = {};
  if (r.chance(0.1)) files["etc/istio/pod/annotations"] = `proxy.istio.io/config="{\\"concurrency\\":3}"\nsidecar.istio.io/status="{}"\n`;
  if (r.chance(0.1)) files["etc/istio/pod/labels"] = `app="reviews"\nversion="v2"\n`;
  return { args: ["proxy", router ? "router" : "sidecar"], env, files, proxyless };
}
