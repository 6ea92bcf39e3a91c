// The bootstrap template parameters, computed as Istio's Config.toTemplateParams does
// (pkg/bootstrap/config.go, option/instances.go), as a pure function of the node (metadata) and a
// few process-level flags. Options Istio skips when zero are left out of the map, so templates
// that test `{{ if .x }}` see the same thing. The lightstep token file is returned, not written.

import { isIPv4, isIPv6 } from "node:net";
import { posix } from "node:path";
import type { ProxyConfig } from "../config/proxyconfig.ts";
import { mergedMetadata, type BootstrapNode } from "../config/metadata.ts";
import { addressJson, keepaliveJson, sanMatchers, transportSocketJson, type ClientTlsSettings, type TcpKeepalive } from "./converters.ts";
import { BootstrapError } from "./errors.ts";
import { metadataStruct, proxyConfigStruct } from "./gostructs.ts";
import { goJsonMarshal } from "./gotemplate/json.ts";
import { statsParams } from "./stats.ts";

export const LIGHTSTEP_TOKEN_FILE = "lightstep_access_token.txt";
export const FILE_CREDENTIAL_SOCKET = "./var/run/secrets/credential-uds/files-socket";

/** Process-level switches Istio reads from its own environment (reference §3). */
export interface BootstrapFlags {
  /** ISTIO_DELTA_XDS (default true). */
  deltaXds: boolean;
  /** ISTIO_DUAL_STACK. */
  dualStack: boolean;
  /** ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL. */
  envoyStatusPortEnableProxyProtocol: boolean;
  /** HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED (default true). */
  stripFragment: boolean;
  /** HOST_IP, substituted for a `$(HOST_IP)` tracer/statsd/metrics host. */
  hostIp: string;
}

export const DEFAULT_BOOTSTRAP_FLAGS: BootstrapFlags = {
  deltaXds: true,
  dualStack: false,
  envoyStatusPortEnableProxyProtocol: false,
  stripFragment: true,
  hostIp: "",
};

export interface ParamsInputs {
  node: BootstrapNode;
  /** COMPLIANCE_POLICY (fips-140-2 adds a runtime flag). */
  compliancePolicy: string;
  /** --log_as_json: Envoy's application log in JSON. */
  logAsJson: boolean;
  flags: BootstrapFlags;
}

export interface TemplateParams {
  params: Record<string, unknown>;
  /** Lightstep access token to write before Envoy starts (the template refers to its path). */
  lightstepToken?: { path: string; token: string };
  /** Inputs that were ignored (bad annotations...), each naming its source. */
  problems: string[];
}

/** Istio's extractRuntimeFlags. */
export function runtimeFlags(pc: ProxyConfig, policy: string, stripFragment: boolean): Record<string, unknown> {
  const flags: Record<string, unknown> = {
    "re2.max_program_size.error_level": "32768",
    "envoy.deprecated_features:envoy.config.listener.v3.Listener.hidden_envoy_deprecated_use_original_dst": true,
    "envoy.reloadable_features.http_reject_path_with_fragment": false,
    "envoy.reloadable_features.fixed_heap_use_allocated": true,
    "envoy.reloadable_features.coalesce_lb_rebuilds_on_batch_update": false,
  };
  if (policy === "fips-140-2") flags["envoy.reloadable_features.google_grpc_disable_tls_13"] = true;
  if (!stripFragment) flags["envoy.reloadable_features.http_strip_fragment_from_path_unsafe_if_disabled"] = "false";
  for (const [k, v] of Object.entries(pc.runtimeValues ?? {})) {
    if (v === "") delete flags[k];
    else flags[k] = v === "true" ? true : v === "false" ? false : v;
  }
  return flags;
}

const goAtoi = (s: string | undefined): number | undefined => (s !== undefined && /^[+-]?\d+$/.test(s) ? Number(s) : undefined);

/** connectionSettings.globalDownstreamConnectionLimit > proxyMetadata > runtime flag > MaxInt32. */
export function globalDownstreamMaxConnections(pc: ProxyConfig): number {
  const cs = pc.connectionSettings as { globalDownstreamConnectionLimit?: number | string } | undefined;
  const limit = Number(cs?.globalDownstreamConnectionLimit ?? 0);
  if (limit > 0) return limit;
  const meta = goAtoi(pc.proxyMetadata?.ISTIO_META_GLOBAL_DOWNSTREAM_MAX_CONNECTIONS);
  if (meta !== undefined) return meta;
  return goAtoi(pc.runtimeValues?.["overload.global_downstream_max_connections"]) ?? 2_147_483_647;
}

