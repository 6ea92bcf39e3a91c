// `agent proxy [sidecar|router|waypoint]`: pilot-agent's main command. Assembles the configuration
// exactly as pilot-agent does, logs it once, builds the composition root and runs until
// SIGTERM/SIGINT (a second signal skips the graceful wait).

import { lookup } from "node:dns/promises";
import { existsSync } from "node:fs";
import { networkInterfaces, cpus } from "node:os";
import { resolve } from "node:path";
import { parseFlags, formatFlagHelp, FlagError, type FlagSpec } from "../lib/flags.ts";
import { GLOBAL_FLAGS, logSinkFromFlags } from "./global.ts";
import { CliError, type CliIO } from "./io.ts";
import { loadAgentConfig, ConfigError, PROXY_TYPES } from "../config/load.ts";
import type { ProxyFlags } from "../config/agentconfig.ts";
import { PROXY_ENV } from "../config/env.ts";
import { formatEnvHelp, type EnvDecl } from "../config/envdecl.ts";
import { proxyConfigYaml } from "../config/redact.ts";
import { parseDownwardApi } from "../config/downward.ts";
import { resolveStatsdAddress, type IpLookup } from "../config/statsd.ts";
import { buildInfo } from "../version.ts";
import { Agent } from "../agent.ts";
import { ComponentError } from "../lib/component.ts";
import type { InterfaceTable } from "../config/node.ts";
import { readBoundedTextSync } from "../lib/boundedfile.ts";

export const PROXY_FLAGS: FlagSpec[] = [
  { name: "domain", type: "string", default: "", usage: "DNS domain suffix. If not provided uses ${POD_NAMESPACE}.svc.cluster.local" },
  {
    name: "meshConfig",
    type: "string",
    default: "./etc/istio/config/mesh",
    usage:
      "File name for Istio mesh configuration. If not specified, a default mesh will be used. This may be overridden by PROXY_CONFIG environment variable or proxy.istio.io/config annotation.",
  },
  { name: "stsPort", type: "int", default: 0, usage: "HTTP Port on which to serve Security Token Service (STS). If zero, STS service will not be provided." },
  {
    name: "tokenManagerPlugin",
    type: "string",
    default: "",
    usage: "Token provider specific plugin name (empty: GoogleTokenExchange, for the --stsPort service).",
  },
  { name: "serviceCluster", type: "string", default: "istio-proxy", usage: "Service cluster (deprecated; ProxyConfig.serviceCluster wins)" },
  {
    name: "proxyLogLevel",
    type: "string",
    default: "warning",
    usage:
      "The log level used to start the Envoy proxy (choose from {trace, debug, info, warning, error, critical, off}). Level may also include one or more scopes, such as 'info,misc:error,upstream:debug'",
  },
  {
    name: "proxyComponentLogLevel",
    type: "string",
    default: "",
    usage: "The component log level used to start the Envoy proxy. Deprecated, use proxyLogLevel instead",
  },
  { name: "concurrency", type: "int", default: 0, usage: "number of worker threads to run (legacy; prefer ProxyConfig.concurrency)" },
  { name: "templateFile", type: "string", default: "", usage: "Go template bootstrap config" },
  { name: "outlierLogPath", type: "string", default: "", usage: "The log path for outlier detection" },
  { name: "profiling", type: "bool", default: true, usage: "Enable profiling via web interface host:port/debug/pprof/." },
  {
    name: "localXdsPath",
    type: "string",
    default: "",
    usage: "Beyond Istio: serve xDS from this YAML/JSON file instead of dialing istiod (local mode)",
    env: "LOCAL_XDS_PATH",
  },
];

export function proxyHelp(): string {
  return [
    "XDS proxy agent",
    "",
    "Usage:",
    `  agent proxy [${PROXY_TYPES.join("|")}] [flags]`,
    "",
    "Flags:",
    formatFlagHelp([...PROXY_FLAGS, { name: "help", short: "h", type: "bool", default: false, usage: "help for proxy" }]),
    "",
    "Global Flags:",
    formatFlagHelp(GLOBAL_FLAGS),
    "",
    "Environment variables:",
    formatEnvHelp(Object.values(PROXY_ENV) as EnvDecl[]),
    "",
  ].join("\n");
}

/**
 * Istio's `FLAG: --name="value"` start-up lines (pkg/cmd PrintFlags): every flag of the command,
 * inherited ones included, sorted by name, with pflag's text for the value.
 */
export function flagLines(values: Record<string, unknown>, specs: readonly FlagSpec[]): string[] {
  return [...specs]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((f) => {
      const v = values[f.name];
      const text = Array.isArray(v) ? `[${v.join(",")}]` : String(v);
      return `FLAG: --${f.name}=${JSON.stringify(text)}`;
    });
}

