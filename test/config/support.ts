// Test inputs for loadAgentConfig: an in-memory file system and a small downward-API parser.
import type { LoadInputs } from "../../src/config/load.ts";
import type { ProxyFlags } from "../../src/config/agentconfig.ts";
import { testFlags } from "../support/config.ts";

/** The `proxy` command's flag defaults, from the real flag parser (test/support/config.ts). */
export const DEFAULT_FLAGS: ProxyFlags = testFlags();

function parseDownward(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0) continue;
    out[line.slice(0, i)] = JSON.parse(line.slice(i + 1));
  }
  return out;
}

export function inputs(
  opts: { files?: Record<string, string>; env?: Record<string, string>; flags?: Partial<ProxyFlags>; type?: string; unreadable?: string[] } = {},
): LoadInputs {
  const files = opts.files ?? {};
  return {
    type: opts.type ?? "sidecar",
    flags: { ...DEFAULT_FLAGS, ...opts.flags },
    env: opts.env ?? {},
    readFile: (p) => {
      if (opts.unreadable?.includes(p)) throw new Error("EACCES: permission denied");
      return files[p];
    },
    parseDownward,
    interfaces: { lo: [{ address: "127.0.0.1", family: "IPv4", internal: true }], eth0: [{ address: "10.1.2.3", family: "IPv4", internal: false }] },
    cpuCount: 2,
    root: "/",
    uid: 1337,
    version: "test",
  };
}

export function annotationsFile(annos: Record<string, string>): string {
  return Object.entries(annos)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join("\n");
}
