// `agent proxy [sidecar|router|waypoint]`: pilot-agent's main command. Assembles the configuration
// exactly as pilot-agent does, logs it once, builds the composition root and runs until
// SIGTERM/SIGINT (a second signal skips the graceful wait).

import { lookup } from "node:dns/promises";
import { parseFlags, formatFlagHelp, FlagError, type FlagSpec } from "../lib/flags.ts";
import { GLOBAL_FLAGS, logSinkFromFlags } from "./global.ts";
import { PROXY_FLAGS } from "./proxyflags.ts";
import { CliError, type CliIO } from "./io.ts";
import { PROXY_TYPES } from "../config/load.ts";
import { loadConfigUnder, realHost, type ConfigHost } from "./loadconfig.ts";
import type { ProxyFlags } from "../config/agentconfig.ts";
import { PROXY_ENV } from "../config/env.ts";
import { formatEnvHelp, type EnvDecl } from "../config/envdecl.ts";
import { proxyConfigYaml } from "../config/redact.ts";
import { resolveStatsdAddress, type IpLookup } from "../config/statsd.ts";
import { buildInfo } from "../version.ts";
import { Agent } from "../agent.ts";
import { ComponentError } from "../lib/component.ts";

export { PROXY_FLAGS };

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

export type ProxyHost = ConfigHost;

export { realHost };

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

  const loaded = loadConfigUnder(root, parsed.positionals[0] ?? "sidecar", flags, io.env, host, info.istioVersion);
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
    // The binary starts with the JIT reluctant (build.ts: --compile-jit-policy), so the run-once
    // start-up code stays in the interpreter; from here on the relay's hot paths compile as usual.
    Bun.unsafe.setJITPolicy(1);
    const code = await agent.done;
    log.info(`agent exit code ${code}`);
    return code;
  } finally {
    clearInterval(keepAlive);
    unsubscribe?.();
  }
}

/** The system resolver (getaddrinfo, as Go's default resolver with cgo), every address. */
const systemLookup: IpLookup = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family }));
