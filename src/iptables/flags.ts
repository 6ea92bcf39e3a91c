// The `iptables` command's flags and environment variables, named exactly as istio-iptables
// (tools/istio-iptables/pkg/cmd/root.go). Each flag-bound variable is the flag's long name upper
// cased with `-` -> `_`; it is applied when the flag is registered, then Istio's extra alias
// variables (applied after, so an alias that is set wins), then the command line.
// An empty value of a boolean variable is ignored (as pflag's failed Set is in Istio); any other
// value that does not parse is an error naming the variable.

import { declare as d, type EnvDecl, type EnvMap } from "../config/envdecl.ts";
import { FlagError, parseFlags, parseGoBool, type FlagSpec } from "../lib/flags.ts";
import { parseGoDuration } from "../lib/duration.ts";
import { CaptureConfigError, defaultCaptureConfig, type CaptureConfig, type EnvOnly } from "./config.ts";

type Field = keyof CaptureConfig;

interface CaptureFlag {
  spec: FlagSpec;
  field: Field;
  /** Istio's extra env var read after the bound one (flag.AdditionalEnv). */
  aliasEnv?: string;
}

const envName = (flag: string) => flag.toUpperCase().replace(/-/g, "_");

function f(
  name: string,
  short: string | undefined,
  type: "string" | "bool" | "int" | "duration",
  def: string | boolean | number,
  field: Field,
  usage: string,
  opts: { noEnv?: boolean; alias?: string; hidden?: boolean } = {},
): CaptureFlag {
  const spec: FlagSpec = { name, type, default: def, usage, hidden: opts.hidden };
  if (short) spec.short = short;
  if (!opts.noEnv) spec.env = envName(name);
  return { spec, field, aliasEnv: opts.alias };
}

const D = defaultCaptureConfig();

