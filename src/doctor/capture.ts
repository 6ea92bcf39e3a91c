// Are the traffic capture rules in place, and (on a VM, where the same environment drives
// `agent iptables`) are they the ones this configuration produces: the live `iptables-save` dump
// compared with the rules `agent iptables --dry-run` would apply. Read-only: only *-save runs.

import type { EnvMap } from "../config/envdecl.ts";
import type { Exec } from "../iptables/deps.ts";
import { buildRestore, stateFromSave, type TableState } from "../iptables/builder.ts";
import { fillFromEnvironment, validateCaptureConfig, type CaptureHost } from "../iptables/config.ts";
import { parseCaptureCommand } from "../iptables/flags.ts";
import { generateRules } from "../iptables/rules.ts";
import { errorMessage } from "../lib/errors.ts";
import { fail, ok, skip, warn, type Finding } from "./finding.ts";

const NAME = "capture";
const RERUN = "run `agent iptables --cleanup-only` then `agent iptables` with this environment (istio-start.sh does both before starting the agent)";

/** The v4 rules `agent iptables` would apply for `env`, as a save-like table state. */
export function expectedCapture(env: EnvMap, host: CaptureHost): TableState | { skip: string } {
  const parsed = parseCaptureCommand([], env);
  if (parsed.cfg.NATIVE_NFTABLES) return { skip: "NATIVE_NFTABLES=true: compare `nft list ruleset` with `agent iptables --dry-run` by hand" };
  const cfg = fillFromEnvironment(parsed.cfg, parsed.envOnly, host);
  validateCaptureConfig(cfg);
  return stateFromSave(buildRestore(generateRules(cfg).builder.v4));
}

/** A rule as a canonical string: `-m tcp`/`-m udp` (added by iptables-save) dropped, host addresses given a prefix, options sorted. */
export function canonicalRule(rule: string): string {
  const t = rule.trim().split(/\s+/);
  const units: string[] = [];
  let jump = "";
  let i = 0;
  const isOption = (s: string | undefined) => s !== undefined && /^--?[a-zA-Z]/.test(s);
  while (i < t.length) {
    let neg = "";
    if (t[i] === "!") {
      neg = "! ";
      i++;
    }
    const opt = t[i++] ?? "";
    const args: string[] = [];
    while (i < t.length && !isOption(t[i]) && t[i] !== "!") args.push(t[i++]!);
    if (opt === "-A" || opt === "-I" || opt === "--append" || opt === "--insert") continue;
    if (opt === "-m" && (args[0] === "tcp" || args[0] === "udp")) continue;
    if ((opt === "-d" || opt === "-s") && args[0] && !args[0].includes("/")) args[0] += args[0].includes(":") ? "/128" : "/32";
    const unit = `${neg}${opt} ${args.join(" ")}`.trim();
    if (opt === "-j") jump = unit;
    else units.push(unit);
  }
  return [...units.sort(), jump].join(" ").trim();
}

/** Chain -> canonical rules of the Istio part of a state: ISTIO_ chains and built-in rules jumping to them. */
function istioPart(state: TableState): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [table, chains] of Object.entries(state)) {
    for (const [chain, rules] of Object.entries(chains)) {
      const kept = chain.startsWith("ISTIO") ? rules : rules.filter((r) => /(^|\s)-j\s+ISTIO/.test(r));
      if (chain.startsWith("ISTIO") || kept.length) out.set(`${table}/${chain}`, kept.map(canonicalRule).sort());
    }
  }
  return out;
}

/** Differences, `table/chain: missing|unexpected <rule>`, at most `max`. */
export function captureDifferences(expected: TableState, actual: TableState, max = 8): string[] {
  const e = istioPart(expected);
  const a = istioPart(actual);
  const out: string[] = [];
  for (const key of [...new Set([...e.keys(), ...a.keys()])].sort()) {
    const want = [...(e.get(key) ?? [])];
    const have = [...(a.get(key) ?? [])];
    for (const r of want) {
      const j = have.indexOf(r);
      if (j >= 0) have.splice(j, 1);
      else out.push(`${key}: missing ${r}`);
    }
    for (const r of have) out.push(`${key}: unexpected ${r}`);
  }
  return out.slice(0, max);
}

const SAVE_BINARIES = (force: string) => (force ? [`iptables-${force}-save`] : ["iptables-legacy-save", "iptables-nft-save", "iptables-save"]);

/** The first save dump holding Istio chains, or the errors of every binary tried. */
async function liveRules(exec: Exec, force: string): Promise<{ binary: string; dump: string } | { none: string[]; ran: boolean }> {
  const errors: string[] = [];
  let ran = false;
  for (const bin of SAVE_BINARIES(force)) {
    const r = await exec(bin, []).catch((e: unknown) => ({ code: 127, stdout: "", stderr: errorMessage(e) }));
    if (r.code !== 0) {
      errors.push(`${bin}: ${(r.stderr || r.stdout).trim().split("\n")[0] || `exit status ${r.code}`}`);
      continue;
    }
    ran = true;
    if (/^:ISTIO/m.test(r.stdout)) return { binary: bin, dump: r.stdout };
  }
  return { none: errors, ran };
}

/**
 * `compareWith`: the environment `agent iptables` runs with (a VM); undefined for a pod, whose
 * init container had its own flags: then only the presence of the rules is checked.
 */
export async function checkCapture(exec: Exec, env: EnvMap, host: CaptureHost, compare: boolean, interception: string): Promise<Finding> {
  if (interception === "NONE") return skip(NAME, "interception mode NONE: no capture rules expected");
  const force = env.FORCE_IPTABLES_BINARY ?? "";
  const live = await liveRules(exec, force);
  if ("none" in live) {
    if (!live.ran) {
      const notFound = live.none.every((e) => /ENOENT|not found/i.test(e));
      return warn(
        NAME,
        `cannot read the iptables rules (${live.none.join("; ")})`,
        notFound ? "install iptables, or put /usr/sbin on PATH" : "run `agent doctor` as root (reading the rules needs CAP_NET_ADMIN)",
      );
    }
    return fail(NAME, "no Istio capture rules (no ISTIO_* chain in iptables-save): traffic bypasses the proxy", RERUN);
  }
  if (!compare) return ok(NAME, `Istio capture rules present (${live.binary})`);
  let expected: TableState | { skip: string };
  try {
    expected = expectedCapture(env, host);
  } catch (e) {
    return fail(NAME, `the capture settings are invalid: ${errorMessage(e)}`, "fix the variable named (cluster.env or sidecar.env)");
  }
  if (typeof expected.skip === "string") return skip(NAME, expected.skip);
  const diffs = captureDifferences(expected as TableState, stateFromSave(live.dump));
  if (diffs.length === 0) return ok(NAME, `Istio capture rules present (${live.binary}) and match this configuration`);
  return fail(NAME, `the capture rules (${live.binary}) differ from what this configuration produces: ${diffs.join("; ")}`, RERUN);
}
