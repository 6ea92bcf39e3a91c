// Builds the Go test tooling of the interop suites: Istio's pilot-agent (the reference) and
// istiod-lite (Istio's discovery server and CA on loopback), into test/interop/.bin (ignored).
// Rebuilt only when go.mod, go.sum, the Go sources or the Go version change (a stamp file).
// Nothing built here ships in dist/agent.
//
// Run ahead of time with `bun test/interop/support/go-build.ts`; the suites call ensureBuilt().

import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const INTEROP_DIR = resolve(import.meta.dir, "..");
export const BIN_DIR = join(INTEROP_DIR, ".bin");
export const PILOT_AGENT = join(BIN_DIR, "pilot-agent");
export const ISTIOD_LITE = join(BIN_DIR, "istiod-lite");
const STAMP = join(BIN_DIR, "stamp");

/** The pinned commit (../shared/reference/istio-agent.md) as a Go pseudo-version. */
export const ISTIO_COMMIT = "86c9f01fd735fb01d8192f5bcaf0d424afb7f14c";
export const ISTIO_VERSION = "v0.0.0-20260822200018-86c9f01fd735";
/** Where go.mod's replace directive expects the source of istio.io/istio at ISTIO_COMMIT. */
export const ISTIO_SRC = join(INTEROP_DIR, ".deps/istio");

/**
 * Modules go.mod replaces with a folder under .deps/ because the module proxy does not serve
 * the pinned version. Each is filled from, in order: the module proxy (should it start serving
 * it), `GOPROXY=direct` (git from the origin), a local git mirror of the repository
 * (INTEROP_GIT_MIRRORS/<mirror>, default /work/.mirror).
 */
const LOCAL_MODULES = [{ module: "istio.io/istio", version: ISTIO_VERSION, dir: ".deps/istio", mirror: "istio+istio/repo", commit: ISTIO_COMMIT, subdir: "" }];

/** A note in each filled folder saying where its source came from. */
export const SOURCE_NOTE = ".interop-source";

/** The go command: INTEROP_GO, else `go` on PATH, else /usr/local/go/bin/go. */
export function findGo(): string | undefined {
  const explicit = process.env.INTEROP_GO;
  if (explicit) return existsSync(explicit) ? explicit : undefined;
  return Bun.which("go") ?? (existsSync("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : undefined);
}

function run(cmd: string[], cwd: string, env: Record<string, string | undefined> = {}): string {
  const p = Bun.spawnSync(cmd, { cwd, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) {
    throw new Error(`${cmd.join(" ")} (in ${cwd}) exited ${p.exitCode}:\n${p.stderr.toString().slice(-4000)}`);
  }
  return p.stdout.toString();
}

function goSources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name.startsWith(".") || e.name === "node_modules") continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) goSources(p, out);
    else if (e.name.endsWith(".go")) out.push(p);
  }
  return out.sort();
}

/** Hash of everything the binaries are built from. */
export function sourceStamp(go: string): string {
  const h = createHash("sha256");
  h.update(run([go, "version"], INTEROP_DIR));
  for (const f of ["go.mod", "go.sum", ...goSources(INTEROP_DIR).map((p) => p.slice(INTEROP_DIR.length + 1))]) {
    h.update(f + "\0");
    h.update(readFileSync(join(INTEROP_DIR, f)));
  }
  return h.digest("hex");
}