/** The capture flags, in Istio's registration order. */
export const CAPTURE_FLAGS: readonly CaptureFlag[] = [
  f("envoy-port", "p", "string", D.PROXY_PORT, "PROXY_PORT", "Specify the envoy port to which redirect all TCP traffic.", { noEnv: true }),
  f(
    "inbound-capture-port",
    "z",
    "string",
    D.INBOUND_CAPTURE_PORT,
    "INBOUND_CAPTURE_PORT",
    "Port to which all inbound TCP traffic to the pod/VM should be redirected to.",
  ),
  f("inbound-tunnel-port", "e", "string", D.INBOUND_TUNNEL_PORT, "INBOUND_TUNNEL_PORT", "Specify the istio tunnel port for inbound tcp traffic."),
  f(
    "proxy-uid",
    "u",
    "string",
    "",
    "PROXY_UID",
    "Specify the UID of the user for which the redirection is not applied. Typically, this is the UID of the proxy container. Defaults to the UID of ENVOY_USER, else 1337.",
  ),
  f("proxy-gid", "g", "string", "", "PROXY_GID", "Specify the GID of the user for which the redirection is not applied (same default value as -u param)."),
  f(
    "istio-inbound-interception-mode",
    "m",
    "string",
    "",
    "INBOUND_INTERCEPTION_MODE",
    'The mode used to redirect inbound connections to Envoy, either "REDIRECT" or "TPROXY".',
  ),
  f(
    "istio-inbound-ports",
    "b",
    "string",
    "",
    "INBOUND_PORTS_INCLUDE",
    'Comma separated list of inbound ports for which traffic is to be redirected to Envoy (optional). The wildcard character "*" can be used to configure redirection for all ports. An empty list will disable.',
  ),
  f(
    "istio-local-exclude-ports",
    "d",
    "string",
    "",
    "INBOUND_PORTS_EXCLUDE",
    'Comma separated list of inbound ports to be excluded from redirection to Envoy (optional). Only applies when all inbound traffic (i.e. "*") is being redirected.',
  ),
  f(
    "istio-exclude-interfaces",
    "c",
    "string",
    "",
    "EXCLUDE_INTERFACES",
    "Comma separated list of NIC (optional). Neither inbound nor outbound traffic will be captured.",
  ),
  f(
    "istio-service-cidr",
    "i",
    "string",
    "",
    "OUTBOUND_IPRANGES_INCLUDE",
    'Comma separated list of IP ranges in CIDR form to redirect to envoy (optional). The wildcard character "*" can be used to redirect all outbound traffic. An empty list will disable all outbound.',
  ),
  f(
    "istio-service-exclude-cidr",
    "x",
    "string",
    "",
    "OUTBOUND_IPRANGES_EXCLUDE",
    'Comma separated list of IP ranges in CIDR form to be excluded from redirection. Only applies when all  outbound traffic (i.e. "*") is being redirected.',
  ),
  f(
    "istio-outbound-ports",
    "q",
    "string",
    "",
    "OUTBOUND_PORTS_INCLUDE",
    "Comma separated list of outbound ports to be explicitly included for redirection to Envoy.",
  ),
  f(
    "istio-local-outbound-ports-exclude",
    "o",
    "string",
    "",
    "OUTBOUND_PORTS_EXCLUDE",
    "Comma separated list of outbound ports to be excluded from redirection to Envoy.",
  ),
  f(
    "kube-virt-interfaces",
    "k",
    "string",
    "",
    "KUBE_VIRT_INTERFACES",
    "Comma separated list of virtual interfaces whose inbound traffic (from VM) will be treated as outbound.",
  ),
  f("istio-inbound-tproxy-mark", "t", "string", D.INBOUND_TPROXY_MARK, "INBOUND_TPROXY_MARK", "Packet mark used for TPROXY inbound capture."),
  f(
    "istio-inbound-tproxy-route-table",
    "r",
    "string",
    D.INBOUND_TPROXY_ROUTE_TABLE,
    "INBOUND_TPROXY_ROUTE_TABLE",
    "Routing table used for TPROXY inbound capture.",
  ),
  f("dry-run", "n", "bool", false, "DRY_RUN", "Do not call any external dependencies like iptables."),
  f("iptables-probe-port", undefined, "int", D.IPTABLES_PROBE_PORT, "IPTABLES_PROBE_PORT", "Set listen port for failure detection."),
  f("probe-timeout", undefined, "duration", D.PROBE_TIMEOUT, "PROBE_TIMEOUT", "Failure detection timeout."),
  f("skip-rule-apply", undefined, "bool", false, "SKIP_RULE_APPLY", "Skip iptables apply."),
  f("run-validation", undefined, "bool", false, "RUN_VALIDATION", "Validate iptables."),
  f("redirect-dns", undefined, "bool", false, "REDIRECT_DNS", "Enable capture of dns traffic by istio-agent.", { alias: "ISTIO_META_DNS_CAPTURE" }),
  f("drop-invalid", undefined, "bool", false, "DROP_INVALID", "Enable invalid drop in the iptables rules.", { alias: "INVALID_DROP" }),
  f("dual-stack", undefined, "bool", false, "DUAL_STACK", "Enable ipv4/ipv6 redirects for dual-stack.", { alias: "ISTIO_DUAL_STACK" }),
  f(
    "capture-all-dns",
    undefined,
    "bool",
    false,
    "CAPTURE_ALL_DNS",
    "Instead of only capturing DNS traffic to DNS server IP, capture all DNS traffic at port 53. This setting is only effective when redirect dns is enabled.",
  ),
  f("network-namespace", undefined, "string", "", "NETWORK_NAMESPACE", "The network namespace that iptables rules should be applied to."),
  f("cni-mode", undefined, "bool", false, "CNI_MODE", "Whether to run as CNI plugin."),
  f("reconcile", undefined, "bool", false, "RECONCILE", "Reconcile pre-existing and incompatible iptables rules instead of failing if drift is detected."),
  f("cleanup-only", undefined, "bool", false, "CLEANUP_ONLY", "Perform a forced cleanup without creating new iptables chains or rules."),
  f("force-apply", undefined, "bool", false, "FORCE_APPLY", "Apply iptables changes even if they appear to already be in place."),
  f(
    "native-nftables",
    undefined,
    "bool",
    false,
    "NATIVE_NFTABLES",
    "Program the capture with native nftables (one nft transaction in the inet family) instead of iptables.",
  ),
  f("force-iptables-binary", undefined, "string", "", "FORCE_IPTABLES_BINARY", "Break glass option to choose which iptables binary to use (legacy or nft)."),
  f(
    "iptables-trace-logging",
    undefined,
    "bool",
    false,
    "TRACE_LOGGING",
    "Beyond Istio: add NFLOG companions (group 1337) to identified rules, read by `agent proxy` with IPTABLES_TRACE_LOGGING=true.",
  ),
];

