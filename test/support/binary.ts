// Runs the compiled agent (dist/agent) the way a pod or VM would: copied into a fresh temp
// directory that is also its working directory, with no node_modules, .proto files or Bun near it.

import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, chmodSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";

const REPO = resolve(import.meta.dir, "../..");
export const DIST_AGENT = join(REPO, "dist/agent");
/** What the binary is built from: a change to any of these after the build makes it stale. */
export const BINARY_INPUTS = ["src", "proto", "native", "build.ts", "package.json"];

/** The newest file among `inputs` (files or directories, searched recursively). */
export function newestInput(root: string, inputs: readonly string[]): { path: string; mtimeMs: number } | undefined {
  let newest: { path: string; mtimeMs: number } | undefined;
  const visit = (path: string) => {
    let st;
    try {
      st = statSync(path);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const e of readdirSync(path)) visit(join(path, e));
    } else if (st.isFile() && (!newest || st.mtimeMs > newest.mtimeMs)) {
      newest = { path, mtimeMs: st.mtimeMs };
    }
  };
  for (const i of inputs) visit(join(root, i));
  return newest;
}

/** Why the binary at `bin` cannot be trusted to be built from the inputs under `root`, if so. */
export function staleBinaryReason(bin: string, root: string, inputs: readonly string[] = BINARY_INPUTS): string | undefined {
  if (!existsSync(bin)) return `${bin} is missing`;
  const built = statSync(bin).mtimeMs;
  const newest = newestInput(root, inputs);
  if (newest && newest.mtimeMs > built) return `${bin} is older than ${relative(root, newest.path)} (stale binary)`;
  return undefined;
}

/** Refuses to run binary tests against a missing or stale dist/agent. */
export function requireBinary(): void {
  const why = staleBinaryReason(DIST_AGENT, REPO);
  if (why) throw new Error(`${why}: run \`node_modules/.bin/bun build.ts --host\` (npm test does) first`);
}

export interface Sandbox {
  dir: string;
  bin: string;
  cleanup(): void;
}

/** A temp root with its own copy of the binary. */
export function sandbox(prefix = "agent-e2e-"): Sandbox {
  requireBinary();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const bin = join(dir, "agent");
  copyFileSync(DIST_AGENT, bin);
  chmodSync(bin, 0o755);
  return { dir, bin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Running {
  proc: ReturnType<typeof Bun.spawn>;
  output(): string;
  /** Resolves when the combined output matches, rejects after `ms`. */
  waitFor(re: RegExp, ms?: number): Promise<string>;
}

/**
 * Agents started by tests never probe the link-local cloud metadata address from the host's
 * network (Istio's default when CLOUD_PLATFORM is unset); a test that wants a platform sets it.
 */
export const NO_CLOUD: Record<string, string> = { CLOUD_PLATFORM: "none" };

export function start(bin: string, args: string[], opts: { cwd: string; env?: Record<string, string> }): Running {
  const proc = Bun.spawn([bin, ...args], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...NO_CLOUD, ...opts.env },
    stdout: "pipe",
    stderr: "pipe",
  });
  let text = "";
  const waiters: { re: RegExp; resolve: (s: string) => void }[] = [];
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const chunk of stream) {
      text += dec.decode(chunk);
      for (const w of [...waiters]) {
        const m = w.re.exec(text);
        if (m) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(m[0]);
        }
      }
    }
  };
  void pump(proc.stdout as ReadableStream<Uint8Array>);
  void pump(proc.stderr as ReadableStream<Uint8Array>);
  return {
    proc,
    output: () => text,
    waitFor(re, ms = 15_000) {
      const m = re.exec(text);
      if (m) return Promise.resolve(m[0]);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out after ${ms}ms waiting for ${re} in output:\n${text}`)), ms);
        waiters.push({ re, resolve: (s) => (clearTimeout(t), resolve(s)) });
      });
    },
  };
}
