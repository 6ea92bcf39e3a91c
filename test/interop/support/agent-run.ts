// Runs one agent (ours or Istio's pilot-agent) as a pod would in a fresh directory, with a
// recording Envoy stand-in (a shell script: it saves its arguments and a copy of the bootstrap it
// was given, then waits), until that stand-in has started: returns Envoy's arguments, the
// bootstrap, the gRPC bootstrap written beside it, and the agent's exit if it ended.

import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { istioSource } from "./go-build.ts";

/** Istio's own bootstrap template (tools/packaging/common/envoy_bootstrap.json) in the oracle's source. */
export function istioBootstrapTemplate(): string {
  return join(istioSource(), "tools/packaging/common/envoy_bootstrap.json");
}

export interface AgentRun {
  /** Envoy's arguments; undefined when the agent never started Envoy. */
  argv?: string[];
  bootstrap?: string;
  grpcBootstrap?: string;
  /** The agent's exit code if it exited before Envoy started (or within the wait). */
  exit?: number | null;
  log: string;
  dir: string;
}

export interface RunOptions {
  bin: string;
  args: string[];
  env: Record<string, string>;
  /** Files to place in the fresh directory (relative path -> content). */
  files: Record<string, string>;
  template: string;
  /** What ends the run: Envoy started (default), or the gRPC bootstrap written (proxyless). */
  until?: "envoy" | "grpc-bootstrap" | (() => boolean);
  timeoutMs?: number;
  /** Fills the fresh directory before the agent starts (e.g. a pod's volumes), after `files`. */
  prepare?: (dir: string) => void;
  /** Runs the agent under this command (e.g. nsenter into a pod's network namespace). */
  prefix?: string[];
  /** Called with the fresh directory while the agent still runs (Envoy started), before it is killed. */
  whileRunning?: (dir: string) => Promise<void>;
}

/** Envoy stand-in: records pid, bootstrap copy and NUL-separated arguments (last, as the "started" mark), then waits. */
const RECORDING_ENVOY = `#!/bin/sh
echo $$ > "@RECORD@.pid"
prev=
for a in "$@"; do
  if [ "$prev" = "-c" ]; then cp "$a" "@RECORD@.bootstrap"; fi
  prev=$a
  printf '%s\\0' "$a"
done > "@RECORD@.args.tmp"
mv "@RECORD@.args.tmp" "@RECORD@.args"
exec sleep 600
`;

/** The fresh directory's path is replaced by this in everything compared. */
export const ROOT_MARK = "<ROOT>";

export async function runAgentUntilEnvoy(o: RunOptions): Promise<AgentRun> {
  const dir = mkdtempSync(join(tmpdir(), "agent-diff-"));
  try {
    for (const [rel, text] of Object.entries(o.files)) {
      mkdirSync(join(dir, rel, ".."), { recursive: true });
      writeFileSync(join(dir, rel), text);
    }
    o.prepare?.(dir);
    mkdirSync(join(dir, "var/lib/istio/envoy"), { recursive: true });
    copyFileSync(o.template, join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"));
    const launcher = join(dir, "var/lib/istio/envoy/envoy");
    const record = join(dir, "standin");
    writeFileSync(launcher, RECORDING_ENVOY.replaceAll("@RECORD@", record));
    chmodSync(launcher, 0o755);
    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir };
    for (const [k, v] of Object.entries(o.env)) env[k] = v.replaceAll(ROOT_MARK, dir).replaceAll("<ENVOY>", launcher);
    const p = Bun.spawn([...(o.prefix ?? []), o.bin, ...o.args], { cwd: dir, env, stdout: "pipe", stderr: "pipe" });
    let log = "";
    const pump = async (s: ReadableStream<Uint8Array>) => {
      for await (const c of s) log += new TextDecoder().decode(c);
    };
    const pumped = Promise.all([pump(p.stdout as ReadableStream<Uint8Array>), pump(p.stderr as ReadableStream<Uint8Array>)]);
    const deadline = Date.now() + (o.timeoutMs ?? 15_000);
    const grpcPath = join(dir, "etc/istio/proxy/grpc-bootstrap.json");
    const done = (): boolean => {
      if (typeof o.until === "function") return o.until();
      if (o.until === "grpc-bootstrap") {
        try {
          JSON.parse(readFileSync(grpcPath, "utf8"));
          return true;
        } catch {
          return false;
        }
      }
      return existsSync(`${record}.args`);
    };
    while (!done() && p.exitCode === null && Date.now() < deadline) await Bun.sleep(25);
    const started = existsSync(`${record}.args`);
    const grpcBootstrap = existsSync(grpcPath) ? readFileSync(grpcPath, "utf8") : undefined;
    const exit = p.exitCode;
    if (exit === null) await o.whileRunning?.(dir);
    p.kill("SIGKILL");
    if (started)
      try {
        process.kill(Number(readFileSync(`${record}.pid`, "utf8")), "SIGKILL");
      } catch {}
    await p.exited;
    await Promise.race([pumped, Bun.sleep(1000)]);
    const norm = (s?: string) => s?.replaceAll(dir, ROOT_MARK);
    const argv = started ? readFileSync(`${record}.args`, "utf8").split("\0").slice(0, -1) : undefined;
    const bootstrap = started && existsSync(`${record}.bootstrap`) ? readFileSync(`${record}.bootstrap`, "utf8") : undefined;
    return { argv: argv?.map((a) => a.replaceAll(dir, ROOT_MARK)), bootstrap: norm(bootstrap), grpcBootstrap: norm(grpcBootstrap), exit, log, dir };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