/** Istio's log flags, accepted by the command (the injector passes --log_output_level). */
export const LOG_FLAGS: readonly FlagSpec[] = [
  {
    name: "log_output_level",
    type: "string",
    default: "default:info",
    usage: "Comma-separated minimum per-scope logging level of messages to output, in the form of <scope>:<level>,<scope>:<level>,...",
  },
  { name: "log_as_json", type: "bool", default: false, usage: "Whether to format output as JSON or in plain console-friendly format" },
  { name: "log_caller", type: "string", default: "", usage: "Comma-separated list of scopes for which to include caller information" },
  {
    name: "log_stacktrace_level",
    type: "string",
    default: "default:none",
    usage: "Comma-separated minimum per-scope logging level at which stack traces are captured",
  },
  {
    name: "log_target",
    type: "stringArray",
    default: ["stdout"],
    usage: "The set of paths where to output the log. This can be any path as well as the special values stdout and stderr",
  },
  { name: "log_rotate", type: "string", default: "", usage: "The path for the optional rotating log file", hidden: true },
  {
    name: "log_rotate_max_age",
    type: "int",
    default: 30,
    usage: "The maximum age in days of a log file beyond which the file is rotated (0 indicates no limit)",
    hidden: true,
  },
  {
    name: "log_rotate_max_backups",
    type: "int",
    default: 1000,
    usage: "The maximum number of log file backups to keep before older files are deleted (0 indicates no limit)",
    hidden: true,
  },
  {
    name: "log_rotate_max_size",
    type: "int",
    default: 104857600,
    usage: "The maximum size in megabytes of a log file beyond which the file is rotated",
    hidden: true,
  },
  // pilot-agent registers klog's verbosity on every command line (pkg/log EnableKlogWithCobra).
  { name: "vklog", type: "int", default: 0, usage: "number for the log level verbosity. Like -v flag. ex: --vklog=9" },
  { name: "help", short: "h", type: "bool", default: false, usage: "help for iptables" },
];

/** Every environment variable the command reads, declared once (flag-bound ones first). */
export const IPTABLES_ENV: readonly EnvDecl[] = [
  ...CAPTURE_FLAGS.filter((c) => c.spec.env).map((c) =>
    d(
      c.spec.env!,
      c.spec.type === "bool" ? "bool" : c.spec.type === "int" ? "int" : c.spec.type === "duration" ? "duration" : "string",
      c.spec.default as never,
      "iptables",
      `Same as --${c.spec.name}`,
      c.aliasEnv ? { alias: c.aliasEnv } : {},
    ),
  ),
  d("ISTIO_OUTBOUND_OWNER_GROUPS", "string", "*", "iptables", 'Comma separated groups (names or GIDs) whose outgoing traffic is redirected; "*" = all'),
  d(
    "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE",
    "string",
    "",
    "iptables",
    'Groups whose outgoing traffic is not redirected; only with ISTIO_OUTBOUND_OWNER_GROUPS="*"',
  ),
  d(
    "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR",
    "string",
    "127.0.0.1/32",
    "iptables",
    "IPv4 loopback CIDR identifying outbound loopback traffic meant for the application",
  ),
  d("ENVOY_USER", "string", "istio-proxy", "iptables", "User whose UID is the default --proxy-uid (1337 when the user does not exist)"),
  d("DRY_RUN_FILE_PATH", "string", "", "iptables", "With --dry-run, also write the transcript to this file"),
  d("IPTABLES_TRACE_LOGGING", "bool", false, "iptables", "Beyond Istio: same as --iptables-trace-logging"),
];

