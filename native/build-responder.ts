// Builds the status port's native responder (statusresponder.c) into a shared library with gcc:
// no libc headers' inline helpers (fortify, stack protector) and no DT_NEEDED, so the one file
// per architecture loads under glibc and musl alike (its symbols come from the process's libc).
// Used by build.ts (embedded in the binary) and by the tests that run the status server from
// source. A C compiler for the architecture must be on PATH: `gcc` for this machine's, or
// `<triple>-gcc` for another (aarch64-linux-gnu-gcc); without one, no library is built and the
// binary serves its status port from a Worker thread (src/status/listen.ts says so in its log).
//   bun native/build-responder.ts [ARCH]   → dist/native/statusresponder-ARCH.so

import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { responderFileName } from "./statusresponder.ts";

const SOURCE = join(import.meta.dir, "statusresponder.c");
const FLAGS = ["-O2", "-fPIC", "-shared", "-nostdlib", "-fno-stack-protector", "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=0", "-Wall", "-Wextra", "-Werror", "-s"];

/** The compiler for `arch` (node's names: x64, arm64) on this machine, or undefined. */
export function compilerFor(arch: string): string | undefined {
  const native = process.arch === arch;
  const triple = arch === "arm64" ? "aarch64-linux-gnu-gcc" : arch === "x64" ? "x86_64-linux-gnu-gcc" : undefined;
  for (const cc of [...(native ? ["gcc", "cc"] : []), ...(triple ? [triple] : [])]) if (Bun.which(cc)) return cc;
  return undefined;
}

/**
 * Compiles `source` with `flags` for `arch` into `file` unless it is newer than the source and
 * `script` (the build script naming the flags); returns its path, or a sentence saying why not.
 */
export function compileNative(arch: string, source: string, flags: readonly string[], file: string, script: string): { file: string } | { error: string } {
  const cc = compilerFor(arch);
  if (!cc) return { error: `no C compiler for linux-${arch} (gcc or ${arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu-gcc)` };
  if (existsSync(file) && statSync(file).mtimeMs >= statSync(source).mtimeMs && statSync(file).mtimeMs >= statSync(script).mtimeMs) return { file };
  mkdirSync(dirname(file), { recursive: true });
  const r = Bun.spawnSync([cc, ...flags, "-o", file, source], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) return { error: `${cc} failed on ${source}:\n${r.stderr.toString()}` };
  return { file };
}

/** Compiles the library for `arch` into `outDir`; returns its path, or a sentence saying why not. */
export function buildResponder(arch: string = process.arch, outDir = join(import.meta.dir, "..", "dist", "native")): { file: string } | { error: string } {
  return compileNative(arch, SOURCE, FLAGS, join(outDir, responderFileName(arch)), import.meta.path);
}

if (import.meta.main) {
  const r = buildResponder(process.argv[2] ?? process.arch);
  if ("error" in r) {
    process.stderr.write(`${r.error}\n`);
    process.exit(1);
  }
  console.log(`${r.file} (${readFileSync(r.file).length} bytes)`);
}
