// The generated workloads of the injection differential: Deployments as a user would apply
// them, varied over what changes the pod Istio's injector renders (the templates: sidecar,
// gateway, grpc-agent, a custom one; classic and native sidecar; holdApplicationUntilProxyStarts;
// DNS capture; TPROXY and NONE interception; proxy.istio.io/config with ProxyConfig fields,
// explicitly set defaults included; the other sidecar.istio.io / traffic.sidecar.istio.io /
// readiness.status.sidecar.istio.io annotations; resource requests and limits; several app
// containers with HTTP, TCP and gRPC probes). Seeded: the same seed gives the same corpus.
//
// ProxyConfig's discoveryAddress, statusPort, proxyAdminPort and binaryPath are never set by a
// workload: the harness points them at the sandbox (a real pod's are the mesh's defaults).

import type { Install, Workload } from "./injector.ts";
import type { Rng } from "./seeded.ts";

/** A user's own template (the chart's `sidecarInjectorWebhook.templates` feature): adds env and a label. */
const CUSTOM_TEMPLATE = `metadata:
  labels:
    custom-template: "applied"
spec:
  containers:
  - name: istio-proxy
    env:
    - name: ISTIO_META_CUSTOM_TEMPLATE
      value: "{{ .DeploymentMeta.Name }}"
    - name: GREETING
      value: "hello-$(POD_NAME)"
`;

/** The installations: the chart's defaults and a few operator choices, each rendered once. */
export const INSTALLS: Install[] = [
  { id: "default", set: [], templates: { custom: CUSTOM_TEMPLATE } },
  { id: "hold", set: ["values.global.proxy.holdApplicationUntilProxyStarts=true"] },
  { id: "cni", set: ["values.pilot.cni.enabled=true"] },
  { id: "nftables", set: ["values.global.nativeNftables=true"] },
  {
    id: "mesh",
    set: [
      "meshConfig.defaultConfig.concurrency=3",
      "meshConfig.defaultConfig.proxyMetadata.ISTIO_META_DNS_CAPTURE=true",
      "meshConfig.defaultConfig.proxyMetadata.ISTIO_META_DNS_AUTO_ALLOCATE=true",
      "meshConfig.defaultConfig.tracing.zipkin.address=zipkin.obs:9411",
      "meshConfig.trustDomain=example.org",
      "values.global.meshID=mesh-a",
      "values.global.network=net-1",
      "values.global.proxy.logLevel=info",
    ],
  },
];

/** ProxyConfig fields a pod's proxy.istio.io/config can set, with values (defaults included, marked). */
const PROXY_CONFIG_FIELDS: [string, unknown[]][] = [
  ["concurrency", [0, 1, 2, 4]],
  ["drainDuration", ["45s" /* default */, "5s", "1m30s"]],
  ["terminationDrainDuration", ["5s" /* default */, "1s", "10s"]],
  ["statNameLength", [189 /* default */, 100, 250]],
  ["holdApplicationUntilProxyStarts", [true, false /* default */]],
  ["serviceCluster", ["istio-proxy" /* default */, "custom-cluster"]],
  ["controlPlaneAuthPolicy", ["MUTUAL_TLS" /* default */]],
  ["proxyMetadata", [{ ISTIO_META_DNS_CAPTURE: "true" }, { FROM_PROXY_METADATA: "yes" }, { ISTIO_META_ENABLE_HBONE: "true" }]],
  [
    "tracing",
    [
      { zipkin: { address: "zipkin.obs:9411" } },
      { zipkin: { address: "zipkin.obs:9411" }, sampling: 12.5, maxPathTagLength: 99 },
      { datadog: { address: "$(HOST_IP):8126" } },
    ],
  ],
  [
    "proxyStatsMatcher",
    [{ inclusionPrefixes: ["cluster.outbound", "http.inbound"] }, { inclusionSuffixes: ["upstream_rq_timeout"], inclusionRegexps: [".*osconfig.*"] }],
  ],
  ["extraStatTags", [["request_host"]]],
  ["gatewayTopology", [{ numTrustedProxies: 2 }, { numTrustedProxies: 1, forwardClientCertDetails: "SANITIZE_SET" }]],
  ["proxyHeaders", [{ server: { value: "envoy-x" }, requestId: { disabled: true } }]],
  ["readinessProbe", [{ httpGet: { path: "/healthz/ready", port: 15021 } }]],
  ["interceptionMode", ["REDIRECT" /* default */, "TPROXY"]],
];

