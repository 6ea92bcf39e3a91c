// The published cross builds, each with a way to run it on this x86-64 Debian machine:
// - agent-linux-arm64 under qemu-user, with Debian's arm64 glibc from multiarch (libc6:arm64);
// - agent-linux-x64-musl chrooted into a minimal musl root made per test: Debian's musl loader/libc,
//   Debian's libstdc++.so.6 and libgcc_s.so.1, and glibc-compat.c (built with musl-gcc) standing
//   in for the few glibc symbols those two reference (see that file).
// Each binary is built once per run, and only when its inputs changed (`build.ts --if-changed`).

import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Requirements } from "../support/requires.ts";

const ROOT = resolve(import.meta.dir, "../..");
const MUSL_LIBC = "/lib/x86_64-linux-musl/libc.so";
const GLIBC_LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
const GLIBC_LIBGCC = "/lib/x86_64-linux-gnu/libgcc_s.so.1";
const ARM64_LOADER = "/lib/ld-linux-aarch64.so.1";

export interface TargetRoot {
  /** Directory the agent sees as its working directory; files for it go here. */
  dir: string;
  /** Command prefix that runs the agent with `dir` as its working directory. */
  argv(args: string[]): string[];
  /** Working directory for the spawned prefix. */
  cwd: string;
  cleanup(): void;
}

export interface Target {
  name: "agent-linux-arm64" | "agent-linux-x64-musl";
  requires: Requirements;
  /** A fresh root holding a copy of the binary. */
  root(binary: string): TargetRoot;
}

const missingFile = (paths: string[], pkg: string) => () => {
  const gone = paths.filter((p) => !existsSync(p));
  return gone.length ? `${gone.join(", ")} (apt-get install ${pkg})` : undefined;
};

export const ARM64: Target = {
  name: "agent-linux-arm64",
  requires: {
    tools: ["qemu-aarch64"],
    apt: ["qemu-user"],
    check: missingFile([ARM64_LOADER], "libc6:arm64, after dpkg --add-architecture arm64 and apt-get update"),
  },
  root(binary) {
    const dir = mkdtempSync(join(tmpdir(), "agent-arm64-"));
    copyFileSync(binary, join(dir, "agent"));
    chmodSync(join(dir, "agent"), 0o755);
    return { dir, cwd: dir, argv: (args) => ["qemu-aarch64", join(dir, "agent"), ...args], cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  },
};

export const MUSL: Target = {
  name: "agent-linux-x64-musl",
  requires: {
    root: true,
    tools: ["musl-gcc", "chroot"],
    apt: ["musl", "musl-tools", "coreutils"],
    check: missingFile([MUSL_LIBC, GLIBC_LIBSTDCXX, GLIBC_LIBGCC], "musl libstdc++6 libgcc-s1"),
  },
  root(binary) {
    const dir = mkdtempSync(join(tmpdir(), "agent-musl-"));
    mkdirSync(join(dir, "lib"));
    mkdirSync(join(dir, "tmp"), { mode: 0o1777 });
    copyFileSync(MUSL_LIBC, join(dir, "lib/ld-musl-x86_64.so.1"));
    copyFileSync(GLIBC_LIBSTDCXX, join(dir, "lib/libstdc++.so.6"));
    copyFileSync(GLIBC_LIBGCC, join(dir, "lib/libgcc_s.so.1"));
    const cc = Bun.spawnSync(["musl-gcc", "-shared", "-fPIC", "-O2", "-o", join(dir, "lib/ld-linux-x86-64.so.2"), join(import.meta.dir, "glibc-compat.c")], {
      stderr: "pipe",
    });
    if (cc.exitCode !== 0) throw new Error(`musl-gcc glibc-compat.c failed: ${cc.stderr.toString()}`);
    copyFileSync(binary, join(dir, "agent"));
    chmodSync(join(dir, "agent"), 0o755);
    // chroot(8) changes the working directory to the new root, which is `dir` seen from inside.
    return { dir, cwd: dir, argv: (args) => ["chroot", dir, "/agent", ...args], cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  },
};

/** dist/NAME, built (or found up to date) by build.ts; throws with build.ts's output on failure. */
export function buildTarget(name: Target["name"]): string {
  const r = Bun.spawnSync([process.execPath, "build.ts", "--only", name, "--if-changed"], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, AGENT_BUILD_HOST_ONLY: "" },
  });
  if (r.exitCode !== 0) throw new Error(`build.ts --only ${name} failed (exit ${r.exitCode}):\n${r.stderr.toString()}${r.stdout.toString()}`);
  return join(ROOT, "dist", name);
}
