// Compiles src/main.ts into self-contained executables with `bun build --compile`:
//   dist/agent                  this machine's platform (always)
//   dist/agent-linux-arm64      } cross targets, built when Bun can fetch their runtimes from the
//   dist/agent-linux-x64-musl   } npm registry; a failure there is a warning, not an error
// Flags: --host (only dist/agent), --no-bytecode, --outdir DIR.
// The package version and git commit are baked in with --define (see src/version.ts).

import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const args = new Set(process.argv.slice(2));
const outdirArg = process.argv.indexOf("--outdir");
const outdir = outdirArg > 0 ? process.argv[outdirArg + 1]! : "dist";
const bytecode = !args.has("--no-bytecode");
const hostOnly = args.has("--host") || process.env.AGENT_BUILD_HOST_ONLY === "1";

function git(...cmd: string[]): string | undefined {
  const r = Bun.spawnSync(["git", ...cmd], { stderr: "ignore" });
  return r.exitCode === 0 ? r.stdout.toString().trim() : undefined;
}

const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
const commit = git("rev-parse", "--short=12", "HEAD") ?? "unknown";
const dirty = (git("status", "--porcelain", "--untracked-files=no") ?? "") !== "";
const defines = {
  AGENT_BUILD_VERSION: JSON.stringify(pkg.version),
  AGENT_BUILD_COMMIT: JSON.stringify(commit),
  AGENT_BUILD_STATUS: JSON.stringify(dirty ? "Modified" : "Clean"),
};

function compile(outfile: string, target?: string): boolean {
  const cmd = [process.execPath, "build", "src/main.ts", "--compile", "--minify", "--sourcemap=none", "--outfile", outfile];
  if (bytecode) cmd.push("--bytecode");
  if (target) cmd.push(`--target=${target}`);
  for (const [k, v] of Object.entries(defines)) cmd.push("--define", `${k}=${v}`);
  const t0 = performance.now();
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) {
    process.stderr.write(`build ${outfile}${target ? ` (${target})` : ""} failed:\n${r.stderr.toString()}${r.stdout.toString()}\n`);
    return false;
  }
  console.log(`built ${outfile}${target ? ` (${target})` : ""} in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  return true;
}

mkdirSync(outdir, { recursive: true });
if (!compile(join(outdir, "agent"))) process.exit(1);
if (!hostOnly) {
  for (const [name, target] of [
    ["agent-linux-arm64", "bun-linux-arm64"],
    ["agent-linux-x64-musl", "bun-linux-x64-musl"],
  ] as const) {
    if (!compile(join(outdir, name), target)) console.warn(`warning: ${name} not built (target runtime unavailable?)`);
  }
}
if (!existsSync(join(outdir, "agent"))) process.exit(1);
