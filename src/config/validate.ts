// Validation of the effective ProxyConfig, with Istio's rules
// (pkg/config/validation/agent ValidateMeshConfigProxyConfig) and type checks Istio gets from
// protobuf JSON parsing. Each problem names the field and the layer that wrote it:
//   PROXY_CONFIG: drainDuration: "-5s" is negative
// Values are normalised on the way: integer fields become numbers, durations become protobuf
// JSON strings ("45s", "0.500s").

import { isIP } from "node:net";
import { DurationError, formatProtoDuration, parseAnyDuration } from "../lib/duration.ts";
import type { ProxyConfig } from "./proxyconfig.ts";

export interface ValidationResult {
  config: ProxyConfig;
  errors: string[];
  warnings: string[];
}

const INT_FIELDS = ["proxyAdminPort", "statusPort", "statNameLength", "fileFlushMinSizeKb"] as const;
const STRING_FIELDS = [
  "configPath",
  "binaryPath",
  "serviceCluster",
  "discoveryAddress",
  "zipkinAddress",
  "statsdUdpAddress",
  "customConfigFile",
  "proxyBootstrapTemplatePath",
  "meshId",
  "caCertificatePem",
  "sidecarStatsTemplate",
] as const;
const DURATION_FIELDS = ["drainDuration", "terminationDrainDuration", "fileFlushInterval", "parentShutdownDuration", "discoveryRefreshDelay"] as const;

export function validateProxyConfig(input: ProxyConfig, sources: Record<string, string>): ValidationResult {
  const config: ProxyConfig = structuredClone(input);
  const errors: string[] = [];
  const warnings: string[] = [];
  const where = (field: string) => sources[field.split(".")[0]!] ?? "default";
  const err = (field: string, msg: string) => errors.push(`${where(field)}: ${field}: ${msg}`);

  for (const f of STRING_FIELDS) {
    const v = config[f];
    if (v !== undefined && v !== null && typeof v !== "string") err(f, `${JSON.stringify(v)} is not a string`);
  }
  for (const f of INT_FIELDS) {
    const v = config[f];
    if (v === undefined || v === null) continue;
    const n = toInt(v);
    if (n === undefined) err(f, `${JSON.stringify(v)} is not an integer`);
    else config[f] = n;
  }
  if (config.concurrency !== undefined && config.concurrency !== null) {
    const n = toInt(config.concurrency);
    if (n === undefined) err("concurrency", `${JSON.stringify(config.concurrency)} is not an integer`);
    else if (n < 0) err("concurrency", `${n} must not be negative`);
    else config.concurrency = n;
  }
  for (const f of DURATION_FIELDS) {
    const v = config[f];
    if (v === undefined || v === null) continue;
    const ms = toDuration(v);
    if (ms instanceof DurationError) err(f, `${JSON.stringify(v)} is not a duration (want e.g. "45s" or "1m30s")`);
    else if (ms < 0) err(f, `${JSON.stringify(v)} is negative`);
    else if (!(ms <= MAX_PROTO_DURATION_MS)) err(f, `${JSON.stringify(v)} is out of range (at most ${MAX_PROTO_DURATION_MS / 1000}s)`);
    else config[f] = formatProtoDuration(ms);
  }

  if (!config.configPath) err("configPath", "config path must be set");
  if (!config.binaryPath) err("binaryPath", "binary path must be set");
  if (config.serviceCluster === undefined && config.tracingServiceName === undefined) {
    err("serviceCluster", "oneof service cluster or tracing service name must be specified");
  } else if (config.serviceCluster === "") {
    err("serviceCluster", "service cluster must be specified");
  }

  const drain = typeof config.drainDuration === "string" ? toDuration(config.drainDuration) : undefined;
  if (typeof drain === "number" && drain >= 0) {
    if (drain < 1) err("drainDuration", `${JSON.stringify(input.drainDuration)}: invalid drain duration: duration must be greater than 1ms`);
    else if (drain % 1000 !== 0) err("drainDuration", `${JSON.stringify(input.drainDuration)}: drain time only supports durations to seconds precision`);
  }

  if (!config.discoveryAddress) err("discoveryAddress", "discovery address must be set to the proxy discovery service");
  else addressProblem(config.discoveryAddress, (m) => err("discoveryAddress", `invalid discovery address: ${m}`));
  if (config.statsdUdpAddress)
    addressProblem(config.statsdUdpAddress, (m) => err("statsdUdpAddress", `invalid statsd udp address ${JSON.stringify(config.statsdUdpAddress)}: ${m}`));
  for (const svc of ["envoyMetricsService", "envoyAccessLogService"] as const) {
    const addr = (config[svc] as { address?: unknown } | undefined)?.address;
    if (typeof addr === "string" && addr) addressProblem(addr, (m) => err(`${svc}.address`, `invalid address ${JSON.stringify(addr)}: ${m}`));
  }
  const tracing = config.tracing as Record<string, { address?: unknown } | undefined> | undefined;
  for (const tracer of ["zipkin", "lightstep", "datadog"]) {
    const addr = tracing?.[tracer]?.address;
    // As Istio's collector validation: zipkin and datadog addresses may start with the pod's
    // $(HOST_IP) (expanded later), checked as 127.0.0.1; lightstep's may not.
    const checked = typeof addr === "string" && tracer !== "lightstep" ? addr.replace("$(HOST_IP)", "127.0.0.1") : addr;
    if (typeof checked === "string" && checked) addressProblem(checked, (m) => err(`tracing.${tracer}.address`, `invalid ${tracer} config: ${m}`));
  }

  for (const f of ["proxyAdminPort", "statusPort"] as const) {
    const v = config[f];
    if (typeof v === "number" && (v < 1 || v > 65535)) err(f, `port number ${v} must be in the range 1..65535`);
  }
  const auth: unknown = config.controlPlaneAuthPolicy;
  if (auth !== undefined) {
    const normalised = auth === 0 || auth === "0" ? "NONE" : auth === 1 || auth === "1" ? "MUTUAL_TLS" : auth;
    if (normalised !== "NONE" && normalised !== "MUTUAL_TLS")
      err("controlPlaneAuthPolicy", `unrecognized control plane auth policy ${JSON.stringify(auth)} (want NONE or MUTUAL_TLS)`);
    else config.controlPlaneAuthPolicy = normalised as string;
  }
  const mode = config.interceptionMode;
  if (mode !== undefined && !["REDIRECT", "TPROXY", "NONE"].includes(String(mode))) {
    err("interceptionMode", `${JSON.stringify(mode)} is not one of REDIRECT, TPROXY, NONE`);
  }
  if (config.extraStatTags !== undefined && (!Array.isArray(config.extraStatTags) || config.extraStatTags.some((t) => typeof t !== "string"))) {
    err("extraStatTags", "must be a list of strings");
  }
  if (config.privateKeyProvider)
    validatePrivateKeyProvider(config.privateKeyProvider, (m) => err("privateKeyProvider", `invalid private key provider configuration: ${m}`));
  if (config.proxyMetadata && "ISTIO_META_DNS_AUTO_ALLOCATE" in config.proxyMetadata) {
    warnings.push(`${where("proxyMetadata")}: proxyMetadata: 'ISTIO_META_DNS_AUTO_ALLOCATE' is deprecated; use DNS auto-allocation v2`);
  }
  return { config, errors, warnings };
}