function fillLocalModules(go: string): void {
  for (const m of LOCAL_MODULES) {
    const dest = join(INTEROP_DIR, m.dir);
    if (existsSync(join(dest, "go.mod"))) continue;
    const tmp = `${dest}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    // 1-2. The module proxy, then the origin, asked outside this module so go.mod's replace does not apply.
    let info: { Dir?: string } = {};
    let source = "";
    for (const proxy of [undefined, "direct"]) {
      const dl = Bun.spawnSync([go, "mod", "download", "-json", `${m.module}@${m.version}`], {
        cwd: "/",
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, ...(proxy ? { GOPROXY: proxy } : {}), GOFLAGS: "-mod=mod" },
      });
      if (dl.exitCode === 0) info = JSON.parse(dl.stdout.toString()) as { Dir?: string };
      if (info.Dir) {
        source = `go mod download (GOPROXY=${proxy ?? "default"})`;
        break;
      }
    }
    if (info.Dir) {
      cpSync(info.Dir, tmp, { recursive: true });
    } else {
      // 2. A git mirror of the upstream repository (INTEROP_GIT_MIRRORS, default /work/.mirror).
      const repo = join(process.env.INTEROP_GIT_MIRRORS ?? "/work/.mirror", m.mirror);
      if (!existsSync(repo)) {
        rmSync(tmp, { recursive: true, force: true });
        throw new Error(`${m.module}@${m.version}: the module proxy does not serve it and no git mirror at ${repo} (set INTEROP_GIT_MIRRORS to a folder holding ${m.mirror})`);
      }
      const archive = `${tmp}.tar`;
      const tar = Bun.spawnSync(["git", "-C", repo, "archive", "-o", archive, m.commit, ...(m.subdir ? [m.subdir] : [])], { stderr: "pipe" });
      if (tar.exitCode !== 0) throw new Error(`git archive ${m.commit} in ${repo}: ${tar.stderr.toString()}`);
      const x = Bun.spawnSync(["tar", "-x", "-f", archive, "-C", tmp, ...(m.subdir ? ["--strip-components=1"] : [])], { stderr: "pipe" });
      rmSync(archive, { force: true });
      source = `git archive ${m.commit} of ${repo}`;
      if (x.exitCode !== 0) throw new Error(`unpacking ${m.module}: ${x.stderr.toString()}`);
    }
    writeFileSync(join(tmp, SOURCE_NOTE), `${m.module}@${m.version} from ${source}\n`);
    rmSync(dest, { recursive: true, force: true });
    renameSync(tmp, dest);
  }
}

export interface BuildResult {
  built: boolean;
  seconds: number;
}

export type Binary = "pilot-agent" | "istiod-lite";
const PACKAGES: Record<Binary, [string, string]> = {
  "pilot-agent": [PILOT_AGENT, "istio.io/istio/pilot/cmd/pilot-agent"],
  "istiod-lite": [ISTIOD_LITE, "./istiod-lite"],
};

/**
 * Builds the named binaries (default both) unless their stamps say they are current. Throws
 * with the go output on failure.
 */
export function ensureBuilt(log: (line: string) => void = () => {}, which: Binary[] = ["pilot-agent", "istiod-lite"]): BuildResult {
  const go = findGo();
  if (!go) throw new Error("Go not found (install Go, or set INTEROP_GO to the go binary)");
  const stamp = sourceStamp(go);
  const t0 = performance.now();
  let built = false;
  for (const name of which) {
    const [out, pkg] = PACKAGES[name];
    const stampFile = `${STAMP}-${name}`;
    if (existsSync(stampFile) && readFileSync(stampFile, "utf8") === stamp && existsSync(out)) continue;
    mkdirSync(BIN_DIR, { recursive: true });
    fillLocalModules(go);
    log(`interop: building ${name} from istio.io/istio@${ISTIO_VERSION} (the first build with a cold module cache takes many minutes)`);
    const tmp = `${out}.tmp-${process.pid}`;
    run([go, "build", "-o", tmp, pkg], INTEROP_DIR);
    renameSync(tmp, out);
    writeFileSync(stampFile, stamp);
    built = true;
  }
  return { built, seconds: (performance.now() - t0) / 1000 };
}

/** For describeRequiring's `check`: why the interop binaries cannot be used, or undefined. */
export function interopUnmet(which?: Binary[]): string | undefined {
  if (!findGo()) return "Go (https://go.dev/dl, or set INTEROP_GO); then `bun test/interop/support/go-build.ts`";
  try {
    ensureBuilt((l) => console.log(l), which);
    return undefined;
  } catch (e) {
    return `the Go interop binaries to build: ${(e as Error).message.split("\n").slice(0, 6).join(" | ")}`;
  }
}

if (import.meta.main) {
  const r = ensureBuilt((l) => console.log(l));
  console.log(r.built ? `interop: built in ${r.seconds.toFixed(0)} s into ${BIN_DIR}` : `interop: ${BIN_DIR} is current`);
}
