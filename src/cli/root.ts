// Command dispatch for the one binary: `agent <command> ...`, with pilot-agent's command names.
// Global logging flags may stand before or after the command (cobra persistent flags); unknown
// flags on the root are accepted with a warning, as Istio allows them for backward compatibility.
// Each command's module is imported only when that command runs: `agent proxy` does not pay for
// evaluating iptables', wait's or version's code (and their dependencies) before it starts.

import { formatFlagHelp, parseFlags, FlagError } from "./flags.ts";
import { GLOBAL_FLAGS, logSinkFromFlags } from "./global.ts";
import { CliError, type CliIO } from "./io.ts";

export const COMMANDS: Record<string, string> = {
  proxy: "XDS proxy agent",
  iptables: "Set up iptables rules for Istio Sidecar (alias: istio-iptables)",
  request: "Makes an HTTP request to the Envoy admin API or the agent's status port",
  wait: "Waits until the Envoy proxy is ready",
  version: "Prints out build version information",
};

export function rootHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    "Istio Pilot agent runs in the sidecar or gateway container and bootstraps Envoy.",
    "",
    "Usage:",
    "  agent [command]",
    "",
    "Available Commands:",
    ...Object.entries(COMMANDS).map(([c, d]) => `  ${c.padEnd(width)}  ${d}`),
    "",
    "Flags:",
    formatFlagHelp([...GLOBAL_FLAGS, { name: "help", short: "h", type: "bool", default: false, usage: "help for agent" }]),
    "",
    'Use "agent [command] --help" for more information about a command.',
    "",
  ].join("\n");
}

const VALUE_GLOBALS = new Set(GLOBAL_FLAGS.filter((f) => f.type !== "bool").map((f) => `--${f.name}`));

/** Split argv into the command name and the rest (global flags stay in the rest). */
export function splitCommand(argv: readonly string[]): { command?: string; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") break;
    if (a.startsWith("-")) {
      if (VALUE_GLOBALS.has(a)) i++;
      continue;
    }
    return { command: a, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] };
  }
  return { rest: [...argv] };
}

export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  const { command, rest } = splitCommand(argv);
  try {
    switch (command) {
      case "proxy": {
        const { runProxy } = await import("./proxy.ts");
        return await runProxy(rest, io);
      }
      case "iptables":
      case "istio-iptables": {
        const { runIptables } = await import("./iptables.ts");
        return await runIptables(rest, io.env, { stdout: io.out, stderr: io.err });
      }
      case "request": {
        const { runRequest } = await import("./request.ts");
        return await runRequest(stripGlobals(rest, io), io);
      }
      case "wait": {
        const { WAIT_FLAGS, runWait } = await import("./wait.ts");
        const parsed = parseFlags(rest, [...GLOBAL_FLAGS, ...WAIT_FLAGS], { allowUnknown: true });
        const log = logSinkFromFlags(parsed, { stdout: io.out, stderr: io.err }).logger();
        return await runWait(stripGlobals(rest, io), io, log);
      }
      case "version": {
        const { runVersion } = await import("./version.ts");
        return runVersion(stripGlobals(rest, io), io);
      }
      case "help":
      case undefined: {
        const parsed = parseFlags(rest, [...GLOBAL_FLAGS, { name: "help", short: "h", type: "bool", default: false, usage: "" }], { allowUnknown: true });
        for (const u of parsed.unknown) io.err(`warning: unknown flag ignored: ${u}\n`);
        io.out(rootHelp());
        return 0;
      }
      default:
        throw new CliError(`unknown command "${command}" for "agent"\nRun 'agent --help' for usage.`);
    }
  } catch (e) {
    if (e instanceof CliError || e instanceof FlagError) {
      io.err(`Error: ${e.message}\n`);
      return e instanceof CliError ? e.exitCode : 255;
    }
    throw e;
  }
}

/** Remove global logging flags (validated) so a subcommand parses only its own flags. */
function stripGlobals(argv: string[], io: CliIO): string[] {
  const out: string[] = [];
  const names = new Set(GLOBAL_FLAGS.map((f) => f.name));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--([^=]+)(=.*)?$/.exec(a);
    if (m && names.has(m[1]!)) {
      if (!m[2] && VALUE_GLOBALS.has(`--${m[1]}`)) i++;
      continue;
    }
    out.push(a);
  }
  void io;
  return out;
}
