// One configuration fuzz case (which surface, its command line, environment and files) and what
// `agent proxy` does with it before it serves: the same steps as src/cli/proxy.ts and the start
// path's parsers (flags, log options, the config loader with the real downward-API parser, app
// probers, GOMEMLIMIT, node metadata, the logged effective config), in-process.
//
// A verdict is "accepted", "rejected" (a known error class whose message names the input) or a
// crash: any other exception, or a rejection that does not name what was wrong.

import { parseFlags, FlagError } from "../../src/lib/flags.ts";
import { GLOBAL_FLAGS, logSinkFromFlags } from "../../src/cli/global.ts";
import { PROXY_FLAGS } from "../../src/cli/proxy.ts";
import { CliError } from "../../src/cli/io.ts";
import { ANNOTATIONS_PATH, ConfigError, LABELS_PATH, loadAgentConfig } from "../../src/config/load.ts";
import type { ProxyFlags } from "../../src/config/agentconfig.ts";
import { parseDownwardApi } from "../../src/config/downward.ts";
import { buildNodeMetadata } from "../../src/config/metadata.ts";
import { proxyConfigYaml } from "../../src/config/redact.ts";
import { nodeInputsFromConfig } from "../../src/bootstrap/index.ts";
import { parseAppProbers } from "../../src/status/appprobers.ts";
import { parseScrapeConfig } from "../../src/status/scrapeconfig.ts";
import { MemLimitError, parseGoMemLimit } from "../../src/lib/memlimit.ts";
import { argvFor, downwardText, envFor, ENV_NAMES, FIELDS, meshConfigText, probersText, proxyConfigText, type Rand } from "./config-inputs.ts";

export const SURFACES = ["PROXY_CONFIG", "mesh config", "annotations", "labels", "probers", "flags", "env"] as const;
export type Surface = (typeof SURFACES)[number];

export const MESH_PATH = "./etc/istio/config/mesh";
const HELP = { name: "help", short: "h", type: "bool" as const, default: false, usage: "" };
export const ALL_FLAGS = [...GLOBAL_FLAGS, ...PROXY_FLAGS, HELP];

export interface ConfigCase {
  surface: Surface;
  argv: string[];
  env: Record<string, string>;
  /** Files by the path the agent reads them at (relative to its root). */
  files: Record<string, string>;
  /** Words one of which a rejection must contain: the input's name. */
  names: string[];
}

export type Verdict = { kind: "accepted" } | { kind: "help" } | { kind: "rejected"; message: string } | { kind: "crash"; error: string };

/**
 * For runs of the compiled binary: no fields or variables that name paths the agent writes (as
 * root, outside its sandbox), bind fixed ports (shared with other tests) or change its mode.
 */
const UNSAFE_FIELDS = new Set(["configPath", "binaryPath", "customConfigFile", "proxyBootstrapTemplatePath", "statusPort", "proxyAdminPort"]);
const UNSAFE_ENV = new Set([
  "DISABLE_ENVOY",
  "CA_PROVIDER",
  "FILE_MOUNTED_CERTS",
  "CLOUD_PLATFORM",
  "GCE_METADATA_HOST",
  "GCP_METADATA",
  "OUTPUT_CERTS",
  "GRPC_XDS_BOOTSTRAP",
  "LOCAL_XDS_PATH",
  "LOCAL_CA_DIR",
  "PROV_CERT",
  "ISTIO_BOOTSTRAP",
  "ISTIO_BOOTSTRAP_OVERRIDE",
  "DNS_PROXY_ADDR",
  "ISTIO_META_DNS_CAPTURE",
  "ISTIO_META_ENABLE_DNS_SERVER",
  "IPTABLES_TRACE_LOGGING",
  "WORKLOAD_IDENTITY_SOCKET_FILE",
  "CREDENTIAL_FETCHER_TYPE",
  "PROXY_CONFIG",
]);
const BINARY_FIELDS = FIELDS.filter((f) => !UNSAFE_FIELDS.has(f));
const BINARY_ENV = ENV_NAMES.filter((n) => !UNSAFE_ENV.has(n));
const BINARY_FLAGS = ALL_FLAGS.filter(
  (f) => !["log_target", "meshConfig", "templateFile", "localXdsPath", "outlierLogPath", "help", "stsPort"].includes(f.name),
).map((f) => f.name);
/** Text the binary runs must not carry (the same unsafe names, in annotations and mangled text). */
export const BINARY_UNSAFE_TEXT = /status\.sidecar\.istio\.io\/port|status_?port|admin_?port|config_?path|binary_?path|custom_?config|bootstrap_?template/i;

