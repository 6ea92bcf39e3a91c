// Compiles src/main.ts into self-contained executables with `bun build --compile`:
//   dist/agent                  this machine's platform (always)
//   dist/agent-linux-arm64      } cross targets, built when Bun can fetch their runtimes from the
//   dist/agent-linux-x64-musl   } npm registry; a failure to fetch is a warning, not an error
// Flags:
//   --host              only dist/agent (also AGENT_BUILD_HOST_ONLY=1)
//   --only NAME[,NAME]  only these outputs (agent, agent-linux-arm64, agent-linux-x64-musl)
//   --if-changed        skip an output whose inputs (sources, lockfile, Bun version, target) are
//                       unchanged since it was last built (dist/.NAME.inputs); the tests use this
//   --needs FILE        expectations to check against (default build-needs.json)
//   --no-bytecode, --outdir DIR
// The package version and git commit are baked in with --define (see src/version.ts).
//
// Every Linux binary built is checked against build-needs.json: its ELF interpreter, NEEDED
// libraries and highest GLIBC_ symbol version. A difference fails the build, so a change in what
// a binary needs on its target (README's "Build" section) cannot go unnoticed.

import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readElfNeeds, type ElfNeeds } from "./scripts/elf-needs.ts";
import { buildResponder } from "./native/build-responder.ts";
import { buildLauncher } from "./native/build-launcher.ts";

interface Output {
  name: string;
  /** Bun's --target; undefined builds for this machine. */
  target?: string;
  /** Key in build-needs.json. */
  needsKey?: string;
}

const HOST_KEY = process.platform === "linux" ? `bun-linux-${process.arch === "arm64" ? "arm64" : process.arch}` : undefined;
const OUTPUTS: Output[] = [
  { name: "agent", needsKey: HOST_KEY },
  { name: "agent-linux-arm64", target: "bun-linux-arm64", needsKey: "bun-linux-arm64" },
  { name: "agent-linux-x64-musl", target: "bun-linux-x64-musl", needsKey: "bun-linux-x64-musl" },
];
/** What the compiled binary is made of: a change in any of these makes --if-changed rebuild. */
const INPUT_FILES = ["build.ts", "package.json", "package-lock.json", "bunfig.toml", "tsconfig.json"];
const INPUT_DIRS = ["src", "proto", "native"];

export interface NeedsExpectation {
  interpreter: string;
  needed: string[];
  maxGlibc: string;
}

/** Differences between a binary's needs and the checked-in expectation, one line each; empty when equal. */
export function needsDiff(actual: ElfNeeds, want: NeedsExpectation): string[] {
  const out: string[] = [];
  if (actual.interpreter !== want.interpreter) out.push(`interpreter ${JSON.stringify(actual.interpreter)}, expected ${JSON.stringify(want.interpreter)}`);
  if (actual.needed.join(" ") !== want.needed.join(" ")) out.push(`NEEDED [${actual.needed.join(", ")}], expected [${want.needed.join(", ")}]`);
  if (actual.maxGlibc !== want.maxGlibc) out.push(`highest GLIBC_ version ${JSON.stringify(actual.maxGlibc)}, expected ${JSON.stringify(want.maxGlibc)}`);
  return out;
}

function git(...cmd: string[]): string | undefined {
  const r = Bun.spawnSync(["git", ...cmd], { stderr: "ignore" });
  return r.exitCode === 0 ? r.stdout.toString().trim() : undefined;
}

function listFiles(root: string, dir: string): string[] {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { recursive: true, encoding: "utf8" })
    .map((f) => join(dir, f))
    .filter((f) => statSync(join(root, f)).isFile())
    .sort();
}

/** Digest of everything a build of `target` depends on under `root` (names and contents). */
export function inputsHash(root: string, target: string | undefined, bytecode: boolean, bunVersion: string): string {
  const h = new Bun.CryptoHasher("sha256");
  h.update(`bun ${bunVersion} target ${target ?? "host"} bytecode ${bytecode}\n`);
  for (const f of [...INPUT_FILES.filter((f) => existsSync(join(root, f))), ...INPUT_DIRS.flatMap((d) => listFiles(root, d))]) {
    h.update(`${f}\0`);
    h.update(readFileSync(join(root, f)));
    h.update("\0");
  }
  return h.digest("hex");
}

