// Runs the compiled agent (dist/agent) the way a pod or VM would: copied into a fresh temp
// directory that is also its working directory, with no node_modules, .proto files or Bun near it.

import { copyFileSync, existsSync, mkdtempSync, rmSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const DIST_AGENT = resolve(import.meta.dir, "../../dist/agent");

export function requireBinary(): void {
  if (!existsSync(DIST_AGENT)) throw new Error(`${DIST_AGENT} is missing: run \`node_modules/.bin/bun build.ts --host\` (npm test does) first`);
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
  const proc = Bun.spawn([bin, ...args], { cwd: opts.cwd, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...NO_CLOUD, ...opts.env }, stdout: "pipe", stderr: "pipe" });
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