const SIDECAR_ANNOTATIONS: [string, string[]][] = [
  ["sidecar.istio.io/logLevel", ["debug", "warning", "error"]],
  ["sidecar.istio.io/componentLogLevel", ["misc:error", "upstream:debug,connection:info"]],
  ["sidecar.istio.io/agentLogLevel", ["default:debug", "default:info,xds:debug"]],
  ["sidecar.istio.io/statsInclusionPrefixes", ["cluster.outbound", "cluster.inbound,http.inbound"]],
  ["sidecar.istio.io/statsInclusionSuffixes", ["upstream_rq_timeout"]],
  ["sidecar.istio.io/statsInclusionRegexps", [".*osconfig.*"]],
  ["sidecar.istio.io/extraStatTags", ["request_host"]],
  ["sidecar.istio.io/rewriteAppHTTPProbers", ["false", "true"]],
  ["traffic.sidecar.istio.io/includeOutboundIPRanges", ["10.0.0.0/8", "*"]],
  ["traffic.sidecar.istio.io/excludeOutboundIPRanges", ["10.96.0.1/32,169.254.169.254/32"]],
  ["traffic.sidecar.istio.io/includeInboundPorts", ["8080", "*"]],
  ["traffic.sidecar.istio.io/excludeInboundPorts", ["9090", "9090,9091"]],
  ["traffic.sidecar.istio.io/excludeOutboundPorts", ["3306", "5432,6379"]],
  ["traffic.sidecar.istio.io/includeOutboundPorts", ["443"]],
  ["traffic.sidecar.istio.io/excludeInterfaces", ["eth9"]],
  ["readiness.status.sidecar.istio.io/initialDelaySeconds", ["2"]],
  ["readiness.status.sidecar.istio.io/periodSeconds", ["5"]],
  ["readiness.status.sidecar.istio.io/failureThreshold", ["10"]],
  ["networking.istio.io/exportTo", ["."]],
];

const RESOURCE_ANNOTATIONS: Record<string, string>[] = [
  { "sidecar.istio.io/proxyCPU": "100m", "sidecar.istio.io/proxyCPULimit": "500m" },
  { "sidecar.istio.io/proxyCPULimit": "3", "sidecar.istio.io/proxyMemoryLimit": "512Mi" },
  { "sidecar.istio.io/proxyCPU": "250m", "sidecar.istio.io/proxyMemory": "64Mi" },
  { "sidecar.istio.io/proxyCPULimit": "1500m" },
];

type Kind = "sidecar" | "gateway" | "grpc-agent" | "custom";

export interface WorkloadCase extends Workload {
  kind: Kind;
  native: boolean;
}

function probe(r: Rng, port: number, grpcPort?: number): Record<string, unknown> {
  const k = r.pick(["http", "http", "tcp", "grpc", "named"] as const);
  const timing = r.chance(0.5) ? { periodSeconds: r.pick([1, 5]), timeoutSeconds: r.pick([1, 2]) } : {};
  if (k === "tcp") return { tcpSocket: { port }, ...timing };
  if (k === "grpc" && grpcPort) return { grpc: { port: grpcPort }, ...timing };
  if (k === "named") return { httpGet: { path: r.pick(["/ready", "/fail"]), port: "http" }, ...timing };
  return {
    httpGet: { path: r.pick(["/ready", "/healthz", "/fail"]), port, ...(r.chance(0.2) ? { httpHeaders: [{ name: "X-Probe", value: "1" }] } : {}) },
    ...timing,
  };
}

function appContainer(r: Rng, i: number): Record<string, unknown> {
  const port = 8080 + i;
  const grpcPort = r.chance(0.3) ? 9000 + i : undefined;
  const c: Record<string, unknown> = {
    name: i === 0 ? "app" : `helper-${i}`,
    image: "registry.example/app:1",
    ports: [{ name: "http", containerPort: port }, ...(grpcPort ? [{ name: "grpc", containerPort: grpcPort }] : [])],
  };
  if (r.chance(0.8)) c.readinessProbe = probe(r, port, grpcPort);
  if (r.chance(0.4)) c.livenessProbe = probe(r, port, grpcPort);
  if (r.chance(0.2)) c.startupProbe = probe(r, port, grpcPort);
  if (r.chance(0.3)) c.resources = { limits: { cpu: r.pick(["1", "250m"]), memory: "256Mi" } };
  return c;
}

