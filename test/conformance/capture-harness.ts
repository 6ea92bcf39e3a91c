// What the iptables and nftables conformance harnesses share: Istio's case layout, where the cases
// live, the injected host, and a dry run through the real CLI that must execute nothing.

import { existsSync } from "node:fs";
import { join } from "node:path";
import { runIptables } from "../../src/cli/iptables.ts";
import type { CaptureHost } from "../../src/iptables/config.ts";
import { VECTORS } from "./vectors.ts";

export interface Case {
  name: string;
  golden: string;
  args: string[];
  args_short: string[];
  env: Record<string, string>;
  env_form: Record<string, string>;
  host: { enable_ipv6: boolean; dns_servers_v4: string[]; dns_servers_v6: string[] };
}

/** vectors/<kind> (test/conformance/vectors), plus $CONFORMANCE_DIR/<kind> when set; only folders with cases.json. */
export function caseRoots(kind: string): { shared: string; roots: string[] } {
  const shared = join(VECTORS, kind);
  const roots = [shared, process.env.CONFORMANCE_DIR ? join(process.env.CONFORMANCE_DIR, kind) : undefined].filter(
    (d): d is string => !!d && existsSync(join(d, "cases.json")),
  );
  return { shared, roots };
}

/** The harness's host: `dns_servers_*` injected verbatim (Istio's tests put them into rules as given). */
export function fakeHost(h: Case["host"]): CaptureHost {
  return {
    localIP: () => ({ ip: h.enable_ipv6 ? "2001:db8::10" : "10.0.0.10", ipv6: h.enable_ipv6 }),
    dnsServers: () => ({ v4: [...h.dns_servers_v4], v6: [...h.dns_servers_v6] }),
    lookupUid: () => undefined,
  };
}

/** `agent iptables <argv>` with the case's env and host; any attempt to execute a command throws. */
export async function dryRun(argv: string[], env: Record<string, string>, host: Case["host"]): Promise<{ out: string; code: number; err: string }> {
  let out = "";
  let err = "";
  const code = await runIptables(argv, env, {
    stdout: (s) => (out += s),
    stderr: (s) => (err += s),
    host: fakeHost(host),
    exec: async () => {
      throw new Error("dry run must not execute anything");
    },
  });
  return { out, code, err };
}
