// Builds the Go test tooling of the interop suites: Istio's pilot-agent (the reference),
// istiod-lite (Istio's discovery server and CA on loopback) and injector (Istio's sidecar
// injector over the chart's templates), into test/interop/.bin (ignored).
// istio.io/istio and every module it needs come from the Go module proxy at the versions
// test/interop/go.mod and go.sum name (no replace directives, no local source trees).
// Rebuilt only when go.mod, go.sum, the Go sources, the build flags or the Go version change
// (a stamp file). Nothing built here ships in dist/agent.
//
// `npm test` (scripts/test.ts) builds once, before the suites, with progress lines
// (buildInterop); `bun test/interop/support/go-build.ts` does the same alone. The suites only
// check the stamp (interopUnmet -> ensureBuilt, a no-op when current).

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const INTEROP_DIR = resolve(import.meta.dir, "..");
export const BIN_DIR = join(INTEROP_DIR, ".bin");
export const PILOT_AGENT = join(BIN_DIR, "pilot-agent");
export const ISTIOD_LITE = join(BIN_DIR, "istiod-lite");
export const VMCONFIG = join(BIN_DIR, "vmconfig");
export const FLEET_ENVOY = join(BIN_DIR, "fleet-envoy");
export const INJECTOR = join(BIN_DIR, "injector");
const STAMP = join(BIN_DIR, "stamp");

/** The oracle: the version of istio.io/istio that go.mod requires (the 1.31 line; docs/interop.md). */
export const ISTIO_MODULE = "istio.io/istio";
export const ISTIO_VERSION = "v0.0.0-20260827124520-eed52ebb66ad";
export const ISTIO_COMMIT_PREFIX = "eed52ebb66ad";

/**
 * Set by scripts/test.ts for the `bun test` it runs: the build already happened (or failed with
 * this message), so the suites must not start a build of their own inside a test's timeout.
 */
export const BUILD_ERROR_ENV = "INTEROP_BUILD_ERROR";
export const PREBUILT_ENV = "INTEROP_PREBUILT";

/** Small, reproducible binaries: no local paths, no symbol tables (the link is a large share of the build). */
const BUILD_FLAGS = ["-trimpath", "-ldflags=-s -w"];

export type Binary = "pilot-agent" | "istiod-lite" | "vmconfig" | "fleet-envoy" | "injector";
const PACKAGES: Record<Binary, [string, string]> = {
  "pilot-agent": [PILOT_AGENT, "istio.io/istio/pilot/cmd/pilot-agent"],
  "istiod-lite": [ISTIOD_LITE, "./istiod-lite"],
  vmconfig: [VMCONFIG, "./vmconfig"],
  "fleet-envoy": [FLEET_ENVOY, "./fleet-envoy"], // every pod's Envoy stand-in in one process (bench/fleet.ts)
  injector: [INJECTOR, "./injector"],
};
const ALL: Binary[] = ["pilot-agent", "istiod-lite", "vmconfig", "fleet-envoy", "injector"];

