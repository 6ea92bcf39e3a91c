// Node metadata, as Istio's GetNodeMetaData (pkg/bootstrap/config.go) assembles it, as a pure
// function of injected inputs (no process.env, no files: the caller reads ./etc/istio/pod/* and
// passes their contents). Reference §2 "Node metadata".
//
// Order: ProxyConfig.proxyMetadata ISTIO_META_* < env ISTIO_META_* < env ISTIO_METAJSON_* (object
// keys merged at top level) < DNS_PROXY_ADDR; that untyped map is decoded into the typed
// BootstrapNodeMetadata fields (JSON round trip, keys matched case-insensitively like Go), typed
// fields are then set from the inputs, and the final metadata is the typed JSON plus every untyped
// key the typed JSON lacks. StringBool fields serialize as "true"/"false", omitted when false.

import { protoJsonProxyConfig, type ProxyConfig } from "./proxyconfig.ts";
import { errorMessage } from "../lib/errors.ts";

export interface PlatformInfo {
  /** PLATFORM_METADATA (gcp_project, aws_region...); empty for none. */
  metadata?: Record<string, string>;
  locality?: Locality;
  /** Instance labels, added to STATIC_LABELS when not on Kubernetes. */
  labels?: Record<string, string>;
  isKubernetes: boolean;
}

export interface Locality {
  region: string;
  zone: string;
  subZone: string;
}

export interface NodeMetadataInputs {
  /** Node ID `<type>~<ip>~<id>~<domain>`. */
  id: string;
  /** Environment as `KEY=VALUE` entries, in order (the agent passes its whole environment). */
  envs: string[];
  /** Raw DNS_PROXY_ADDR from the process environment, when set. */
  dnsProxyAddr?: string;
  /** Effective ProxyConfig in protobuf-JSON form. */
  proxyConfig: ProxyConfig;
  instanceIps: string[];
  pilotSubjectAltName: string[];
  stsPort: number;
  credentialSocketExists: boolean;
  customCredentialsFileExists: boolean;
  xdsRootCert: string;
  outlierLogPath: string;
  envoyStatusPort: number;
  envoyPrometheusPort: number;
  envoySecureMetricsPort: number;
  envoySecureMergedMetricsPort: number;
  exitOnZeroActiveConnections: boolean;
  /** PEER_METADATA_DISCOVERY; undefined follows ENABLE_HBONE. */
  metadataDiscovery: boolean | undefined;
  envoySkipDeprecatedLogs: boolean;
  workloadIdentitySocketFile: string;
  /** Build version, used when ISTIO_META_ISTIO_VERSION is not set. */
  istioVersion: string;
  /** Parsed ./etc/istio/pod/labels, or null when the file is absent. */
  podLabels: Record<string, string> | null;
  /** Parsed ./etc/istio/pod/annotations, or null when absent. */
  podAnnotations: Record<string, string> | null;
  platform?: PlatformInfo;
}

type FieldType = "string" | "stringbool" | "optstringbool" | "int" | "stringlist" | "podports" | "stringmap" | "strings" | "proxyconfig";