export interface ProxyHost {
  interfaces(): InterfaceTable;
  cpuCount(): number;
  uid(): number;
}

export const realHost: ProxyHost = {
  interfaces: () => networkInterfaces() as InterfaceTable,
  cpuCount: () => cpus().length,
  uid: () => (typeof process.getuid === "function" ? process.getuid() : 0),
};

export async function runProxy(argv: string[], io: CliIO, host: ProxyHost = realHost): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(argv, [...GLOBAL_FLAGS, ...PROXY_FLAGS, { name: "help", short: "h", type: "bool", default: false, usage: "" }], { allowUnknown: true });
  } catch (e) {
    if (e instanceof FlagError) throw new CliError(e.message);
    throw e;
  }
  if (parsed.values.help) {
    io.out(proxyHelp());
    return 0;
  }
  const sink = logSinkFromFlags(parsed, { stdout: io.out, stderr: io.err });
  const log = sink.logger();
  for (const line of flagLines(parsed.values, [...GLOBAL_FLAGS, ...PROXY_FLAGS, { name: "help", short: "h", type: "bool", default: false, usage: "" }]))
    log.info(line);
  for (const u of parsed.unknown) log.warn(`unknown flag ignored (accepted for backward compatibility): ${u}`);
  if (parsed.positionals.length > 1) throw new CliError(`proxy: expected at most one proxy type, got ${parsed.positionals.join(" ")}`);
  const flags = parsed.values as unknown as ProxyFlags;
  const info = buildInfo();
  const root = io.cwd;

  let loaded;
  try {
    loaded = loadAgentConfig({
      type: parsed.positionals[0] ?? "sidecar",
      flags,
      env: flags.localXdsPath ? { ...io.env, LOCAL_XDS_PATH: flags.localXdsPath } : io.env,
      readFile: (p, maxBytes) => {
        const abs = resolve(root, p);
        if (!existsSync(abs)) return undefined;
        return readBoundedTextSync(abs, maxBytes);
      },
      parseDownward: parseDownwardApi,
      interfaces: host.interfaces(),
      cpuCount: host.cpuCount(),
      root,
      uid: host.uid(),
      version: info.istioVersion,
    });
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(e.message);
    throw e;
  }
  const { config } = loaded;
  log.info(`Version ${info.version}-${info.revision}-${info.status} (${info.runtime}; Istio ${info.istioVersion} at ${info.istioCommit})`);
  log.debug(`configuration loaded ${(process.uptime() * 1000).toFixed(1)}ms after process start`);
  for (const n of loaded.notes) log.info(n);
  for (const w of loaded.warnings) log.warn(w);
  const statsd = config.proxyConfig.statsdUdpAddress;
  if (statsd) {
    const r = await resolveStatsdAddress(statsd, systemLookup);
    log[r.line.level](r.line.text);
    config.proxyConfig = { ...config.proxyConfig, statsdUdpAddress: r.address };
    if (r.address === undefined) delete config.proxyConfig.statsdUdpAddress;
  }
  log.info(`Effective config: ${proxyConfigYaml(config.proxyConfig).replace(/\n/g, "\n  ")}`);
  log.info(`Proxy role`, {
    ips: config.node.ips.join(","),
    type: config.proxyType,
    id: config.node.id,
    domain: config.node.domain,
    nodeId: config.node.nodeId,
  });

  const agent = new Agent(config, {
    sink,
    logAsJson: Boolean(parsed.values.log_as_json),
    uptimeMs: () => process.uptime() * 1000,
    ...(io.selfCommand ? { selfCommand: io.selfCommand } : {}),
  });
  const stop = new AbortController();
  let signals = 0;
  const unsubscribe = io.onSignal?.((sig) => {
    signals++;
    if (signals === 1) {
      log.info(`Received ${sig}, shutting down gracefully`);
      stop.abort();
    } else {
      log.warn(`Received ${sig} again, shutting down immediately`);
      agent.forceStop();
    }
  });
  // Nothing else may hold the event loop open (DISABLE_ENVOY, no servers): stay up until done.
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    // A start failure has been logged, naming the component; `done` then carries the exit code.
    await agent.start(stop.signal).catch((e: unknown) => {
      if (!(e instanceof ComponentError)) throw e;
    });
    return await agent.done;
  } finally {
    clearInterval(keepAlive);
    unsubscribe?.();
  }
}

/** The system resolver (getaddrinfo, as Go's default resolver with cgo), every address. */
const systemLookup: IpLookup = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family }));