/** The go command: INTEROP_GO, else `go` on PATH, else /usr/local/go/bin/go. */
export function findGo(): string | undefined {
  const explicit = process.env.INTEROP_GO;
  if (explicit) return existsSync(explicit) ? explicit : undefined;
  return Bun.which("go") ?? (existsSync("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : undefined);
}

function requireGo(): string {
  const go = findGo();
  if (!go) throw new Error("Go not found (install Go from https://go.dev/dl, or set INTEROP_GO to the go binary)");
  return go;
}

function run(cmd: string[], cwd: string): string {
  const p = Bun.spawnSync(cmd, { cwd, env: process.env, stdout: "pipe", stderr: "pipe" });
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
  h.update(BUILD_FLAGS.join("\0") + "\0");
  for (const f of ["go.mod", "go.sum", ...goSources(INTEROP_DIR).map((p) => p.slice(INTEROP_DIR.length + 1))]) {
    h.update(f + "\0");
    h.update(readFileSync(join(INTEROP_DIR, f)));
  }
  return h.digest("hex");
}

/**
 * The folder of the oracle's source in the module cache (downloaded from the module proxy when
 * absent). The goldens test and the bootstrap template come from here.
 */
export function istioSource(): string {
  const dir = run([requireGo(), "mod", "download", "-json", `${ISTIO_MODULE}@${ISTIO_VERSION}`], INTEROP_DIR);
  const info = JSON.parse(dir) as { Dir?: string; Error?: string };
  if (!info.Dir) throw new Error(`go mod download ${ISTIO_MODULE}@${ISTIO_VERSION}: ${info.Error ?? "no Dir"}`);
  return info.Dir;
}

function stale(go: string, which: Binary[]): { stamp: string; todo: Binary[] } {
  const stamp = sourceStamp(go);
  const todo = which.filter((name) => {
    const stampFile = `${STAMP}-${name}`;
    return !(existsSync(stampFile) && readFileSync(stampFile, "utf8") === stamp && existsSync(PACKAGES[name][0]));
  });
  return { stamp, todo };
}

function buildCommand(go: string, outDir: string, todo: Binary[]): string[] {
  // One `go build` for all: the packages they share compile once, in parallel.
  return [go, "build", ...BUILD_FLAGS, "-v", "-o", outDir + "/", ...todo.map((n) => PACKAGES[n][1])];
}

function install(outDir: string, todo: Binary[], stamp: string): void {
  for (const name of todo) {
    renameSync(join(outDir, name), PACKAGES[name][0]);
    writeFileSync(`${STAMP}-${name}`, stamp);
  }
  rmSync(outDir, { recursive: true, force: true });
}

export interface BuildResult {
  built: boolean;
  seconds: number;
}

/**
 * Builds the named binaries (default all) unless their stamps say they are current, in one
 * synchronous `go build` (no progress: use buildInterop for long builds). Throws with the go
 * output on failure.
 */
export function ensureBuilt(log: (line: string) => void = () => {}, which: Binary[] = ALL): BuildResult {
  const go = requireGo();
  const t0 = performance.now();
  const { stamp, todo } = stale(go, which);
  if (todo.length === 0) return { built: false, seconds: (performance.now() - t0) / 1000 };
  mkdirSync(BIN_DIR, { recursive: true });
  log(`interop: building ${todo.join(" and ")} from ${ISTIO_MODULE}@${ISTIO_VERSION} (a cold module and build cache takes many minutes)`);
  const outDir = join(BIN_DIR, `tmp-${process.pid}`);
  run(buildCommand(go, outDir, todo), INTEROP_DIR);
  install(outDir, todo, stamp);
  return { built: true, seconds: (performance.now() - t0) / 1000 };
}

/**
 * ensureBuilt with a progress line every `everySeconds` (packages compiled so far, elapsed
 * time), so a cold build of many minutes is never silent. Resolves with the result; rejects with
 * the tail of go's output on failure.
 */
export async function buildInterop(log: (line: string) => void, which: Binary[] = ALL, everySeconds = 30): Promise<BuildResult> {
  const go = requireGo();
  const t0 = performance.now();
  const { stamp, todo } = stale(go, which);
  if (todo.length === 0) return { built: false, seconds: (performance.now() - t0) / 1000 };
  mkdirSync(BIN_DIR, { recursive: true });
  log(`interop: building ${todo.join(" and ")} from ${ISTIO_MODULE}@${ISTIO_VERSION} with ${go} (cold caches: see docs/interop.md for how long)`);
  const outDir = join(BIN_DIR, `tmp-${process.pid}`);
  const proc = Bun.spawn(buildCommand(go, outDir, todo), { cwd: INTEROP_DIR, env: process.env, stdout: "pipe", stderr: "pipe" });
  let packages = 0;
  let tail = "";
  const elapsed = () => Math.round((performance.now() - t0) / 1000);
  const timer = setInterval(() => log(`interop: go build running, ${packages} packages compiled, ${elapsed()} s`), everySeconds * 1000);
  try {
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr) {
      const text = decoder.decode(chunk, { stream: true });
      // `go build -v` names each package as it is compiled; "go: downloading" lines name modules.
      packages += text.split("\n").filter((l) => l && !l.startsWith("go: ") && !l.startsWith("#")).length;
      tail = (tail + text).slice(-4000);
    }
    const code = await proc.exited;
    if (code !== 0) throw new Error(`go build (in ${INTEROP_DIR}) exited ${code}:\n${tail}`);
  } finally {
    clearInterval(timer);
  }
  install(outDir, todo, stamp);
  const seconds = (performance.now() - t0) / 1000;
  log(`interop: built ${todo.join(" and ")} in ${Math.round(seconds)} s (${packages} packages)`);
  return { built: true, seconds };
}

/**
 * For describeRequiring's `check`: why the interop binaries cannot be used, or undefined. Under
 * scripts/test.ts the build already ran: its failure is reported as is, and a missing binary is
 * not rebuilt inside a test's timeout.
 */
export function interopUnmet(which?: Binary[]): string | undefined {
  if (!findGo()) return "Go (https://go.dev/dl, or set INTEROP_GO); then `bun test/interop/support/go-build.ts`";
  const failed = process.env[BUILD_ERROR_ENV];
  if (failed) return `the Go interop binaries, whose build failed: ${failed.split("\n").slice(0, 6).join(" | ")}`;
  try {
    if (process.env[PREBUILT_ENV]) {
      const { todo } = stale(requireGo(), which ?? ALL);
      return todo.length ? `the Go interop binaries ${todo.join(", ")} (not built; run \`bun test/interop/support/go-build.ts\`)` : undefined;
    }
    ensureBuilt((l) => console.log(l), which);
    return undefined;
  } catch (e) {
    return `the Go interop binaries to build: ${(e as Error).message.split("\n").slice(0, 6).join(" | ")}`;
  }
}

if (import.meta.main) {
  const r = await buildInterop((l) => console.log(l));
  if (!r.built) console.log(`interop: ${BIN_DIR} is current`);
}