export interface ParsedCommand {
  cfg: CaptureConfig;
  envOnly: EnvOnly;
  log: { outputLevels: string; json: boolean; caller: string; targets: string[] };
  help: boolean;
  dryRunFile: string;
}

function convertEnv(spec: FlagSpec, name: string, raw: string): string | boolean | number | undefined {
  switch (spec.type) {
    case "bool": {
      if (raw === "") return undefined;
      const b = parseGoBool(raw);
      if (b === undefined) throw new CaptureConfigError(`${name}: invalid boolean "${raw}" (for --${spec.name})`);
      return b;
    }
    case "int": {
      if (!/^\d+$/.test(raw) || Number(raw) > 65535) throw new CaptureConfigError(`${name}: invalid port "${raw}" (for --${spec.name})`);
      return Number(raw);
    }
    case "duration":
      try {
        return parseGoDuration(raw);
      } catch {
        throw new CaptureConfigError(`${name}: invalid duration "${raw}" (for --${spec.name})`);
      }
    default:
      return raw;
  }
}

/** argv + env -> config before the host step. Throws FlagError/CaptureConfigError naming the input. */
export function parseCaptureCommand(argv: readonly string[], env: EnvMap): ParsedCommand {
  const cfg = defaultCaptureConfig();
  const set = (field: Field, v: unknown) => ((cfg as unknown as Record<string, unknown>)[field] = v);
  for (const c of CAPTURE_FLAGS) {
    for (const name of [c.spec.env, c.aliasEnv]) {
      const raw = name ? env[name] : undefined;
      if (raw === undefined) continue;
      const v = convertEnv(c.spec, name!, raw);
      if (v !== undefined) set(c.field, v);
    }
  }
  if (!cfg.TRACE_LOGGING && env.IPTABLES_TRACE_LOGGING !== undefined) {
    cfg.TRACE_LOGGING =
      (convertEnv({ name: "iptables-trace-logging", type: "bool", default: false, usage: "" }, "IPTABLES_TRACE_LOGGING", env.IPTABLES_TRACE_LOGGING) as
        boolean | undefined) ?? false;
  }
  const specs = [...CAPTURE_FLAGS.map((c) => c.spec), ...LOG_FLAGS];
  const parsed = parseFlags(argv, specs);
  if (parsed.positionals.length > 0) throw new FlagError(`unexpected argument "${parsed.positionals[0]}" (istio-iptables takes flags only)`);
  for (const c of CAPTURE_FLAGS) {
    if (!parsed.set.has(c.spec.name)) continue;
    const v = parsed.values[c.spec.name];
    if (c.spec.type === "int" && (typeof v !== "number" || v < 0 || v > 65535))
      throw new FlagError(`invalid argument "${v}" for "--${c.spec.name}" flag: want a port 0-65535`);
    set(c.field, v);
  }
  const v = parsed.values;
  return {
    cfg,
    envOnly: {
      ownerGroupsInclude: env.ISTIO_OUTBOUND_OWNER_GROUPS ?? "*",
      ownerGroupsExclude: env.ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE ?? "",
      loopbackCidr: env.ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR ?? "127.0.0.1/32",
      envoyUser: env.ENVOY_USER ?? "istio-proxy",
    },
    log: { outputLevels: v.log_output_level as string, json: v.log_as_json as boolean, caller: v.log_caller as string, targets: v.log_target as string[] },
    help: v.help as boolean,
    dryRunFile: env.DRY_RUN_FILE_PATH ?? "",
  };
}