/** The service cluster name (node.cluster; datadog service name). */
export function serviceCluster(pc: ProxyConfig, labels: Record<string, string>, namespace: string, workloadName: string): string {
  const orDefault = (name: string) => {
    if (name !== "" && name !== "istio-proxy") return name;
    const app = labels.app ?? labels["app.kubernetes.io/name"] ?? labels["service.istio.io/canonical-name"];
    if (app !== undefined) return `${app}.${namespace}`;
    if (workloadName !== "") return `${workloadName}.${namespace}`;
    if (namespace !== "") return `istio-proxy.${namespace}`;
    return "istio-proxy";
  };
  if (typeof pc.serviceCluster === "string" && pc.tracingServiceName === undefined) return orDefault(pc.serviceCluster);
  const canonical = () => labels["service.istio.io/canonical-name"] ?? labels["app.kubernetes.io/name"] ?? labels.app ?? (workloadName || "istio-proxy");
  switch (pc.tracingServiceName) {
    case "CANONICAL_NAME_ONLY":
      return orDefault(canonical());
    case "CANONICAL_NAME_AND_NAMESPACE":
      return namespace !== "" ? `${canonical()}.${namespace}` : orDefault(canonical());
    default:
      return orDefault("istio-proxy");
  }
}

function ipFamily(ips: string[], dualStack: boolean): Record<string, unknown> {
  const allV4 = ips.every((ip) => !isIPv6(ip.split("%")[0]!));
  const allV6 = ips.every((ip) => !isIPv4(ip));
  const v4 = { localhost: "127.0.0.1", wildcard: "0.0.0.0", dns_lookup_family: "V4_ONLY" };
  if (allV4) return v4;
  if (allV6) return { localhost: "::1", wildcard: "::", dns_lookup_family: "V6_ONLY" };
  if (!dualStack) return v4;
  const first = ips[0] ?? "";
  const firstV6 = isIPv6(first) && !/^fe[89ab]/i.test(first);
  return firstV6
    ? { localhost: "::1", additional_localhost: "127.0.0.1", wildcard: "::", additional_wildcard: "0.0.0.0", dns_lookup_family: "ALL", dual_stack: true }
    : { localhost: "127.0.0.1", additional_localhost: "::1", wildcard: "0.0.0.0", additional_wildcard: "::", dns_lookup_family: "ALL", dual_stack: true };
}

