// What Istio's injector gives the istio-proxy container, rendered by hand from the templates in
// manifests/charts/istio-control/istio-discovery/files/ at istio/istio 86c9f01 with the chart's
// default values, for a Deployment `greeter` (apps/v1) in namespace `demo`, service account
// `greeter-client`, one app container `app` with port 8080, on node `node-1`, with a 2-CPU,
// 1 GiB limit. Downward-API values (fieldRef, resourceFieldRef) are what the kubelet would put
// there; $(POD_NAMESPACE) in the arguments is expanded as the kubelet does.
//
// Kept in the sandbox's terms where a value must point at the test's own fakes: CA_ADDR (the fake
// CA, filled in by the test), ProxyConfig's discoveryAddress/statusPort/proxyAdminPort/binaryPath
// (the fake istiod, free ports, the Envoy stand-in) and OUTPUT_CERTS (relative to the pod root).
// Every variable *name* is exactly the template's.

export interface InjectedProxy {
  /** Which template, for test names. */
  template: string;
  args: string[];
  env: Record<string, string>;
  /** ProxyConfig as the template's `protoToJSON .ProxyConfig` renders the mesh default. */
  proxyConfig: Record<string, unknown>;
  /** The port the template's readinessProbe (and `pilot-agent wait`) uses: the agent's status port or Envoy's. */
  readinessOn: "agent" | "envoy";
}

// ISTIO_META_POD_PORTS as the template's range over container ports prints it.
const POD_PORTS = '[\n{"name":"http","containerPort":8080,"protocol":"TCP"}\n]';

// The mesh's default ProxyConfig (values.yaml meshConfig.defaultConfig left at defaults).
const DEFAULT_PROXY_CONFIG = {
  configPath: "./etc/istio/proxy",
  binaryPath: "/usr/local/bin/envoy",
  serviceCluster: "istio-proxy",
  drainDuration: "45s",
  discoveryAddress: "istiod.istio-system.svc:15012",
  proxyAdminPort: 15000,
  controlPlaneAuthPolicy: "MUTUAL_TLS",
  statNameLength: 189,
  statusPort: 15020,
  terminationDrainDuration: "5s",
  tracing: { zipkin: { address: "zipkin.istio-system:9411" } },
};

/** Downward API and identity values shared by every template. */
const POD_ENV = {
  PILOT_CERT_PROVIDER: "istiod",
  CA_ADDR: "istiod.istio-system.svc:15012",
  POD_NAME: "greeter-7d9f8b6c5d-x2k4q",
  POD_NAMESPACE: "demo",
  INSTANCE_IP: "127.0.0.1",
  SERVICE_ACCOUNT: "greeter-client",
  HOST_IP: "127.0.0.1",
  ISTIO_META_POD_PORTS: POD_PORTS,
  ISTIO_META_CLUSTER_ID: "Kubernetes",
  ISTIO_META_NODE_NAME: "node-1",
  ISTIO_META_WORKLOAD_NAME: "greeter",
  ISTIO_META_OWNER: "kubernetes://apis/apps/v1/namespaces/demo/deployments/greeter",
  ISTIO_META_MESH_ID: "cluster.local",
  TRUST_DOMAIN: "cluster.local",
};

const FLAGS = ["--domain", "demo.svc.cluster.local", "--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error", "--log_output_level=default:info"];

/** injection-template.yaml (the `sidecar` template). */
export const SIDECAR: InjectedProxy = {
  template: "sidecar (injection-template.yaml)",
  args: ["proxy", "sidecar", ...FLAGS],
  env: {
    ...POD_ENV,
    ISTIO_CPU_LIMIT: "2",
    ISTIO_META_APP_CONTAINERS: "app",
    GOMEMLIMIT: "1073741824",
    ISTIO_META_INTERCEPTION_MODE: "REDIRECT",
  },
  proxyConfig: DEFAULT_PROXY_CONFIG,
  readinessOn: "envoy",
};

/** gateway-injection-template.yaml (the `gateway` template): a router with no app container. */
export const GATEWAY: InjectedProxy = {
  template: "gateway (gateway-injection-template.yaml)",
  args: ["proxy", "router", ...FLAGS],
  env: {
    ...POD_ENV,
    ISTIO_CPU_LIMIT: "2",
    GOMEMLIMIT: "1073741824",
    ISTIO_META_APP_CONTAINERS: "",
    ISTIO_META_INTERCEPTION_MODE: "REDIRECT",
  },
  proxyConfig: DEFAULT_PROXY_CONFIG,
  readinessOn: "envoy",
};

/** grpc-agent.yaml (the `grpc-agent` template): proxyless gRPC, no Envoy. */
export const GRPC_AGENT: InjectedProxy = {
  template: "grpc-agent (grpc-agent.yaml)",
  args: ["proxy", "sidecar", ...FLAGS],
  env: {
    ISTIO_META_GENERATOR: "grpc",
    OUTPUT_CERTS: "var/lib/istio/data",
    ...POD_ENV,
    ISTIO_META_APP_CONTAINERS: "app",
    ISTIO_META_DNS_CAPTURE: "false",
    DISABLE_ENVOY: "true",
  },
  proxyConfig: DEFAULT_PROXY_CONFIG,
  readinessOn: "agent",
};

/** The Downward API files the templates mount at /etc/istio/pod. */
export const POD_INFO_FILES: Record<string, string> = {
  "etc/istio/pod/labels":
    'app="greeter"\npod-template-hash="7d9f8b6c5d"\nservice.istio.io/canonical-name="greeter"\nservice.istio.io/canonical-revision="latest"\nsecurity.istio.io/tlsMode="istio"',
  "etc/istio/pod/annotations":
    'kubernetes.io/config.source="api"\nistio.io/rev="default"\nsidecar.istio.io/status="{\\"initContainers\\":[\\"istio-init\\"],\\"containers\\":[\\"istio-proxy\\"]}"',
};