function toInt(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isInteger(v) ? v : undefined;
  if (typeof v === "string" && /^-?\d+$/.test(v.trim())) return Number(v);
  if (v && typeof v === "object" && "value" in v) return toInt((v as { value: unknown }).value);
  return undefined;
}

/** google.protobuf.Duration's range: ±10,000 years (315,576,000,000 s). */
const MAX_PROTO_DURATION_MS = 315_576_000_000_000;

function toDuration(v: unknown): number | DurationError {
  if (typeof v === "number") return v * 1000; // a bare number in YAML: seconds
  if (typeof v !== "string") return new DurationError("not a string");
  try {
    return parseAnyDuration(v);
  } catch (e) {
    return e as DurationError;
  }
}

/** Istio's ValidateProxyAddress: host:port with a valid port and a DNS name or an IP address. */
export function addressProblem(addr: string, report: (msg: string) => void): void {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):([^:]*)$/.exec(addr);
  if (!m) return report(`unable to split ${JSON.stringify(addr)}: missing port in address`);
  const host = m[1] ?? m[2] ?? "";
  const port = m[3]!;
  if (!/^\d+$/.test(port)) return report(`port (${port}) is not a number`);
  const p = Number(port);
  if (p < 1 || p > 65535) return report(`port number ${p} must be in the range 1..65535`);
  if (!isFqdn(host) && isIP(host) === 0) report(`${JSON.stringify(host)} is not a valid hostname or an IP address`);
}

/**
 * Istio's ValidateFQDN: at most 255 characters, a top-level label that is not a number (Go's
 * strconv.Atoi: an int64 with an optional sign), then every label a DNS-1123 label (upper case
 * allowed); the last label may be empty (`istio.io.`).
 */
function isFqdn(host: string): boolean {
  if (host.length === 0 || host.length > 255) return false;
  const labels = host.split(".");
  const tld = labels[labels.length - 1]!;
  if (/^[+-]?\d+$/.test(tld) && BigInt(tld) >= -(2n ** 63n) && BigInt(tld) < 2n ** 63n) return false;
  return labels.every((l, i) => (i === labels.length - 1 && l === "") || /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/i.test(l));
}

function validatePrivateKeyProvider(pkp: Record<string, unknown>, report: (msg: string) => void): void {
  const kind = pkp.cryptomb ? "cryptomb" : pkp.qat ? "qat" : undefined;
  if (!kind) return report("unknown private key provider");
  const conf = pkp[kind] as { pollDelay?: unknown };
  if (conf.pollDelay === undefined) return report("pollDelay is required");
  const d = toDuration(conf.pollDelay);
  if (d instanceof DurationError || !(Math.abs(d) <= MAX_PROTO_DURATION_MS)) return report(`pollDelay ${JSON.stringify(conf.pollDelay)} is not a duration`);
  if (d === 0) report("pollDelay must be non zero");
}