/** True when `file` exists and `stamp` records exactly `hash` (the inputs it was built from). */
export function upToDate(file: string, stamp: string, hash: string): boolean {
  return existsSync(file) && existsSync(stamp) && readFileSync(stamp, "utf8") === hash;
}

/** The start-up JIT policy baked into the binary (see Bun.unsafe.setJITPolicy); AGENT_JIT_POLICY for measurements. */
const JIT_POLICY = Number(process.env.AGENT_JIT_POLICY ?? 10);

/** Node's name of the architecture a Bun --target builds for (undefined: this machine). */
function targetArch(target: string | undefined): string {
  return target === undefined ? process.arch : target.includes("arm64") || target.includes("aarch64") ? "arm64" : "x64";
}

/**
 * The native code embedded in the binary for `target`, built with gcc: the status port's responder
 * (native/statusresponder.c) and Envoy's launcher (native/envoylauncher.c). A missing compiler is a
 * warning, not an error: that binary then serves its status port from a Worker thread and starts
 * Envoy through a copy of itself, and says so (src/status/listen.ts, src/envoy/deathlink.ts).
 */
function nativeEntries(target: string | undefined, outdir: string): string[] {
  if (!(target ?? `bun-${process.platform}`).includes("linux")) return [];
  const arch = targetArch(target);
  const out: string[] = [];
  for (const [what, r] of [
    ["native status responder", buildResponder(arch, join(outdir, "native"))],
    ["native Envoy launcher", buildLauncher(arch, join(outdir, "native"))],
  ] as const) {
    if ("error" in r) console.warn(`warning: no ${what} in the ${target ?? "host"} build: ${r.error}`);
    else out.push(r.file);
  }
  return out;
}

function compile(outfile: string, target: string | undefined, bytecode: boolean, defines: Record<string, string>, extra: string[]): boolean {
  // The status port's thread (src/status/statusthread.ts) is a second entry point: a Worker's code
  // is found in the binary only when it is built in. `extra` embeds files as they are (the native
  // responder's library and Envoy's launcher, found in Bun.embeddedFiles by name: hence the asset naming); --root
  // keeps the Worker's path relative to src/ although the library lies outside it.
  const cmd = [
    process.execPath,
    "build",
    "src/main.ts",
    "src/status/statusthread.worker.ts",
    ...extra,
    "--root=src",
    "--asset-naming=[name].[ext]",
    "--compile",
    "--minify",
    "--sourcemap=none",
    // A compiled Bun program reads .env files and bunfig.toml from its working directory at start
    // (the pod's, here): the agent's settings come from its environment and flags only, and the
    // lookups are on every start path, the Envoy launcher copy's included.
    "--no-compile-autoload-dotenv",
    "--no-compile-autoload-bunfig",
    // JavaScriptCore's tier-up thresholds ×JIT_POLICY until `agent proxy` has started (it sets 1):
    // start-up code runs once, and compiling it cost CPU on the start path (docs/startup.md).
    `--compile-jit-policy=${JIT_POLICY}`,
    "--outfile",
    outfile,
  ];
  if (bytecode) cmd.push("--bytecode");
  if (target) cmd.push(`--target=${target}`);
  for (const [k, v] of Object.entries(defines)) cmd.push("--define", `${k}=${v}`);
  const t0 = performance.now();
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) {
    process.stderr.write(`build ${outfile.replace(/\.\d+\.tmp$/, "")}${target ? ` (${target})` : ""} failed:\n${r.stderr.toString()}${r.stdout.toString()}\n`);
    return false;
  }
  console.log(`built ${outfile.replace(/\.\d+\.tmp$/, "")}${target ? ` (${target})` : ""} in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  return true;
}

/** Checks `file` against build-needs.json; returns an error message or undefined. */
function checkNeeds(file: string, key: string | undefined, expectations: Record<string, NeedsExpectation>): string | undefined {
  if (!key) return undefined; // not a Linux build: nothing recorded to compare with
  const want = expectations[key];
  const actual = readElfNeeds(file);
  if (!want)
    return `${file}: build-needs.json has no entry "${key}"; its needs are ${JSON.stringify({ interpreter: actual.interpreter, needed: actual.needed, maxGlibc: actual.maxGlibc })}`;
  const diff = needsDiff(actual, want);
  if (diff.length === 0) return undefined;
  return `${file} (${key}) needs something else on its target than build-needs.json records:\n  ${diff.join("\n  ")}\nIf this is intended, update the expectation (build-needs.json) and the README's "Build" section together.`;
}

