// Value converters of Istio's bootstrap options (pkg/bootstrap/option/convert.go): addresses to
// Envoy socket-address JSON, client TLS settings to an UpstreamTlsContext transport socket, TCP
// keepalive, the pilot SAN matcher list. All pure; HOST_IP is passed in.

import { goJsonMarshal } from "./gotemplate/json.ts";
import { parseAnyDuration } from "../lib/duration.ts";
import { BootstrapError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

/** net.SplitHostPort. */
export function splitHostPort(hostport: string): [string, string] {
  const fail = (why: string) => {
    throw new BootstrapError(`address ${hostport}: ${why}`);
  };
  const i = hostport.lastIndexOf(":");
  if (i < 0) fail("missing port in address");
  let host: string;
  if (hostport.startsWith("[")) {
    const end = hostport.indexOf("]");
    if (end < 0) fail("missing ']' in address");
    if (end + 1 === hostport.length) fail("missing port in address");
    if (end + 1 !== i) fail(hostport[end + 1] === ":" ? "too many colons in address" : "missing port in address");
    host = hostport.slice(1, end);
  } else {
    host = hostport.slice(0, i);
    if (host.includes(":")) fail("too many colons in address");
    if (host.includes("[") || host.includes("]")) fail("unexpected '[' or ']' in address");
  }
  return [host, hostport.slice(i + 1)];
}

/** `{"address": "<host>", "port_value": <port>}`; a host of `$(HOST_IP)` becomes HOST_IP when set. */
export function addressJson(option: string, addr: string, hostIp: string): string {
  let host: string;
  let port: string;
  try {
    [host, port] = splitHostPort(addr);
  } catch (e) {
    throw new BootstrapError(`unable to parse ${option} address "${addr}": ${errorMessage(e)}`, option, { cause: e });
  }
  if (host === "$(HOST_IP)" && hostIp !== "") host = hostIp;
  return `{"address": "${host}", "port_value": ${port}}`;
}

/** `[{"exact":"<san>"},...]` */
export function sanMatchers(sans: string[]): string {
  return "[" + sans.map((s) => `{"exact":"${s}"}`).join(",") + "]";
}

function sdsSecretConfig(name: string, withInitialFetchTimeout: boolean): Record<string, unknown> {
  const sds: Record<string, unknown> = {
    api_config_source: {
      api_type: "GRPC",
      grpc_services: [{ envoy_grpc: { cluster_name: "sds-grpc" } }],
      set_node_on_first_message_only: true,
      transport_api_version: "V3",
    },
    resource_api_version: "V3",
  };
  if (withInitialFetchTimeout) sds.initial_fetch_timeout = "0s";
  return { name, sds_config: sds };
}

/** SDS config for a resource name; `default` and `ROOTCA` carry initial_fetch_timeout 0s as in Istio. */
function sdsFor(name: string): Record<string, unknown> | undefined {
  if (name === "") return undefined;
  return sdsSecretConfig(name, name === "default" || name === "ROOTCA");
}

export interface ClientTlsSettings {
  mode?: string;
  clientCertificate?: string;
  privateKey?: string;
  caCertificates?: string;
  subjectAltNames?: string[];
  sni?: string;
  [extra: string]: unknown;
}

export interface TlsOverrides {
  /** Node metadata TLS_CLIENT_CERT_CHAIN / TLS_CLIENT_KEY / TLS_CLIENT_ROOT_CERT. */
  clientCertChain?: string;
  clientKey?: string;
  clientRootCert?: string;
}

/**
 * The `transport_socket` JSON for an upstream TLS connection (tracing, metrics and access-log
 * services), or "" when the mode is DISABLE/unknown (the template then leaves it out).
 */
export function transportSocketJson(tls: ClientTlsSettings, sniName: string, meta: TlsOverrides, isH2: boolean): string {
  const ctx: Record<string, unknown> = {};
  const common: Record<string, unknown> = {};
  const sans = (tls.subjectAltNames ?? []).map((s) => ({ exact: s }));
  const validation = (rootName: string) => {
    const dvc: Record<string, unknown> = sans.length ? { match_subject_alt_names: sans } : {};
    const out: Record<string, unknown> = { default_validation_context: dvc };
    const sds = sdsFor(rootName);
    if (sds) out.validation_context_sds_secret_config = sds;
    return out;
  };
  const or = (a: string | undefined, b: string | undefined) => (a ? a : (b ?? ""));
  switch (tls.mode) {
    case "SIMPLE": {
      const ca = or(meta.clientRootCert, tls.caCertificates);
      common.combined_validation_context = validation(ca ? `file-root:${ca}` : "");
      common.alpn_protocols = ["h2"];
      break;
    }
    case "MUTUAL": {
      const cert = or(meta.clientCertChain, tls.clientCertificate);
      const key = or(meta.clientKey, tls.privateKey);
      const ca = or(meta.clientRootCert, tls.caCertificates);
      if (cert && key) common.tls_certificate_sds_secret_configs = [sdsFor(`file-cert:${cert}~${key}`)];
      common.combined_validation_context = validation(ca ? `file-root:${ca}` : "");
      common.alpn_protocols = ["h2"];
      break;
    }
    case "ISTIO_MUTUAL":
      common.tls_certificate_sds_secret_configs = [sdsFor("default")];
      common.combined_validation_context = validation("ROOTCA");
      common.alpn_protocols = ["istio", "h2"];
      break;
    default:
      return "";
  }
  if (!isH2) delete common.alpn_protocols;
  ctx["@type"] = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
  ctx.common_tls_context = common;
  const sni = tls.sni || (tls.mode === "ISTIO_MUTUAL" ? sniName : "");
  if (sni) ctx.sni = sni;
  return `{"name":"envoy.transport_sockets.tls","typed_config":${goJsonMarshal(ctx)}}`;
}

export interface TcpKeepalive {
  probes?: number;
  time?: string;
  interval?: string;
}

/**
 * `upstream_connection_options` JSON. Istio emits UInt32Value wrappers as `{"value":N}`, which
 * Envoy's JSON parser rejects; we write the plain numbers protobuf JSON expects.
 */
export function keepaliveJson(ka: TcpKeepalive): string {
  const secs = (d: string | undefined) => (d ? Math.trunc(parseAnyDuration(d) / 1000) : 0);
  const tcp: Record<string, number> = {};
  if ((ka.probes ?? 0) > 0) tcp.keepalive_probes = ka.probes!;
  if (secs(ka.time) > 0) tcp.keepalive_time = secs(ka.time);
  if (secs(ka.interval) > 0) tcp.keepalive_interval = secs(ka.interval);
  const ordered = ["keepalive_probes", "keepalive_time", "keepalive_interval"].filter((k) => k in tcp).map((k) => `"${k}":${tcp[k]}`);
  return `{"tcp_keepalive":{${ordered.join(",")}}}`;
}