/** A case for `surface`; `binary` keeps it safe to hand to the compiled agent. */
export function makeCase(r: Rand, surface: Surface, binary = false): ConfigCase {
  const fields = binary ? BINARY_FIELDS : FIELDS;
  switch (surface) {
    case "PROXY_CONFIG":
      return { surface, argv: ["sidecar"], env: { PROXY_CONFIG: proxyConfigText(r, fields) }, files: {}, names: ["PROXY_CONFIG"] };
    case "mesh config":
      return { surface, argv: ["sidecar"], env: {}, files: { [MESH_PATH]: meshConfigText(r, fields) }, names: ["mesh config"] };
    case "annotations":
      return { surface, argv: ["sidecar"], env: {}, files: { [ANNOTATIONS_PATH]: downwardText(r, fields) }, names: [ANNOTATIONS_PATH, "annotation "] };
    case "labels":
      return { surface, argv: ["sidecar"], env: {}, files: { [LABELS_PATH]: downwardText(r, fields) }, names: [LABELS_PATH] };
    case "probers":
      return { surface, argv: ["sidecar"], env: { ISTIO_KUBE_APP_PROBERS: probersText(r) }, files: {}, names: ["ISTIO_KUBE_APP_PROBERS"] };
    case "flags": {
      const argv = argvFor(r, binary ? BINARY_FLAGS : ALL_FLAGS.map((f) => f.name));
      return { surface, argv, env: {}, files: {}, names: ["flag", "--", "proxy type", "proxy:"] };
    }
    case "env": {
      const env = envFor(r, binary ? BINARY_ENV : ENV_NAMES);
      return { surface, argv: ["sidecar"], env, files: {}, names: Object.keys(env) };
    }
  }
}

/** Everything `agent proxy` parses before it starts serving, in-process. */
export function loadLikeTheAgent(c: ConfigCase): Verdict {
  try {
    const parsed = parseFlags(c.argv, ALL_FLAGS, { allowUnknown: true });
    if (parsed.values.help) return { kind: "help" };
    logSinkFromFlags(parsed, { stdout: () => {}, stderr: () => {} });
    if (parsed.positionals.length > 1) throw new CliError(`proxy: expected at most one proxy type, got ${parsed.positionals.join(" ")}`);
    const flags = parsed.values as unknown as ProxyFlags;
    const { config } = loadAgentConfig({
      type: parsed.positionals[0] ?? "sidecar",
      flags,
      env: c.env,
      readFile: (p) => c.files[p],
      parseDownward: parseDownwardApi,
      interfaces: { lo: [{ address: "127.0.0.1", family: "IPv4", internal: true }], eth0: [{ address: "10.1.2.3", family: "IPv4", internal: false }] },
      cpuCount: 2,
      root: "/",
      uid: 1337,
      version: "fuzz",
    });
    const probers = parseAppProbers(config.env.ISTIO_KUBE_APP_PROBERS);
    for (const line of [probers.configError, ...probers.rejected, ...probers.invalid.values()]) {
      if (line !== undefined && !line.startsWith("ISTIO_KUBE_APP_PROBERS"))
        return { kind: "crash", error: `a prober problem that does not name ISTIO_KUBE_APP_PROBERS: ${line}` };
    }
    const scrape = parseScrapeConfig(config.env.ISTIO_PROMETHEUS_ANNOTATIONS, Number(config.proxyConfig.statusPort ?? 15020));
    for (const line of scrape?.problems ?? []) {
      if (!line.startsWith("ISTIO_PROMETHEUS_ANNOTATIONS"))
        return { kind: "crash", error: `a scrape problem that does not name ISTIO_PROMETHEUS_ANNOTATIONS: ${line}` };
    }
    try {
      parseGoMemLimit(config.env.GOMEMLIMIT);
    } catch (e) {
      if (!(e instanceof MemLimitError) || !e.message.includes("GOMEMLIMIT")) throw e;
    }
    JSON.stringify(buildNodeMetadata(nodeInputsFromConfig(config)));
    proxyConfigYaml(config.proxyConfig);
    // What the status server refuses at start (src/status/server.ts), as the agent exits on it.
    const fatal = [...(probers.configError ? [probers.configError] : []), ...probers.rejected, ...(scrape?.problems ?? [])];
    if (fatal.length) return { kind: "rejected", message: fatal.join("; ") };
    return { kind: "accepted" };
  } catch (e) {
    const err = e as Error;
    if (!(e instanceof ConfigError || e instanceof FlagError || e instanceof CliError)) return { kind: "crash", error: err?.stack ?? String(e) };
    if (!c.names.some((n) => err.message.includes(n)))
      return { kind: "crash", error: `a rejection that names none of ${JSON.stringify(c.names)}: ${err.message}` };
    return { kind: "rejected", message: err.message };
  }
}

/** The case as one reproducible line (JSON), for failure messages. */
export function describeCase(c: ConfigCase): string {
  const clip = (s: string) => (s.length > 2000 ? `${s.slice(0, 2000)}…(${s.length} chars)` : s);
  return JSON.stringify({
    surface: c.surface,
    argv: c.argv,
    env: Object.fromEntries(Object.entries(c.env).map(([k, v]) => [k, clip(v)])),
    files: Object.fromEntries(Object.entries(c.files).map(([k, v]) => [k, clip(v)])),
  });
}
