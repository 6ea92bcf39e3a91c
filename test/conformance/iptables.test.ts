// Conformance: Istio's TestIptables cases (test/conformance/vectors/iptables), each run through the
// real CLI from `args`, `args_short` and `env_form`, with `env` and `host` injected; the dry-run
// transcript must equal the golden after TrimSpace. Cases in $CONFORMANCE_DIR/iptables run too.

import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { caseRoots, dryRun, type Case } from "./capture-harness.ts";

const { shared, roots } = caseRoots("iptables");

test("the shared conformance vectors are present (not just $CONFORMANCE_DIR's)", () => {
  expect(roots).toContain(shared);
  // 20 cases in vectors/iptables/cases.json when this was written.
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
          const r = await dryRun([...argv], { ...env }, c.host);
          expect({ form, code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ form, code: 0, err: "" });
          expect({ form, out: r.out.trim() }).toEqual({ form, out: golden });
        }
      });
    }
  });
}
