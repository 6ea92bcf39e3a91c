// One way for tests to get an AgentConfig: the real path `agent proxy` takes. The flags go
// through the real flag parser with the command's own specs (so their defaults are the CLI's),
// then the real loader runs on an in-memory file system and a fixed host. Nothing here builds
// an AgentConfig by hand, so a changed default or a new layer shows up in every test that uses it.

import { GLOBAL_FLAGS } from "../../src/cli/global.ts";
import { PROXY_FLAGS } from "../../src/cli/proxy.ts";
import type { AgentConfig, ProxyFlags } from "../../src/config/agentconfig.ts";
import type { InterfaceTable } from "../../src/config/node.ts";
import { loadAgentConfig, type Loaded, type LoadInputs } from "../../src/config/load.ts";
import { parseFlags } from "../../src/lib/flags.ts";

export interface TestConfigOptions {
  /** Proxy type (default sidecar). */
  type?: string;
  /** Command-line arguments after `proxy <type>`, e.g. `["--domain", "x.svc"]`. */
  args?: string[];
  /** The environment (default: empty). */
  env?: Record<string, string>;
  /** Files the loader may read (mesh config, pod labels/annotations), by the path it asks for. */
  files?: Record<string, string>;
  /** The agent's working directory (default `/`). */
  root?: string;
  uid?: number;
  cpuCount?: number;
  interfaces?: InterfaceTable;
}

/** The fixed host: loopback plus one pod address. */
export const TEST_INTERFACES: InterfaceTable = {
  lo: [{ address: "127.0.0.1", family: "IPv4", internal: true }],
  eth0: [{ address: "10.1.2.3", family: "IPv4", internal: false }],
};

/** `key="quoted value"` lines, as the downward API writes them. */
function parseDownward(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0) continue;
    out[line.slice(0, i)] = JSON.parse(line.slice(i + 1));
  }
  return out;
}

/** The `proxy` command's flag values, parsed as `agent proxy` parses them. */
export function testFlags(args: readonly string[] = []): ProxyFlags {
  return parseFlags(args, [...GLOBAL_FLAGS, ...PROXY_FLAGS]).values as unknown as ProxyFlags;
}

/** What the loader is given: flags, env, files and host. */
export function testInputs(opts: TestConfigOptions = {}): LoadInputs {
  const files = opts.files ?? {};
  return {
    type: opts.type ?? "sidecar",
    flags: testFlags(opts.args),
    env: opts.env ?? {},
    readFile: (p) => files[p],
    parseDownward,
    interfaces: opts.interfaces ?? TEST_INTERFACES,
    cpuCount: opts.cpuCount ?? 2,
    root: opts.root ?? "/",
    uid: opts.uid ?? 1337,
    version: "test",
  };
}

/** The loader's whole answer (config, warnings, notes). */
export function testLoad(opts: TestConfigOptions = {}): Loaded {
  return loadAgentConfig(testInputs(opts));
}

/** The effective AgentConfig for these inputs. */
export function testConfig(opts: TestConfigOptions = {}): AgentConfig {
  return testLoad(opts).config;
}
