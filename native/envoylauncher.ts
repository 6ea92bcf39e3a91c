// Envoy's native launcher (envoylauncher.c): its bytes, embedded in the compiled binary by build.ts
// (or dist/native/ when run from source), are put in an anonymous memory file (memfd_create, no
// filesystem touched: a read-only root is fine) that stays open for the agent's life, and Envoy is
// spawned as `/proc/self/fd/N <agent pid> <envoy> <args>`: the kernel runs the launcher from it,
// which arms the parent-death signal and execs Envoy. The descriptor is close-on-exec, so neither
// the launcher nor Envoy inherits it. Linux only. Every failure comes back as a sentence saying
// why, and the caller starts Envoy through a copy of the agent instead (src/envoy/deathlink.ts).

import { closeSync, existsSync, readFileSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { LIBC_NAMES } from "./pdeathsig.ts";

const MFD_CLOEXEC = 1;

/** The launcher's file name for an architecture (one per architecture, libc-agnostic). */
export function launcherFileName(arch: string = process.arch): string {
  return `envoylauncher-${arch}.elf`;
}

/**
 * The launcher's bytes: embedded in the compiled binary (next to its entry point in Bun's embedded
 * filesystem), else, run from source, dist/native/ as build.ts or native/build-launcher.ts leave it.
 */
export function launcherBytes(
  embedded: readonly Blob[] = Bun.embeddedFiles,
  main: string = Bun.main,
  sourceDir = join(import.meta.dir, "..", "dist", "native"),
): Uint8Array | string {
  if (process.platform !== "linux") return `no native Envoy launcher on ${process.platform}`;
  const name = launcherFileName();
  if (main.startsWith("/$bunfs/")) {
    if (!embedded.some((b) => (b as Blob & { name?: string }).name === name))
      return `this build carries no native Envoy launcher for linux-${process.arch} (${name})`;
    try {
      return readFileSync(join(dirname(main), name));
    } catch (e) {
      return `cannot read the embedded ${name}: ${(e as Error).message}`;
    }
  }
  const file = join(sourceDir, name);
  if (!existsSync(file)) return `${file} does not exist (node_modules/.bin/bun native/build-launcher.ts builds it)`;
  return readFileSync(file);
}

/**
 * Writes `bytes` to a close-on-exec memory file kept open (one descriptor for the agent's life) and
 * returns the path that executes it, or a sentence saying why not.
 */
export function installLauncher(bytes: Uint8Array, procFd = "/proc/self/fd"): { path: string } | string {
  if (process.platform !== "linux") return `no native Envoy launcher on ${process.platform}`;
  let ffi: typeof import("bun:ffi");
  try {
    ffi = require("bun:ffi") as typeof import("bun:ffi");
  } catch (e) {
    return `bun:ffi is not available: ${(e as Error).message}`;
  }
  let memfdCreate: ((name: number, flags: number) => number) | undefined;
  for (const lib of LIBC_NAMES) {
    try {
      const T = ffi.FFIType;
      memfdCreate = ffi.dlopen(lib, { memfd_create: { args: [T.ptr, T.u32], returns: T.i32 } }).symbols.memfd_create as unknown as typeof memfdCreate;
      break;
    } catch {
      // try the next libc name
    }
  }
  if (!memfdCreate) return "memfd_create is not reachable through bun:ffi (no glibc or musl libc found)";
  const fd = memfdCreate(ffi.ptr(Buffer.from("agent-envoy-launcher\0")) as unknown as number, MFD_CLOEXEC);
  if (fd < 0) return "memfd_create failed";
  const path = `${procFd}/${fd}`;
  let why: string | undefined;
  try {
    if (writeSync(fd, bytes) !== bytes.length) why = "short write to the launcher's memory file";
    else if (!existsSync(path)) why = `${path} does not exist (is /proc mounted?)`;
  } catch (e) {
    why = `cannot write the launcher's memory file: ${(e as Error).message}`;
  }
  if (why === undefined) return { path };
  closeSync(fd);
  return why;
}

/** The launcher ready to execute, or why not (bytes missing, no memfd, no /proc). */
export function nativeLauncher(): { path: string } | string {
  const bytes = launcherBytes();
  return typeof bytes === "string" ? bytes : installLauncher(bytes);
}
