// Conformance: Istio's nftables TestBuilder cases (test/conformance/vectors/nftables-builder). Each
// case's operations go through our NftRuleBuilder; the transaction (`add table`, `add chain`, the
// builder's rules with inserts converted by the count rule) is applied to the state model and its
// dump (knftables Fake.Dump order) must equal the golden after TrimSpace. The transaction itself
// must equal the case's recorded `transaction`. Cases in $CONFORMANCE_DIR/nftables-builder run too.

import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { NftRuleBuilder, ruleLines } from "../../src/iptables/nft-builder.ts";
import { NftState } from "../../src/iptables/nft-state.ts";
import { VECTORS } from "./vectors.ts";

interface Op {
  op: "append" | "insert";
  v6_only: boolean;
  chain: string;
  table: string;
  position?: number;
  params: string[];
}

interface Case {
  name: string;
  enable_ipv6: boolean;
  operations: Op[];
  golden: string;
  transaction?: string[];
}

const shared = join(VECTORS, "nftables-builder");
const roots = [shared, process.env.CONFORMANCE_DIR ? join(process.env.CONFORMANCE_DIR, "nftables-builder") : undefined].filter(
  (d): d is string => !!d && existsSync(join(d, "cases.json")),
);

const TABLE = "inet-table";

function transaction(c: Case): string[] {
  const rb = new NftRuleBuilder(c.enable_ipv6);
  for (const o of c.operations) {
    if (o.op === "append") o.v6_only ? rb.appendV6(o.chain, o.table, o.params) : rb.append(o.chain, o.table, o.params);
    else o.v6_only ? rb.insertV6(o.chain, o.table, o.position!, o.params) : rb.insert(o.chain, o.table, o.position!, o.params);
  }
  return [`add table inet ${TABLE}`, `add chain inet ${TABLE} test-chain`, ...ruleLines(TABLE, rb.rules(TABLE))];
}

test("nftables-builder conformance vectors are present", () => {
  expect(roots.length).toBeGreaterThan(0);
});

for (const root of roots) {
  const cases = JSON.parse(readFileSync(join(root, "cases.json"), "utf8")) as Case[];
  describe(`nftables builder conformance (${root})`, () => {
    for (const c of cases) {
      test(c.name, () => {
        const tx = transaction(c);
        if (c.transaction) expect(tx).toEqual(c.transaction);
        const dump = new NftState().apply(tx.join("\n")).dump();
        expect(dump.trim()).toBe(readFileSync(join(root, "golden", c.golden), "utf8").trim());
      });
    }
  });
}
