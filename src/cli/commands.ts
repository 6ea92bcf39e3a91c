// The command tree as cobra would present it: names, one-line descriptions, usage lines and each
// command's own flags. Used for `--help`/`-h` on every command, `help <command>`, the root help
// and the shell completion scripts. Commands' code is not imported here (only their flag lists),
// so rendering help stays cheap.

import { formatFlagHelp, type FlagSpec } from "../lib/flags.ts";
import { GLOBAL_FLAGS } from "./global.ts";

export const PROGRAM = "agent";

export interface CommandInfo {
  name: string;
  short: string;
  /** Shown at the top of `--help` instead of `short`. */
  long?: string;
  /** The usage line after the program name, e.g. `request <method> <path> [<body>]`. */
  use: string;
  aliases?: string[];
  /** Positional words the shell may complete (proxy types, shells). */
  words?: readonly string[];
  /** Flags of the command itself (the global logging flags are added separately). */
  flags(): Promise<FlagSpec[]> | FlagSpec[];
  /** Whether the global logging flags apply (cobra's inherited persistent flags). */
  inheritsGlobals: boolean;
}

export const SHELLS = ["bash", "fish", "powershell", "zsh"] as const;
export type Shell = (typeof SHELLS)[number];

export const HELP_FLAG = (name: string): FlagSpec => ({ name: "help", short: "h", type: "bool", default: false, usage: `help for ${name}` });

/** Every command, sorted by name as cobra lists them. */
export const COMMAND_TREE: readonly CommandInfo[] = [
  {
    name: "completion",
    short: "Generate the autocompletion script for the specified shell",
    long: `Generate the autocompletion script for ${PROGRAM} for the specified shell.\nSee each sub-command's help for details on how to use the generated script.`,
    use: "completion [bash|fish|powershell|zsh]",
    words: SHELLS,
    flags: () => [{ name: "no-descriptions", type: "bool", default: false, usage: "disable completion descriptions" }],
    inheritsGlobals: true,
  },
  {
    name: "debug",
    short: "Prints the agent's own state or log levels from its status port",
    long: "Prints the agent's own state (config_dump) or its log levels (logging) from its status port on localhost.\nGive logging a <scope>:<level>,... spec (the syntax of --log_output_level) to set levels.",
    use: "debug config_dump|logging [<scope>:<level>,...]",
    words: ["config_dump", "logging"],
    flags: async () => (await import("./debug.ts")).DEBUG_FLAGS,
    inheritsGlobals: true,
  },
  {
    name: "doctor",
    short: "Checks what the agent would start with and reports each mistake with its fix",
    use: "doctor [sidecar|router]",
    flags: async () => [...(await import("./proxyflags.ts")).PROXY_FLAGS, ...(await import("./doctor.ts")).DOCTOR_FLAGS],
    inheritsGlobals: true,
  },
  {
    name: "help",
    short: "Help about any command",
    long: `Help provides help for any command in the application.\nSimply type ${PROGRAM} help [path to command] for full details.`,
    use: "help [command]",
    flags: () => [],
    inheritsGlobals: true,
  },
  {
    name: "iptables",
    short: "Set up iptables rules for Istio Sidecar",
    long: "istio-iptables is responsible for setting up port forwarding for Istio Sidecar.",
    use: "iptables",
    aliases: ["istio-iptables"],
    flags: async () => {
      const { CAPTURE_FLAGS, LOG_FLAGS } = await import("../iptables/flags.ts");
      return [...CAPTURE_FLAGS.map((c) => c.spec), ...LOG_FLAGS.filter((f) => f.name !== "help")];
    },
    inheritsGlobals: false,
  },
  {
    name: "proxy",
    short: "XDS proxy agent",
    use: "proxy [sidecar|router|waypoint|ztunnel|agentgateway]",
    words: ["sidecar", "router", "waypoint", "ztunnel", "agentgateway"],
    flags: async () => (await import("./proxy.ts")).PROXY_FLAGS,
    inheritsGlobals: true,
  },
  {
    name: "request",
    short: "Makes an HTTP request to the Envoy admin API",
    use: "request <method> <path> [<body>]",
    words: ["GET", "POST"],
    flags: async () => (await import("./request.ts")).REQUEST_FLAGS,
    inheritsGlobals: true,
  },
  {
    name: "status",
    short: "Shows the agent's identity, istiod connection, xDS streams and readiness",
    use: "status",
    flags: async () => (await import("./status.ts")).STATUS_FLAGS,
    inheritsGlobals: true,
  },
  {
    name: "version",
    short: "Prints out build version information",
    use: "version",
    flags: async () => (await import("./version.ts")).VERSION_FLAGS,
    inheritsGlobals: true,
  },
  {
    name: "wait",
    short: "Waits until the Envoy proxy is ready",
    use: "wait",
    flags: async () => (await import("./wait.ts")).WAIT_FLAGS,
    inheritsGlobals: true,
  },
];

/** The command called `name` (or one of its aliases). */
export function findCommand(name: string): CommandInfo | undefined {
  return COMMAND_TREE.find((c) => c.name === name || c.aliases?.includes(name));
}

/** cobra's help layout: description, usage, aliases, flags, global flags. */
export async function commandHelp(cmd: CommandInfo): Promise<string> {
  const own = [...(await cmd.flags()), HELP_FLAG(cmd.name)];
  const lines = [cmd.long ?? cmd.short, "", "Usage:", `  ${PROGRAM} ${cmd.use}${own.length ? " [flags]" : ""}`];
  if (cmd.aliases?.length) lines.push("", "Aliases:", `  ${[cmd.name, ...cmd.aliases].join(", ")}`);
  lines.push("", "Flags:", formatFlagHelp(own));
  if (cmd.inheritsGlobals) lines.push("", "Global Flags:", formatFlagHelp(GLOBAL_FLAGS));
  lines.push("");
  return lines.join("\n");
}

/** The root command's help: every command with its one-line description. */
export function rootHelp(): string {
  // cobra pads command names to at least 11 columns, then one space.
  const width = Math.max(11, ...COMMAND_TREE.map((c) => c.name.length));
  return [
    "Istio Pilot agent runs in the sidecar or gateway container and bootstraps Envoy.",
    "",
    "Usage:",
    `  ${PROGRAM} [command]`,
    "",
    "Available Commands:",
    ...COMMAND_TREE.map((c) => `  ${c.name.padEnd(width)} ${c.short}`),
    "",
    "Flags:",
    formatFlagHelp([...GLOBAL_FLAGS, HELP_FLAG(PROGRAM)]),
    "",
    `Use "${PROGRAM} [command] --help" for more information about a command.`,
    "",
  ].join("\n");
}
