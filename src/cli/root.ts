// Command dispatch for the one binary: `agent <command> ...`, with pilot-agent's command names.
// Global logging flags may stand before or after the command (cobra persistent flags); unknown
// flags on the root are accepted with a warning, as Istio allows them for backward compatibility.
// `-h`/`--help` on any command, `help <command>` and `completion <shell>` behave as cobra's do.
// Each command's module is imported only when that command runs: `agent proxy` does not pay for
// evaluating iptables', wait's or version's code (and their dependencies) before it starts.

import { parseFlags, FlagError } from "../lib/flags.ts";
import { GLOBAL_FLAGS, logSinkFromFlags } from "./global.ts";
import { CliError, type CliIO } from "./io.ts";
import { COMMAND_TREE, PROGRAM, SHELLS, commandHelp, findCommand, rootHelp, type Shell } from "./commands.ts";

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
    const known = command === undefined ? undefined : findCommand(command);
    if (known && known.name !== "help" && wantsHelp(rest)) {
      io.out(await helpFor(known.name, positionalsOf(rest)));
      return 0;
    }
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
      case "status":
        return await (await import("./status.ts")).runStatus(stripGlobals(rest, io), io);
      case "debug":
        return await (await import("./debug.ts")).runDebug(stripGlobals(rest, io), io);
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
      case "completion":
        return await runCompletion(stripGlobals(rest, io), io);
      case "doctor":
        return await (await import("./doctor.ts")).runDoctorCommand(stripGlobals(rest, io), io);
      case "help": {
        const topic = positionalsOf(rest);
        if (topic.length === 0) {
          io.out(rootHelp());
          return 0;
        }
        const cmd = findCommand(topic[0]!);
        if (!cmd) {
          // cobra: "Unknown help topic %#q" of the args, then the root's usage.
          io.out(`Unknown help topic [${topic.map((t) => "`" + t + "`").join(" ")}]\n`);
          io.out(rootHelp().split("\n").slice(2).join("\n"));
          return 0;
        }
        io.out(await helpFor(cmd.name, topic.slice(1)));
        return 0;
      }
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

/** `-h`, `--help` or `--help=true` before any `--`. */
function wantsHelp(args: readonly string[]): boolean {
  for (const a of args) {
    if (a === "--") return false;
    if (a === "-h" || a === "--help" || a === "--help=true") return true;
  }
  return false;
}

/** Words that are not flags (global flags' values skipped), before any `--`. */
function positionalsOf(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") break;
    if (a.startsWith("-")) {
      if (VALUE_GLOBALS.has(a)) i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

/** The `--help` text of a command (`completion <shell>` has its own). */
async function helpFor(name: string, args: readonly string[]): Promise<string> {
  if (name === "proxy") return (await import("./proxy.ts")).proxyHelp();
  if (name === "iptables") return (await import("./iptables.ts")).IPTABLES_HELP;
  if (name === "completion" && (SHELLS as readonly string[]).includes(args[0] ?? "")) {
    return (await import("./completion.ts")).shellHelp(args[0] as Shell);
  }
  return commandHelp(findCommand(name)!);
}

/** `completion <shell> [--no-descriptions]`; without a shell, the command's help. */
async function runCompletion(argv: string[], io: CliIO): Promise<number> {
  const { values, positionals } = parseFlags(argv, [{ name: "no-descriptions", type: "bool", default: false, usage: "" }]);
  if (positionals.length === 0) {
    io.out(await commandHelp(COMMAND_TREE.find((c) => c.name === "completion")!));
    return 0;
  }
  const shell = positionals[0]!;
  if (!(SHELLS as readonly string[]).includes(shell)) throw new CliError(`unknown command "${shell}" for "${PROGRAM} completion"`);
  if (positionals.length > 1) throw new CliError(`accepts 0 arg(s), received ${positionals.length - 1}`);
  const { completionScript, completionTable } = await import("./completion.ts");
  io.out(completionScript(shell as Shell, await completionTable(), !values["no-descriptions"]));
  return 0;
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
