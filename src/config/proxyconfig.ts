// Istio's ProxyConfig (istio.mesh.v1alpha1.ProxyConfig) as the agent carries it: a plain object in
// protobuf-JSON form (lowerCamelCase names, durations as "45s" strings, enums as names, int64 as
// numbers). That is the form istiod's injector writes into PROXY_CONFIG, the form node metadata
// PROXY_CONFIG must carry, and what the bootstrap template reads (via Go-style field names).
// Unknown fields are kept so a newer mesh config passes through untouched.

export interface ProxyConfig {
  configPath?: string;
  binaryPath?: string;
  serviceCluster?: string;
  drainDuration?: string;
  discoveryAddress?: string;
  /** @deprecated in Istio, still honoured. */
  zipkinAddress?: string;
  statsdUdpAddress?: string;
  proxyAdminPort?: number;
  controlPlaneAuthPolicy?: "NONE" | "MUTUAL_TLS" | "INHERIT" | string;
  customConfigFile?: string;
  statNameLength?: number;
  concurrency?: number | null;
  proxyBootstrapTemplatePath?: string;
  interceptionMode?: "REDIRECT" | "TPROXY" | "NONE" | string;
  tracing?: Record<string, unknown>;
  envoyAccessLogService?: Record<string, unknown>;
  envoyMetricsService?: Record<string, unknown>;
  statusPort?: number;
  extraStatTags?: string[];
  proxyMetadata?: Record<string, string>;
  runtimeValues?: Record<string, string>;
  terminationDrainDuration?: string;
  meshId?: string;
  readinessProbe?: Record<string, unknown>;
  proxyStatsMatcher?: { inclusionPrefixes?: string[]; inclusionSuffixes?: string[]; inclusionRegexps?: string[] };
  holdApplicationUntilProxyStarts?: boolean | null;
  caCertificatesPem?: string[];
  image?: Record<string, unknown>;
  privateKeyProvider?: Record<string, unknown>;
  proxyHeaders?: Record<string, unknown>;
  fileFlushInterval?: string;
  fileFlushMinSizeKb?: number;
  caCertificatePem?: string;
  tracingServiceName?: string;
  gatewayTopology?: Record<string, unknown>;
  sidecarStatsTemplate?: string;
  [extra: string]: unknown;
}

/**
 * ProxyConfig's plain scalar fields (strings, integers, enums; not the wrapper-typed ones such as
 * concurrency) and their protobuf zero values. Protobuf JSON leaves a field at its zero out, so
 * an explicitly set zero (`interceptionMode: REDIRECT`, `controlPlaneAuthPolicy: NONE`) is
 * indistinguishable from an unset one in what istiod receives.
 */
export const PROXY_CONFIG_SCALAR_ZERO: Readonly<Record<string, string | number>> = {
  configPath: "",
  binaryPath: "",
  serviceCluster: "",
  discoveryAddress: "",
  zipkinAddress: "",
  statsdUdpAddress: "",
  envoyMetricsServiceAddress: "",
  proxyAdminPort: 0,
  availabilityZone: "",
  controlPlaneAuthPolicy: "NONE",
  customConfigFile: "",
  statNameLength: 0,
  proxyBootstrapTemplatePath: "",
  interceptionMode: "REDIRECT",
  statusPort: 0,
  meshId: "",
  fileFlushMinSizeKb: 0,
};

/** The ProxyConfig as protobuf JSON encodes it (node metadata PROXY_CONFIG): scalar fields at their zero left out. */
export function protoJsonProxyConfig(pc: ProxyConfig): ProxyConfig {
  const out: ProxyConfig = {};
  for (const [k, v] of Object.entries(pc)) if (!(k in PROXY_CONFIG_SCALAR_ZERO && PROXY_CONFIG_SCALAR_ZERO[k] === v)) out[k] = v;
  return out;
}

/** Istio's mesh.DefaultProxyConfig(), in protobuf-JSON form. */
export function defaultProxyConfig(): ProxyConfig {
  return {
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
  };
}
