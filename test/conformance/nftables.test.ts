// Conformance: Istio's TestNftables cases (test/conformance/vectors/nftables), each run through the
// real CLI (`agent iptables --native-nftables --dry-run`) from `args`, `args_short` and
// `env_form`, with `env` and `host` injected; the printed transaction must equal the golden after
// TrimSpace. Cases in $CONFORMANCE_DIR/nftables run too.

import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { caseRoots, dryRun, type Case } from "./capture-harness.ts";

const { roots } = caseRoots("nftables");

test("nftables conformance vectors are present", () => {
  expect(roots.length).toBeGreaterThan(0);
});

for (const root of roots) {
  const cases = JSON.parse(readFileSync(join(root, "cases.json"), "utf8")) as Case[];
  describe(`nftables conformance (${root})`, () => {
    for (const c of cases) {
      test(c.name, async () => {
        const golden = readFileSync(join(root, "golden", c.golden), "utf8").trim();
        for (const [form, argv, env] of [
          ["args", c.args, c.env],
          ["args_short", c.args_short, c.env],
          ["env_form", [], { ...c.env, ...c.env_form }],
        ] as const) {
          const r = await dryRun([...argv], { ...env }, c.host);
          expect({ form, code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ form, code: 0, err: "" });
          expect({ form, out: r.out.trim() }).toEqual({ form, out: golden });
        }
      });
    }
  });
}