/** BootstrapNodeMetadata's JSON fields: JSON key -> [type, Go field name]. */
export const TYPED_FIELDS: Record<string, [FieldType, string]> = {
  PROXY_CONFIG: ["proxyconfig", "ProxyConfig"],
  ISTIO_VERSION: ["string", "IstioVersion"],
  ISTIO_REVISION: ["string", "IstioRevision"],
  LABELS: ["stringmap", "Labels"],
  STATIC_LABELS: ["stringmap", "StaticLabels"],
  ANNOTATIONS: ["stringmap", "Annotations"],
  INSTANCE_IPS: ["stringlist", "InstanceIPs"],
  NAMESPACE: ["string", "Namespace"],
  NODE_NAME: ["string", "NodeName"],
  WORKLOAD_NAME: ["string", "WorkloadName"],
  INTERCEPTION_MODE: ["string", "InterceptionMode"],
  SERVICE_ACCOUNT: ["string", "ServiceAccount"],
  HTTP_PROXY_PORT: ["string", "HTTPProxyPort"],
  MESH_ID: ["string", "MeshID"],
  CLUSTER_ID: ["string", "ClusterID"],
  NETWORK: ["string", "Network"],
  REQUESTED_NETWORK_VIEW: ["stringlist", "RequestedNetworkView"],
  POD_PORTS: ["podports", "PodPorts"],
  TLS_SERVER_CERT_CHAIN: ["string", "TLSServerCertChain"],
  TLS_SERVER_KEY: ["string", "TLSServerKey"],
  TLS_SERVER_ROOT_CERT: ["string", "TLSServerRootCert"],
  TLS_CLIENT_CERT_CHAIN: ["string", "TLSClientCertChain"],
  TLS_CLIENT_KEY: ["string", "TLSClientKey"],
  TLS_CLIENT_ROOT_CERT: ["string", "TLSClientRootCert"],
  BASE: ["string", "CertBaseDir"],
  IDLE_TIMEOUT: ["string", "IdleTimeout"],
  HTTP10: ["string", "HTTP10"],
  GENERATOR: ["string", "Generator"],
  ENABLE_SELF_DISCOVERY: ["stringbool", "EnableSelfDiscovery"],
  DNS_CAPTURE: ["stringbool", "DNSCapture"],
  DNS_AUTO_ALLOCATE: ["stringbool", "DNSAutoAllocate"],
  DNS_PROXY_ADDR: ["string", "DNSProxyAddr"],
  ENABLE_HBONE: ["stringbool", "EnableHBONE"],
  DISABLE_HBONE_SEND: ["stringbool", "DisableHBONESend"],
  AUTO_REGISTER_GROUP: ["string", "AutoRegisterGroup"],
  WORKLOAD_ENTRY: ["string", "WorkloadEntry"],
  UNPRIVILEGED_POD: ["string", "UnprivilegedPod"],
  PLATFORM_METADATA: ["stringmap", "PlatformMetadata"],
  STS_PORT: ["string", "StsPort"],
  ENVOY_STATUS_PORT: ["int", "EnvoyStatusPort"],
  ENVOY_PROMETHEUS_PORT: ["int", "EnvoyPrometheusPort"],
  ENVOY_SECURE_METRICS_PORT: ["int", "EnvoySecureMetricsPort"],
  ENVOY_SECURE_MERGED_METRICS_PORT: ["int", "EnvoySecureMergedMetricsPort"],
  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: ["stringbool", "ExitOnZeroActiveConnections"],
  INBOUND_LISTENER_EXACT_BALANCE: ["stringbool", "InboundListenerExactBalance"],
  OUTBOUND_LISTENER_EXACT_BALANCE: ["stringbool", "OutboundListenerExactBalance"],
  CLOUDRUN_ADDR: ["string", "CloudrunAddr"],
  METADATA_DISCOVERY: ["optstringbool", "MetadataDiscovery"],
  ENVOY_SKIP_DEPRECATED_LOGS: ["stringbool", "EnvoySkipDeprecatedLogs"],
  WORKLOAD_IDENTITY_SOCKET_FILE: ["string", "WorkloadIdentitySocketFile"],
  NAME: ["string", "InstanceName"],
  OWNER: ["string", "Owner"],
  PILOT_SAN: ["strings", "PilotSubjectAltName"],
  OUTLIER_LOG_PATH: ["string", "OutlierLogPath"],
  APP_CONTAINERS: ["string", "AppContainers"],
  ISTIO_PROXY_SHA: ["string", "IstioProxySHA"],
};

const LOWER_KEYS = new Map(Object.keys(TYPED_FIELDS).map((k) => [k.toLowerCase(), k]));

/** Typed metadata by JSON key; values in decoded form (booleans, arrays, maps). */
export type TypedMetadata = Record<string, unknown>;

/** Istio's model.Node for the bootstrap: typed + raw metadata and the locality. */
export interface BootstrapNode {
  id: string;
  typed: TypedMetadata;
  raw: Record<string, unknown>;
  locality: Locality;
  /** Root certificate for the xDS connection (typed metadata field never serialized). */
  xdsRootCert: string;
  /** Inputs that could not be used (bad JSON, values of the wrong type), each naming its source. */
  problems: string[];
}

const META_PREFIX = "ISTIO_META_";
const METAJSON_PREFIX = "ISTIO_METAJSON_";
const GO_TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const GO_FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

function splitEnv(e: string): [string, string] | undefined {
  const eq = e.indexOf("=");
  return eq < 0 ? undefined : [e.slice(0, eq), e.slice(eq + 1)];
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === "string") out[k] = x;
  return out;
}

