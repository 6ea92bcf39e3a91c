// Istio's VerifyIptablesState: compare the live state (iptables-save) with the planned rules to
// decide between "clean, apply", "compatible residue, nothing to do" and "drift, reconcile".

import type { Logger } from "../lib/log.ts";
import { buildCheck, buildRestore, stateFromSave, type RuleBuilder, type TableState } from "./builder.ts";
import type { IptablesVersion, Xtables } from "./deps.ts";
import { errorMessage } from "../lib/errors.ts";

export interface StateVerdict {
  /** ISTIO residue from an earlier run exists (in a family with planned rules). */
  residue: boolean;
  /** The live state differs from the planned one (or is clean): rules must be applied. */
  delta: boolean;
}

function isEmpty(state: TableState): boolean {
  return Object.values(state).every((chains) => Object.keys(chains).length === 0);
}

/** Pure part of the comparison (chains present, ISTIO_ rule counts, no extra ISTIO_ chains). */
export function structuralDelta(current: TableState, expected: TableState): string | undefined {
  for (const [table, chains] of Object.entries(expected)) {
    const cur = current[table];
    if (!cur) return `table ${table} missing`;
    for (const [chain, rules] of Object.entries(chains)) {
      const have = cur[chain];
      if (!have || (chain.startsWith("ISTIO_") && have.length !== rules.length))
        return `chain ${chain} (table ${table}) missing or with a different number of rules`;
    }
  }
  for (const [table, chains] of Object.entries(current)) {
    for (const chain of Object.keys(chains)) {
      if (chain.startsWith("ISTIO_") && !expected[table]?.[chain]) return `unexpected chain ${chain} (table ${table})`;
    }
  }
  return undefined;
}

export async function verifyState(xt: Xtables, rb: RuleBuilder, v4: IptablesVersion, v6: IptablesVersion | undefined, log: Logger): Promise<StateVerdict> {
  const results: { residue: boolean; delta: boolean; planned: boolean; name: string }[] = [];
  for (const [ver, family, name] of [
    [v4, "v4", "IPv4"],
    [v6, "v6", "IPv6"],
  ] as const) {
    if (!ver) {
      results.push({ residue: false, delta: false, planned: false, name });
      continue;
    }
    const expected = stateFromSave(buildRestore(rb.rules(family)));
    const planned = !isEmpty(expected);
    let output: string;
    try {
      output = await xt.run("save", ver, []);
    } catch (e) {
      log.warn(`[${name}] iptables-save failed. Assuming clean state: ${errorMessage(e)}`);
      results.push({ residue: false, delta: planned, planned, name });
      continue;
    }
    const current = stateFromSave(output);
    const residue = !isEmpty(current);
    let delta = false;
    if (!residue) delta = planned;
    else {
      const why = structuralDelta(current, expected);
      if (why) {
        log.debug(`[${name}] ${why}`);
        delta = true;
      } else {
        for (const cmd of buildCheck(rb.rules(family))) {
          try {
            await xt.run("iptables", ver, cmd);
          } catch {
            log.debug(`[${name}] iptables check rules failed: ${cmd.join(" ")}`);
            delta = true;
            break;
          }
        }
      }
    }
    results.push({ residue, delta, planned, name });
  }
  let residue = false;
  let delta = false;
  for (const r of results) {
    delta ||= r.delta;
    if (r.residue && r.planned) residue = true;
    else if (r.residue) log.info(`Ignoring residues because no rules are planned for ${r.name}`);
  }
  if (!residue) {
    log.info("Clean-state detected, new iptables are needed");
    return { residue: false, delta: true };
  }
  log.info(
    delta
      ? "Found residues of old iptables rules/chains, reconciliation is recommended"
      : "Found compatible residues of old iptables rules/chains, reconciliation not needed",
  );
  return { residue, delta };
}
