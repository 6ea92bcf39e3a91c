// Envoy's command line, built exactly as Istio's pilot-agent builds it (pkg/envoy/proxy.go `args`
// and `NewProxy`): a pure function of the inputs, so the order can be compared element by element
// with Istio's expectations (TestEnvoyArgs). Hot restart (beyond Istio) swaps
// `--disable-hot-restart` for `--restart-epoch N --parent-shutdown-time-s S`.

import { isIP } from "node:net";

export interface EnvoyArgsOptions {
  /** `-c`: the rendered envoy-rev.json, or ProxyConfig.customConfigFile as-is. */
  bootstrapPath: string;
  /** ProxyConfig.drainDuration in ms; passed as whole seconds (`--drain-time-s`). */
  drainDurationMs: number;
  /** The proxy's IPs: `--local-address-ip-version v6` iff none is IPv4. */
  nodeIps: readonly string[];
  /** ProxyConfig.fileFlushInterval in ms; unset = 1000. */
  fileFlushIntervalMs?: number;
  /** ProxyConfig.fileFlushMinSizeKb; only passed when > 0. */
  fileFlushMinSizeKb?: number;
  /** `--proxyLogLevel`: bare level -> `-l`, `comp:level` items -> `--component-log-level`. */
  proxyLogLevel: string;
  /** `--proxyComponentLogLevel`: used only when proxyLogLevel has no `comp:level` item. */
  proxyComponentLogLevel: string;
  /** ENVOY_SKIP_DEPRECATED_LOGS. */
  skipDeprecatedLogs: boolean;
  /** ISTIO_ENVOY_ENABLE_CORE_DUMP. */
  enableCoreDump: boolean;
  /** JSON text of the ISTIO_BOOTSTRAP_OVERRIDE file (see `bootstrapOverrideToJSON`). */
  configYaml?: string;
  /** Effective ProxyConfig.concurrency; only passed when > 0. */
  concurrency: number;
  /** Hot restart (ENVOY_HOT_RESTART): this epoch and the parent's shutdown time. */
  hotRestart?: { epoch: number; parentShutdownS: number };
}

export interface SplitLogLevel {
  level: string;
  components: string[];
  /** Items with more than one `:`; Istio drops them with a warning. */
  dropped: string[];
}

/** Istio's splitComponentLog: the last bare item is the level, `a:b` items are components. */
export function splitComponentLog(spec: string): SplitLogLevel {
  let level = "";
  const components: string[] = [];
  const dropped: string[] = [];
  for (const item of spec.split(",")) {
    const parts = item.split(":");
    if (parts.length === 1) level = parts[0]!;
    else if (parts.length === 2) components.push(item);
    else dropped.push(item);
  }
  return { level, components, dropped };
}

/** Istio's network.AllIPv6: true unless some (parseable) address is IPv4. */
export function allIPv6(ips: readonly string[]): boolean {
  return !ips.some((ip) => isIP(ip) === 4);
}

/** The flags Istio appends after the fixed ones (its `extraArgs`). */
function extraArgs(o: EnvoyArgsOptions): string[] {
  const out: string[] = [];
  const { level, components } = splitComponentLog(o.proxyLogLevel);
  if (level !== "") out.push("-l", level);
  if (components.length > 0) out.push("--component-log-level", components.join(","));
  else if (o.proxyComponentLogLevel !== "") out.push("--component-log-level", o.proxyComponentLogLevel);
  if (o.skipDeprecatedLogs) out.push("--skip-deprecated-logs");
  if (o.enableCoreDump) out.push("--enable-core-dump");
  return out;
}

export function envoyArgs(o: EnvoyArgsOptions): string[] {
  const flush = o.fileFlushIntervalMs === undefined ? "1000" : String(Math.trunc(o.fileFlushIntervalMs));
  const args = [
    "-c",
    o.bootstrapPath,
    "--drain-time-s",
    String(Math.trunc(o.drainDurationMs / 1000)),
    "--drain-strategy",
    "immediate",
    "--local-address-ip-version",
    allIPv6(o.nodeIps) ? "v6" : "v4",
    "--file-flush-interval-msec",
    flush,
  ];
  if (o.hotRestart) {
    args.push("--restart-epoch", String(o.hotRestart.epoch), "--parent-shutdown-time-s", String(o.hotRestart.parentShutdownS));
  } else {
    args.push("--disable-hot-restart");
  }
  args.push("--allow-unknown-static-fields");
  if ((o.fileFlushMinSizeKb ?? 0) > 0) args.push("--file-flush-min-size-kb", String(o.fileFlushMinSizeKb));
  args.push(...extraArgs(o));
  if (o.configYaml !== undefined && o.configYaml !== "") args.push("--config-yaml", o.configYaml);
  if (o.concurrency > 0) args.push("--concurrency", String(Math.trunc(o.concurrency)));
  return args;
}

/** Parent shutdown time for hot restart: the drain time plus 15 s (Istio 1.x used 45 s / 60 s). */
export function parentShutdownSeconds(drainDurationMs: number): number {
  return Math.trunc(drainDurationMs / 1000) + 15;
}

/** Istio's FIPS cipher restriction for Envoy's google_grpc client. */
export const FIPS_GRPC_SSL_CIPHER_SUITES =
  "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384";

/** Envoy's environment: the agent's, plus GRPC_SSL_CIPHER_SUITES under a FIPS compliance policy. */
export function envoyEnv(env: Readonly<Record<string, string | undefined>>, compliancePolicy: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  if (compliancePolicy === "fips-140-2" || compliancePolicy === "fips-140-3") out.GRPC_SSL_CIPHER_SUITES = FIPS_GRPC_SSL_CIPHER_SUITES;
  return out;
}

/** Istio runs Envoy as 1337 when the agent is root and the DNS proxy binds port 53. */
export function envoyRunsAsProxyUser(agentUid: number, dnsProxyAddr: string): boolean {
  return agentUid === 0 && dnsProxyAddr.endsWith(":53");
}

/** The command line for the log: the bootstrap override can carry credentials (tracer tokens), so only its size is shown. */
export function argsForLog(args: readonly string[]): string[] {
  return args.map((a, i) => (args[i - 1] === "--config-yaml" ? `<${a.length} bytes>` : a));
}