export function toTemplateParams(inp: ParamsInputs): TemplateParams {
  const { node, flags } = inp;
  const meta = node.typed;
  const pc = meta.PROXY_CONFIG as ProxyConfig;
  const problems: string[] = [];
  const p: Record<string, unknown> = {};
  const setIf = (name: string, v: unknown) => {
    if (v !== undefined && v !== null && v !== "" && v !== 0 && v !== false) p[name] = v;
  };
  const address = (name: string, addr: string | undefined) => {
    if (addr) p[name] = addressJson(name, addr, flags.hostIp);
  };

  let xdsType = flags.deltaXds ? "DELTA_GRPC" : "GRPC";
  let discovery = meta.METADATA_DISCOVERY === true;
  if (node.id.startsWith("waypoint~")) {
    xdsType = "DELTA_GRPC";
    discovery = true;
  }
  if (discovery && xdsType === "GRPC") {
    problems.push("metadata discovery disabled: not supported on SotW xDS (ISTIO_DELTA_XDS=false)");
    discovery = false;
  }
  p.nodeID = node.id;
  p.nodeType = node.id.split("~")[0];
  p.pilot_SAN = sanMatchers((meta.PILOT_SAN as string[] | undefined) ?? []);
  setIf("outlier_log_path", meta.OUTLIER_LOG_PATH);
  setIf("custom_file_path", "file-credential" in node.raw ? FILE_CREDENTIAL_SOCKET : "");
  p.log_json = inp.logAsJson;
  p.discovery_host = (pc.discoveryAddress ?? "").split(":")[0];
  p.metadata = metadataStruct(meta, node.xdsRootCert, node.raw);
  p.xds_type = xdsType;
  p.metadata_discovery = discovery;
  p.metrics_localhost_access_only = pc.proxyMetadata?.METRICS_LOCALHOST_ACCESS_ONLY === "true";
  setIf("secure_metrics_port", meta.ENVOY_SECURE_METRICS_PORT);
  setIf("secure_merged_metrics_port", meta.ENVOY_SECURE_MERGED_METRICS_PORT);
  const platformMeta = (meta.PLATFORM_METADATA as Record<string, string> | undefined) ?? {};
  if ("gcp_project_number" in platformMeta) p.gcp_project_number = platformMeta.gcp_project_number;
  const sts = goAtoi(meta.STS_PORT as string | undefined);
  if (sts !== undefined && sts > 0) {
    p.sts = true;
    p.sts_port = sts;
    if ("gcp_project" in platformMeta) p.gcp_project_id = platformMeta.gcp_project;
  }
  p.workload_identity_socket_file = meta.WORKLOAD_IDENTITY_SOCKET_FILE ?? "";

  // getNodeMetadataOptions
  setIf("region", node.locality.region);
  setIf("zone", node.locality.zone);
  setIf("sub_zone", node.locality.subZone);
  Object.assign(
    p,
    statsParams(
      {
        proxyConfig: pc,
        annotations: (meta.ANNOTATIONS as Record<string, string> | undefined) ?? {},
        instanceIps: (meta.INSTANCE_IPS as string[] | undefined) ?? [],
        exitOnZeroActiveConnections: meta.EXIT_ON_ZERO_ACTIVE_CONNECTIONS === true,
      },
      problems,
    ),
  );
  p.meta_json_str = goJsonMarshal(mergedMetadata(node));
  p.runtime_flags = goJsonMarshal(runtimeFlags(pc, inp.compliancePolicy, flags.stripFragment));
  p.envoy_status_port = meta.ENVOY_STATUS_PORT ?? 0;
  p.envoy_prometheus_port = meta.ENVOY_PROMETHEUS_PORT ?? 0;
  p.global_downstream_max_connections = globalDownstreamMaxConnections(pc);

  Object.assign(p, ipFamily((meta.INSTANCE_IPS as string[] | undefined) ?? [], flags.dualStack));
  if (flags.envoyStatusPortEnableProxyProtocol) p.envoy_status_port_enable_proxy_protocol = true;
  if (meta.ENABLE_SELF_DISCOVERY === true) p.enable_self_discovery = true;

  // getProxyConfigOptions
  const labels = (meta.LABELS as Record<string, string> | undefined) ?? {};
  p.config = proxyConfigStruct(pc);
  p.cluster = serviceCluster(pc, labels, (meta.NAMESPACE as string) ?? "", (meta.WORKLOAD_NAME as string) ?? "");
  address("pilot_grpc_address", pc.discoveryAddress);
  p.discovery_address = pc.discoveryAddress ?? "";
  address("statsd", pc.statsdUdpAddress);
  p.xds_root_cert = node.xdsRootCert;
  const tlsMeta = {
    clientCertChain: meta.TLS_CLIENT_CERT_CHAIN as string | undefined,
    clientKey: meta.TLS_CLIENT_KEY as string | undefined,
    clientRootCert: meta.TLS_CLIENT_ROOT_CERT as string | undefined,
  };
  let lightstepToken: TemplateParams["lightstepToken"];
  const tracing = pc.tracing as Record<string, Record<string, unknown> | undefined> | undefined;
  if (tracing) {
    let isH2 = false;
    if (tracing.zipkin) address("zipkin", tracing.zipkin.address as string | undefined);
    else if (tracing.lightstep) {
      isH2 = true;
      const path = posix.join(pc.configPath ?? "", LIGHTSTEP_TOKEN_FILE);
      lightstepToken = { path, token: String(tracing.lightstep.accessToken ?? "") };
      address("lightstep", tracing.lightstep.address as string | undefined);
      p.lightstepToken = path;
    } else if (tracing.datadog) address("datadog", tracing.datadog.address as string | undefined);
    else if (tracing.stackdriver) {
      if (!("gcp_project" in platformMeta)) throw new BootstrapError("unable to process Stackdriver tracer: missing GCP Project", "tracing.stackdriver");
      const sd = tracing.stackdriver;
      Object.assign(p, {
        stackdriver: true,
        stackdriverProjectID: platformMeta.gcp_project,
        stackdriverDebug: sd.debug === true,
        stackdriverMaxAnnotations: Number(sd.maxNumberOfAnnotations ?? 200),
        stackdriverMaxAttributes: Number(sd.maxNumberOfAttributes ?? 200),
        stackdriverMaxEvents: Number(sd.maxNumberOfMessageEvents ?? 200),
      });
    }
    if (tracing.tlsSettings) p.tracing_tls = transportSocketJson(tracing.tlsSettings as ClientTlsSettings, "tracer", tlsMeta, isH2);
  }
  const service = (prefix: string, svc: Record<string, unknown> | undefined, sni: string) => {
    if (!svc || !svc.address) return;
    address(`${prefix}_address`, svc.address as string);
    if (svc.tlsSettings) p[`${prefix}_tls`] = transportSocketJson(svc.tlsSettings as ClientTlsSettings, sni, tlsMeta, true);
    if (svc.tcpKeepalive) p[`${prefix}_tcp_keepalive`] = keepaliveJson(svc.tcpKeepalive as TcpKeepalive);
  };
  service("envoy_metrics_service", pc.envoyMetricsService, "envoy_metrics_service");
  if (!pc.envoyMetricsService?.address && pc.envoyMetricsServiceAddress) address("envoy_metrics_service_address", pc.envoyMetricsServiceAddress as string);
  p.envoy_metrics_stats_compression = pc.statsCompression === undefined || pc.statsCompression === null ? true : pc.statsCompression === true;
  service("envoy_accesslog_service", pc.envoyAccessLogService, "envoy_accesslog_service");
  if (typeof node.raw.LOAD_STATS_CONFIG_JSON === "string") p.load_stats_config_json_str = node.raw.LOAD_STATS_CONFIG_JSON;
  return { params: p, lightstepToken, problems };
}