/** One generated Deployment; `i` makes names unique. */
export function workloadCase(r: Rng, i: number): WorkloadCase {
  const kind: Kind = r.chance(0.1) ? "gateway" : r.chance(0.1) ? "grpc-agent" : r.chance(0.08) ? "custom" : "sidecar";
  const install = kind === "custom" ? "default" : r.pick(["default", "default", "default", "hold", "cni", "nftables", "mesh"]);
  const ns = r.pick(["shop", "default", "bookinfo"]);
  const app = r.pick(["reviews", "ratings", "checkout", "ingress"]);
  const name = `${app}-${i}`;
  const labels: Record<string, string> = { app };
  if (r.chance(0.5)) labels.version = r.pick(["v1", "v2"]);
  if (r.chance(0.2)) labels["service.istio.io/canonical-name"] = `${app}-canonical`;
  if (r.chance(0.1)) labels["topology.istio.io/subzone"] = "sz1";
  const annotations: Record<string, string> = {};
  // The custom template patches spec.containers' istio-proxy: with a native sidecar that would be
  // a second istio-proxy, which the API server refuses; so custom-template pods are classic.
  const native = kind !== "gateway" && kind !== "custom" && r.chance(0.4);
  if (kind !== "gateway") annotations["sidecar.istio.io/nativeSidecar"] = String(native);
  if (kind === "gateway") annotations["inject.istio.io/templates"] = "gateway";
  if (kind === "grpc-agent") annotations["inject.istio.io/templates"] = "grpc-agent";
  if (kind === "custom") annotations["inject.istio.io/templates"] = "sidecar,custom";
  if (r.chance(0.45)) {
    const pc: Record<string, unknown> = {};
    const n = 1 + Math.floor(r.next() * 4);
    for (let k = 0; k < n; k++) {
      const [field, values] = r.pick(PROXY_CONFIG_FIELDS);
      if (values.length) pc[field] = r.pick(values);
    }
    if (kind === "grpc-agent") delete pc.interceptionMode;
    annotations["proxy.istio.io/config"] = r.chance(0.5) ? JSON.stringify(pc) : yamlish(pc);
  }
  if (kind === "sidecar" && r.chance(0.12)) annotations["sidecar.istio.io/interceptionMode"] = r.pick(["TPROXY", "NONE"]);
  const n = Math.floor(r.next() * 4);
  for (let k = 0; k < n; k++) {
    const [key, values] = r.pick(SIDECAR_ANNOTATIONS);
    annotations[key] = r.pick(values);
  }
  if (r.chance(0.3)) Object.assign(annotations, r.pick(RESOURCE_ANNOTATIONS));
  const containers: Record<string, unknown>[] = [];
  if (kind === "gateway") containers.push({ name: "istio-proxy", image: "auto" });
  else {
    const apps = 1 + (r.chance(0.35) ? 1 + Math.floor(r.next() * 2) : 0);
    for (let k = 0; k < apps; k++) containers.push(appContainer(r, k));
  }
  const object = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: ns },
    spec: {
      selector: { matchLabels: { app } },
      template: {
        metadata: { labels, annotations },
        spec: {
          serviceAccountName: r.pick(["default", `${app}-sa`]),
          // Grace periods well above the longest drain the corpus sets (10s): an exit racing the
          // kubelet's SIGKILL would make the lifecycle comparison depend on the machine's load.
          ...(r.chance(0.2) ? { terminationGracePeriodSeconds: r.pick([15, 20]) } : {}),
          containers,
        },
      },
    },
  };
  return { name, install, object, kind, native };
}

/** A small YAML writer for the flat/nested ProxyConfig values above (the annotation accepts YAML). */
function yamlish(v: Record<string, unknown>, indent = ""): string {
  const lines: string[] = [];
  for (const [k, x] of Object.entries(v)) {
    if (x !== null && typeof x === "object" && !Array.isArray(x)) lines.push(`${indent}${k}:\n${yamlish(x as Record<string, unknown>, indent + "  ")}`);
    else lines.push(`${indent}${k}: ${JSON.stringify(x)}`);
  }
  return lines.join("\n");
}