/** One untyped value into its typed field; returns undefined (and a problem) when Go would fail. */
function decodeTyped(key: string, type: FieldType, v: unknown, problems: string[]): unknown {
  const bad = (want: string) => {
    problems.push(`node metadata ${key}: cannot use ${JSON.stringify(v)} as ${want}; kept untyped`);
    return undefined;
  };
  switch (type) {
    case "string":
      return typeof v === "string" ? v : bad("a string");
    case "stringbool":
    case "optstringbool":
      if (typeof v === "string" && GO_TRUE.has(v)) return true;
      if (typeof v === "string" && GO_FALSE.has(v)) return false;
      return bad(`a string holding a boolean`);
    case "int":
      return typeof v === "number" && Number.isInteger(v) ? v : bad("an integer");
    case "stringlist":
      return typeof v === "string" ? (v === "" ? [] : v.split(",")) : bad("a comma-separated string");
    case "podports":
      if (typeof v !== "string") return bad("a JSON string of ports");
      try {
        const list = JSON.parse(v);
        if (!Array.isArray(list)) return bad("a JSON list of ports");
        return list.map(podPort);
      } catch {
        return bad("a JSON list of ports");
      }
    case "stringmap":
      return stringMap(v) ?? bad("an object of strings");
    case "strings":
      return Array.isArray(v) && v.every((x) => typeof x === "string") ? v : bad("a list of strings");
    case "proxyconfig":
      return typeof v === "object" && v !== null ? v : bad("a ProxyConfig object");
  }
}

/**
 * One entry as Go's model.PodPort encodes it: `name` omitted when empty, `containerPort` and
 * `protocol` always present (0 and "" when absent), so istiod sees the same string as from Istio.
 */
