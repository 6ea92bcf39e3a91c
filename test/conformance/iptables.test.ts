// Conformance: Istio's TestIptables cases (../shared/conformance/iptables), each run through the
// real CLI from `args`, `args_short` and `env_form`, with `env` and `host` injected; the dry-run
// transcript must equal the golden after TrimSpace. Cases in $CONFORMANCE_DIR/iptables run too.

import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runIptables } from "../../src/cli/iptables.ts";
import type { CaptureHost } from "../../src/iptables/config.ts";

interface Case {
  name: string;
  golden: string;
  args: string[];
  args_short: string[];
  env: Record<string, string>;
  env_form: Record<string, string>;
  host: { enable_ipv6: boolean; dns_servers_v4: string[]; dns_servers_v6: string[] };
}

const shared = new URL("../../../shared/conformance/iptables", import.meta.url).pathname;
const roots = [shared, process.env.CONFORMANCE_DIR ? join(process.env.CONFORMANCE_DIR, "iptables") : undefined].filter((d): d is string => !!d && existsSync(join(d, "cases.json")));

/** The harness's host: `dns_servers_*` injected verbatim (already canonical in Istio's test). */
function fakeHost(h: Case["host"]): CaptureHost {
  return {
    localIP: () => ({ ip: h.enable_ipv6 ? "2001:db8::10" : "10.0.0.10", ipv6: h.enable_ipv6 }),
    dnsServers: () => ({ v4: [...h.dns_servers_v4], v6: [...h.dns_servers_v6] }),
    lookupUid: () => undefined,
  };
}

async function transcript(argv: string[], env: Record<string, string>, host: Case["host"]): Promise<{ out: string; code: number; err: string }> {
  let out = "";
  let err = "";
  const code = await runIptables(argv, env, { stdout: (s) => (out += s), stderr: (s) => (err += s), host: fakeHost(host), exec: async () => { throw new Error("dry run must not execute anything"); } });
  return { out, code, err };
}

test("the shared conformance vectors are present (not just $CONFORMANCE_DIR's)", () => {
  expect(roots).toContain(shared);
  // 20 cases in ../shared/conformance/iptables/cases.json when this was written.
  expect((JSON.parse(readFileSync(join(shared, "cases.json"), "utf8")) as Case[]).length).toBeGreaterThanOrEqual(20);
});

for (const root of roots) {
  const cases = JSON.parse(readFileSync(join(root, "cases.json"), "utf8")) as Case[];
  describe(`iptables conformance (${root})`, () => {
    for (const c of cases) {
      test(c.name, async () => {
        const golden = readFileSync(join(root, "golden", c.golden), "utf8").trim();
        for (const [form, argv, env] of [
          ["args", c.args, c.env],
          ["args_short", c.args_short, c.env],
          ["env_form", [], { ...c.env, ...c.env_form }],
        ] as const) {
          const r = await transcript([...argv], { ...env }, c.host);
          expect({ form, code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ form, code: 0, err: "" });
          expect({ form, out: r.out.trim() }).toEqual({ form, out: golden });
        }
      });
    }
  });
}
