// The whole agent in-process (ztunnel's `with_app`): the real composition root built from a config
// that went through the real loader (test/support/config.ts), in a temporary root directory, its
// status server on a free loopback port (the deps' listen override: a status port of 0 means "off"
// in Istio's config). Proxyless by default (DISABLE_ENVOY, istiod unreachable, the local CA: the
// agent starts and serves anyway); `envoy: true` runs the fake Envoy process
// (test/support/fake-envoy.ts) as Envoy. Every log line is kept, at debug level.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Agent, type AgentDeps, type Bound } from "../../src/agent.ts";
import { LogSink } from "../../src/lib/log.ts";
import { testConfig } from "./config.ts";
import { freePort, readRecords, writeFakeEnvoyLauncher, type FakeEnvoyRecord } from "./fake-envoy.ts";

export interface TestAgentOptions {
  /** Added to (and overriding) the proxyless defaults. */
  env?: Record<string, string>;
  /** Merged into PROXY_CONFIG. */
  proxyConfig?: Record<string, unknown>;
  /** Files written under the root before the config is loaded (relative paths). */
  files?: Record<string, string>;
  /** Run the fake Envoy instead of proxyless mode. */
  envoy?: boolean;
  /** More deps (listen overrides, platform fakes...). */
  deps?: Partial<AgentDeps>;
  /** Log levels for the kept lines (default every scope at debug). */
  logLevels?: string;
}

export interface TestAgent {
  agent: Agent;
  /** Rejects as `agent.start` does; see `started()`. */
  start: Promise<Bound>;
  /** The working directory the agent's relative paths resolve against. */
  root: string;
  /** Every line logged so far. */
  lines: string[];
  /** The fake Envoy's records (envoy: true). */
  envoyRecords(): FakeEnvoyRecord[];
  /** The fake Envoy's admin port (envoy: true). */
  adminPort?: number;
  /** Signal the agent to stop (as SIGTERM does) and wait for its exit code. */
  stop(): Promise<number>;
  /** Stop if still running, then remove the root. */
  cleanup(): Promise<void>;
}

/**
 * The env of a proxyless pod whose istiod is unreachable (nothing answers on port 1; the relay
 * dials only when a client connects) and whose certificates come from the in-process local CA.
 */
export const PROXYLESS_ENV: Record<string, string> = {
  POD_NAME: "app-0",
  POD_NAMESPACE: "demo",
  SERVICE_ACCOUNT: "app",
  INSTANCE_IP: "127.0.0.1",
  DISABLE_ENVOY: "true",
  CA_PROVIDER: "local",
  // No probing of cloud metadata servers from tests.
  CLOUD_PLATFORM: "none",
};

/** Build the agent and begin starting it; `await t.start` for the Bound. */
export async function startTestAgent(opts: TestAgentOptions = {}): Promise<TestAgent> {
  const root = mkdtempSync(join(tmpdir(), "agent-inproc-"));
  for (const [rel, text] of Object.entries(opts.files ?? {})) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  const recordFile = join(root, "envoy-record.jsonl");
  const env: Record<string, string> = { ...PROXYLESS_ENV, ...opts.env };
  const pc: Record<string, unknown> = { discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE", ...opts.proxyConfig };
  if (opts.envoy) {
    delete env.DISABLE_ENVOY;
    env.FAKE_ENVOY_RECORD = recordFile;
    pc.binaryPath = writeFakeEnvoyLauncher(root);
    pc.proxyAdminPort ??= await freePort();
    pc.drainDuration ??= "1s";
    pc.terminationDrainDuration ??= "1s";
  }
  env.PROXY_CONFIG = JSON.stringify(pc);
  // The loader asks for `./etc/istio/...`: the same files, by the paths it asks for.
  const files = Object.fromEntries(Object.entries(opts.files ?? {}).map(([rel, text]) => [`./${rel.replace(/^\.\//, "")}`, text]));
  const config = testConfig({ env, root, uid: process.getuid?.() ?? 0, files });
  const lines: string[] = [];
  const sink = new LogSink({ outputLevels: opts.logLevels ?? "all:debug", write: (l) => lines.push(l) });
  const agent = new Agent(config, { sink, listen: { status: { hostname: "127.0.0.1", port: 0 } }, ...opts.deps });
  const signal = new AbortController();
  const start = agent.start(signal.signal);
  start.catch(() => {}); // the caller awaits it
  const stop = async () => {
    signal.abort();
    return agent.done;
  };
  return {
    agent,
    start,
    root,
    lines,
    envoyRecords: () => readRecords(recordFile),
    ...(typeof pc.proxyAdminPort === "number" ? { adminPort: pc.proxyAdminPort } : {}),
    stop,
    async cleanup() {
      await stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Poll until `probe` returns a value (every 20 ms, at most `ms`); fails naming `what`. */
export async function eventually<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, ms = 5_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms}ms`);
    await Bun.sleep(20);
  }
}

/** The log lines without timestamp and level (`scope\tmessage`, or the message alone on the default scope), optionally only those matching `re`. */
export function logged(lines: readonly string[], re?: RegExp): string[] {
  const out = lines.map((l) => l.split("\t").slice(2).join("\t"));
  return re ? out.filter((m) => re.test(m)) : out;
}
