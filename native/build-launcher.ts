// Builds Envoy's native launcher (envoylauncher.c) into a static executable with gcc: no libc, no
// interpreter, no DT_NEEDED, so the one file per architecture runs on glibc and musl systems alike.
// Used by build.ts (embedded in the binary) and by the tests that run the agent from source. Without
// a C compiler for the architecture no launcher is built, and that binary starts Envoy through a
// copy of itself (src/envoy/deathlink.ts), as before.
//   bun native/build-launcher.ts [ARCH]   → dist/native/envoylauncher-ARCH.elf

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { compileNative } from "./build-responder.ts";
import { launcherFileName } from "./envoylauncher.ts";

const SOURCE = join(import.meta.dir, "envoylauncher.c");
const FLAGS = [
  "-Os",
  "-static",
  "-nostdlib",
  "-nostartfiles",
  "-no-pie",
  "-ffreestanding",
  "-fno-builtin",
  "-fno-stack-protector",
  "-fno-asynchronous-unwind-tables",
  "-fno-unwind-tables",
  "-Wl,--build-id=none",
  "-Wl,-z,noseparate-code",
  "-Wall",
  "-Wextra",
  "-Werror",
  "-s",
];

/** Compiles the launcher for `arch` into `outDir`; returns its path, or a sentence saying why not. */
export function buildLauncher(arch: string = process.arch, outDir = join(import.meta.dir, "..", "dist", "native")): { file: string } | { error: string } {
  return compileNative(arch, SOURCE, FLAGS, join(outDir, launcherFileName(arch)), import.meta.path);
}

if (import.meta.main) {
  const r = buildLauncher(process.argv[2] ?? process.arch);
  if ("error" in r) {
    process.stderr.write(`${r.error}\n`);
    process.exit(1);
  }
  console.log(`${r.file} (${readFileSync(r.file).length} bytes)`);
}
