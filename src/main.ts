// Entry point: the only place that reads process.argv, process.env and process signals.

// Only the Envoy launcher's code is imported statically: a copy of this binary runs it between the
// agent's spawn of Envoy and Envoy's first instruction, so it must not evaluate the CLI's module
// graph (about half of that copy's time). Everything else is imported once the command is known.
import type { CliIO } from "./cli/io.ts";
import { ENVOY_EXEC_COMMAND, runEnvoyExec } from "./envoy/envoyexec.ts";

// Invoked as `istio-iptables` or `pilot-agent` through a symlink: behave like that binary.
// In a compiled binary argv0 is the name it was invoked by (a symlink's own name).
const self = (process.argv0 ?? "").split("/").pop() ?? "";
const argv = process.argv.slice(2);
const effective = self === "istio-iptables" ? ["istio-iptables", ...argv] : argv;

// The agent started as the Envoy launcher (src/envoy/deathlink.ts): become Envoy, nothing else.
if (effective[0] === ENVOY_EXEC_COMMAND) process.exit(runEnvoyExec(effective.slice(1), (s) => process.stderr.write(s)));

const io: CliIO = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  env: { ...process.env },
  cwd: process.cwd(),
  // How to run this same program again: the compiled binary alone, or Bun plus the script.
  selfCommand: (process.argv[1] ?? "").startsWith("/$bunfs/") || !process.argv[1] ? [process.execPath] : [process.execPath, process.argv[1]],
  onSignal(handler) {
    const term = () => handler("SIGTERM");
    const int = () => handler("SIGINT");
    process.on("SIGTERM", term);
    process.on("SIGINT", int);
    return () => {
      process.off("SIGTERM", term);
      process.off("SIGINT", int);
    };
  },
};

// A copy of the agent converting a local xDS file for it (src/local/converter.ts; the literal is
// LOCAL_XDS_CONVERT_COMMAND there, not imported: nothing else may load before the launcher above):
// only the conversion's code, none of the CLI.
const command =
  effective[0] === "__local-xds-convert"
    ? import("./local/convertchild.ts").then(({ runConvertChild }) =>
        runConvertChild(effective.slice(1), { input: Bun.stdin.stream(), write: (b) => Bun.write(Bun.stdout, b), err: io.err }),
      )
    : import("./cli/root.ts").then(({ runCli }) => runCli(effective, io));

// (No top-level await: the compiled binary's bytecode is a CommonJS bundle.)
command.then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`Error: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exit(255);
  },
);