function podPort(p: unknown): Record<string, unknown> {
  const o = (p && typeof p === "object" ? p : {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  if (typeof o.name === "string" && o.name !== "") out.name = o.name;
  out.containerPort = typeof o.containerPort === "number" ? o.containerPort : 0;
  out.protocol = typeof o.protocol === "string" ? o.protocol : "";
  return out;
}

/** GetNodeMetaData. */
export function buildNode(inp: NodeMetadataInputs): BootstrapNode {
  const problems: string[] = [];
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(inp.proxyConfig.proxyMetadata ?? {})) {
    if (k.startsWith(META_PREFIX)) raw[k.slice(META_PREFIX.length)] = v;
  }
  const envPairs = inp.envs.map(splitEnv).filter((p): p is [string, string] => p !== undefined);
  for (const [k, v] of envPairs) {
    if (!k.startsWith(META_PREFIX)) continue;
    raw[k.slice(META_PREFIX.length)] = v;
  }
  for (const [k, v] of envPairs) {
    if (!k.startsWith(METAJSON_PREFIX)) continue;
    try {
      const obj = JSON.parse(v);
      if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new Error("not a JSON object");
      Object.assign(raw, obj);
    } catch (e) {
      problems.push(`${k}: invalid JSON object ${JSON.stringify(v)}: ${errorMessage(e)}`);
    }
  }
  if (inp.dnsProxyAddr) raw.DNS_PROXY_ADDR = inp.dnsProxyAddr;

  // Untyped -> typed (Go's json round trip; exact key wins over a case-insensitive match).
  const typed: TypedMetadata = {};
  const exact = new Set(Object.keys(raw).filter((k) => k in TYPED_FIELDS));
  for (const [k, v] of Object.entries(raw)) {
    const key = k in TYPED_FIELDS ? k : LOWER_KEYS.get(k.toLowerCase());
    if (!key || (key !== k && exact.has(key))) continue;
    const val = decodeTyped(k, TYPED_FIELDS[key]![0], v, problems);
    if (val !== undefined) typed[key] = val;
  }

  if (!typed.ISTIO_VERSION) typed.ISTIO_VERSION = inp.istioVersion;
  typed.INSTANCE_IPS = [...new Set(inp.instanceIps)];
  if (inp.stsPort !== 0) typed.STS_PORT = String(inp.stsPort);
  typed.ENVOY_STATUS_PORT = inp.envoyStatusPort;
  typed.ENVOY_PROMETHEUS_PORT = inp.envoyPrometheusPort;
  typed.ENVOY_SECURE_METRICS_PORT = inp.envoySecureMetricsPort;
  typed.ENVOY_SECURE_MERGED_METRICS_PORT = inp.envoySecureMergedMetricsPort;
  typed.EXIT_ON_ZERO_ACTIVE_CONNECTIONS = inp.exitOnZeroActiveConnections;
  typed.METADATA_DISCOVERY = inp.metadataDiscovery;
  typed.ENVOY_SKIP_DEPRECATED_LOGS = inp.envoySkipDeprecatedLogs;
  typed.WORKLOAD_IDENTITY_SOCKET_FILE = inp.workloadIdentitySocketFile;
  typed.PROXY_CONFIG = inp.proxyConfig;

  // extractAttributesMetadata: LABELS and STATIC_LABELS share one map, as in Go.
  for (const [k, v] of envPairs) {
    if (k === "ISTIO_METAJSON_LABELS") {
      let m: Record<string, string> | undefined;
      try {
        m = stringMap(JSON.parse(v));
      } catch {
        m = undefined;
      }
      if (m && Object.keys(m).length > 0) {
        typed.LABELS = m;
        typed.STATIC_LABELS = m;
      }
    } else if (k === "POD_NAME") typed.NAME = v;
    else if (k === "POD_NAMESPACE") typed.NAMESPACE = v;
    else if (k === "SERVICE_ACCOUNT") typed.SERVICE_ACCOUNT = v;
  }
  const plat = inp.platform;
  if (plat?.metadata && Object.keys(plat.metadata).length > 0) typed.PLATFORM_METADATA = plat.metadata;
  if (plat && !plat.isKubernetes) {
    const statics = (typed.STATIC_LABELS as Record<string, string> | undefined) ?? {};
    Object.assign(statics, plat.labels ?? {});
    typed.STATIC_LABELS = statics;
  }
  if (inp.podLabels) {
    const labels: Record<string, string> = { ...((typed.STATIC_LABELS as Record<string, string>) ?? {}) };
    for (const [k, v] of Object.entries(inp.podLabels)) if (k !== "pod-template-hash") labels[k] = v;
    typed.LABELS = labels;
  }
  if (inp.podAnnotations) {
    typed.ANNOTATIONS = { ...((typed.ANNOTATIONS as Record<string, string>) ?? {}), ...inp.podAnnotations };
  }

  const labels = typed.LABELS as Record<string, string> | undefined;
  const localityLabel = labels?.["topology.istio.io/locality"] ?? labels?.["istio-locality"] ?? "";
  let locality: Locality;
  if (localityLabel === "" && plat) {
    locality = { region: "", zone: "", subZone: "", ...plat.locality };
  } else {
    const sanitized = localityLabel.includes("/") ? localityLabel : localityLabel.replaceAll(".", "/");
    if (sanitized !== "") labels!["istio-locality"] = sanitized;
    const parts = sanitized === "" ? [] : sanitized.split("/");
    locality = { region: parts[0] ?? "", zone: parts[1] ?? "", subZone: parts[2] ?? "" };
  }

  typed.PILOT_SAN = inp.pilotSubjectAltName;
  typed.OUTLIER_LOG_PATH = inp.outlierLogPath;
  if (inp.credentialSocketExists) raw.credential = "true";
  if (inp.customCredentialsFileExists) raw["file-credential"] = "true";
  if (typed.METADATA_DISCOVERY === undefined) typed.METADATA_DISCOVERY = typed.ENABLE_HBONE === true;
  return { id: inp.id, typed, raw, locality, xdsRootCert: inp.xdsRootCert, problems };
}

/** json.Marshal of the typed struct: omitempty rules and StringBool/StringList/PodPortList encodings. */
export function typedMetadataJson(typed: TypedMetadata): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, [type]] of Object.entries(TYPED_FIELDS)) {
    const v = typed[key];
    if (v === undefined || v === null) continue;
    switch (type) {
      case "string":
        if (v !== "") out[key] = v;
        break;
      case "stringbool":
        if (v === true) out[key] = "true";
        break;
      case "optstringbool":
        out[key] = v ? "true" : "false";
        break;
      case "int":
        if (v !== 0) out[key] = v;
        break;
      case "stringlist":
        if ((v as string[]).length > 0) out[key] = (v as string[]).join(",");
        break;
      case "podports":
        if ((v as unknown[]).length > 0) out[key] = JSON.stringify(v);
        break;
      case "stringmap":
        if (Object.keys(v as object).length > 0) out[key] = v;
        break;
      case "strings":
        if ((v as string[]).length > 0) out[key] = v;
        break;
      case "proxyconfig":
        out[key] = protoJsonProxyConfig(v as ProxyConfig);
        break;
    }
  }
  return out;
}

/** The node metadata Envoy receives: typed fields plus untyped keys they do not already hold. */
export function mergedMetadata(node: BootstrapNode): Record<string, unknown> {
  const out = typedMetadataJson(node.typed);
  for (const [k, v] of Object.entries(node.raw)) if (!(k in out)) out[k] = v;
  return out;
}

/** GetNodeMetaData followed by the metadata marshalling: the `node.metadata` object. */
export function buildNodeMetadata(inputs: NodeMetadataInputs): Record<string, unknown> {
  return mergedMetadata(buildNode(inputs));
}

/** PILOT_SAN for a discovery address (`GetPilotSan`): its host, localhost meaning istiod. */
export function pilotSanFor(discoveryAddress: string): string {
  const host = discoveryAddress.split(":")[0] ?? "";
  return host === "localhost" ? "istiod.istio-system.svc" : host;
}