function main(argv: string[]): number {
  const args = new Set(argv);
  const valueOf = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const outdir = valueOf("--outdir") ?? "dist";
  const bytecode = !args.has("--no-bytecode");
  const ifChanged = args.has("--if-changed");
  const onlyArg = valueOf("--only");
  const hostOnly = args.has("--host") || process.env.AGENT_BUILD_HOST_ONLY === "1";
  const only = onlyArg ? onlyArg.split(",") : hostOnly ? ["agent"] : OUTPUTS.map((o) => o.name);
  const unknown = only.filter((n) => !OUTPUTS.some((o) => o.name === n));
  if (unknown.length) {
    process.stderr.write(`build: unknown output ${unknown.join(", ")} in --only (known: ${OUTPUTS.map((o) => o.name).join(", ")})\n`);
    return 2;
  }
  const needsFile = valueOf("--needs") ?? "build-needs.json";
  let expectations: Record<string, NeedsExpectation>;
  try {
    expectations = JSON.parse(readFileSync(needsFile, "utf8")) as Record<string, NeedsExpectation>;
  } catch (e) {
    process.stderr.write(`build: cannot read ${needsFile}: ${(e as Error).message}\n`);
    return 2;
  }

  const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
  const commit = git("rev-parse", "--short=12", "HEAD") ?? "unknown";
  const dirty = (git("status", "--porcelain", "--untracked-files=no") ?? "") !== "";
  const defines = {
    AGENT_BUILD_VERSION: JSON.stringify(pkg.version),
    AGENT_BUILD_COMMIT: JSON.stringify(commit),
    AGENT_BUILD_STATUS: JSON.stringify(dirty ? "Modified" : "Clean"),
  };

  mkdirSync(outdir, { recursive: true });
  let failed = false;
  for (const out of OUTPUTS.filter((o) => only.includes(o.name))) {
    const file = join(outdir, out.name);
    const stamp = join(outdir, `.${out.name}.inputs`);
    const hash = inputsHash(".", out.target, bytecode, Bun.version);
    if (ifChanged && upToDate(file, stamp, hash)) {
      console.log(`${file} is up to date`);
    } else {
      // Built beside and renamed into place: a reader never sees half a binary, and a failed
      // build leaves the previous one.
      const tmp = `${file}.${process.pid}.tmp`;
      const ok = compile(tmp, out.target, bytecode, defines, nativeEntries(out.target, outdir));
      if (ok) renameSync(tmp, file);
      else rmSync(tmp, { force: true });
      if (!ok) {
        if (out.target && !onlyArg) {
          console.warn(`warning: ${out.name} not built (target runtime unavailable?)`);
          continue;
        }
        failed = true;
        continue;
      }
      writeFileSync(stamp, hash);
    }
    let err: string | undefined;
    try {
      err = checkNeeds(file, out.needsKey, expectations);
    } catch (e) {
      err = (e as Error).message;
    }
    if (err) {
      process.stderr.write(`build: ${err}\n`);
      failed = true;
    }
  }
  return failed ? 1 : 0;
}

if (import.meta.main) process.exit(main(process.argv.slice(2)));
