// Conformance: Istio's TestBuilder cases (test/conformance/vectors/iptables-builder): commands and
// restore goldens per family, plus the inline check / cleanup / state expectations. Cases in
// $CONFORMANCE_DIR/iptables-builder run too.

import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { buildCheck, buildCleanup, buildCommands, buildRestore, RuleBuilder, stateFromSave } from "../../src/iptables/builder.ts";
import { VECTORS } from "./vectors.ts";

interface Op {
  op: "append" | "insert";
  family: "v4" | "v6";
  chain: string;
  table: string;
  position?: number;
  params: string[];
}
interface FamilyExpect {
  expect_rules: boolean;
  commands_golden?: string;
  restore_golden?: string;
  commands?: string[][];
  restore?: string;
}
interface BuilderCase {
  name: string;
  enable_ipv6: boolean;
  operations: Op[];
  v4: FamilyExpect;
  v6: FamilyExpect;
}
interface InlineCase {
  name: string;
  enable_ipv6: boolean;
  operations: Op[];
  expected_v4?: string[][];
  expected_v6?: string[][];
  expected_state?: Record<string, Record<string, string[]>>;
}

const shared = join(VECTORS, "iptables-builder");
const roots = [shared, process.env.CONFORMANCE_DIR ? join(process.env.CONFORMANCE_DIR, "iptables-builder") : undefined].filter(
  (d): d is string => !!d && existsSync(d),
);

function build(c: { enable_ipv6: boolean; operations: Op[] }): RuleBuilder {
  const rb = new RuleBuilder(c.enable_ipv6);
  for (const o of c.operations) {
    if (o.op === "append") rb.appendFamily(o.family, o.chain, o.table, o.params);
    else rb.insertFamily(o.family, o.chain, o.table, o.position!, o.params);
  }
  return rb;
}

const joinCommands = (cmds: string[][]) => cmds.map((c) => c.join(" ") + "\n").join("");

test("the shared builder conformance vectors are present (not just $CONFORMANCE_DIR's)", () => {
  expect(roots).toContain(shared);
  // 11 cases plus check, cleanup and state in vectors/iptables-builder when this was written.
  expect((JSON.parse(readFileSync(join(shared, "cases.json"), "utf8")) as unknown[]).length).toBeGreaterThanOrEqual(11);
  expect(Object.keys(JSON.parse(readFileSync(join(shared, "extra_cases.json"), "utf8")) as object).sort()).toEqual(["check", "cleanup", "state"]);
});

for (const root of roots) {
  describe(`iptables-builder conformance (${root})`, () => {
    if (existsSync(join(root, "cases.json"))) {
      for (const c of JSON.parse(readFileSync(join(root, "cases.json"), "utf8")) as BuilderCase[]) {
        test(c.name, () => {
          const rb = build(c);
          for (const f of ["v4", "v6"] as const) {
            const e = c[f];
            const commands = buildCommands(rb.rules(f));
            const restore = buildRestore(rb.rules(f));
            if (!e.expect_rules) {
              expect(commands).toEqual([]);
              expect(restore).toBe("");
              continue;
            }
            const golden = (name: string) => readFileSync(join(root, "golden", name), "utf8").trim();
            expect({ f, commands: joinCommands(commands).trim() }).toEqual({ f, commands: golden(e.commands_golden!) });
            expect({ f, restore: restore.trim() }).toEqual({ f, restore: golden(e.restore_golden!) });
          }
        });
      }
    }
    if (existsSync(join(root, "extra_cases.json"))) {
      const extra = JSON.parse(readFileSync(join(root, "extra_cases.json"), "utf8")) as {
        check?: InlineCase | InlineCase[];
        cleanup?: InlineCase | InlineCase[];
        state?: InlineCase | InlineCase[];
      };
      const list = (x: InlineCase | InlineCase[] | undefined) => (x === undefined ? [] : Array.isArray(x) ? x : [x]);
      for (const c of list(extra.check)) {
        test(c.name, () => {
          const rb = build(c);
          expect(buildCheck(rb.rules("v4"))).toEqual(c.expected_v4!);
          expect(buildCheck(rb.rules("v6"))).toEqual(c.expected_v6!);
        });
      }
      for (const c of list(extra.cleanup)) {
        test(c.name, () => {
          const rb = build(c);
          expect(buildCleanup(rb.rules("v4"))).toEqual(c.expected_v4!);
          expect(buildCleanup(rb.rules("v6"))).toEqual(c.expected_v6!);
        });
      }
      for (const c of list(extra.state)) {
        test(c.name, () => {
          const rb = build(c);
          expect(stateFromSave(buildRestore(rb.rules("v4")))).toEqual(c.expected_state!);
        });
      }
    }
  });
}
