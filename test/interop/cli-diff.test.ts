// Differential: the command line of our agent against Istio's pilot-agent. Every flag in each
// subcommand's --help, and the exit status of help and bad input, must be the same; the known,
// reported differences are listed below (docs/compat.md, "found by the differential suite").

import { expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";

const SUBCOMMANDS = ["", "proxy", "istio-iptables", "request", "wait", "version", "completion"];

/** Flags in Istio's --help that ours lacks, per subcommand (reported differences). */
const KNOWN_MISSING: Record<string, string[]> = {};
/** Flags only ours lists (additions, documented). */
const KNOWN_EXTRA: Record<string, string[]> = {
  proxy: ["--config-yaml", "--enable-core-dump", "--localXdsPath", "--skip-deprecated-logs"],
  "istio-iptables": ["--iptables-trace-logging"],
  completion: ["--no-descriptions"],
};
/** Command lines whose exit status differs (reported): Istio's, ours. */
const KNOWN_EXIT: Record<string, [number, number]> = {};
const MORE_LINES = ["wait --help", "version --help", "request --help", "completion --help"];

function run(bin: string, args: string[]): { code: number; text: string } {
  const p = Bun.spawnSync([bin, ...args], { cwd: "/", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, text: p.stdout.toString() + p.stderr.toString() };
}
const flagsIn = (help: string): Set<string> => new Set(help.match(/--[a-zA-Z][\w-]*/g) ?? []);

describeRequiring({ check: () => interopUnmet(["pilot-agent"]) }, "CLI differential: ours vs Istio's pilot-agent", () => {
  for (const sub of SUBCOMMANDS) {
    test(`\`${sub || "(root)"} --help\`: the same flags, except the listed differences`, () => {
      requireBinary();
      const args = [...(sub ? [sub] : []), "--help"];
      const theirs = flagsIn(run(PILOT_AGENT, args).text);
      const ours = flagsIn(run(DIST_AGENT, args).text);
      expect(theirs.size).toBeGreaterThan(0);
      const missing = [...theirs].filter((f) => !ours.has(f)).sort();
      const extra = [...ours].filter((f) => !theirs.has(f)).sort();
      expect(missing).toEqual((KNOWN_MISSING[sub] ?? []).slice().sort());
      expect(extra).toEqual((KNOWN_EXTRA[sub] ?? []).slice().sort());
    });
  }

  const lines = [
    "--help",
    "help",
    "version",
    "bogus",
    "--bogus",
    "proxy --bogus",
    "proxy bogus-type",
    "istio-iptables --bogus",
    "istio-iptables -n --vklog=9",
    "istio-iptables -n --log_output_level=default:loud",
    "request",
    "request GET",
    "wait --bogus",
    "version --bogus",
    ...MORE_LINES,
    ...Object.keys(KNOWN_EXIT),
  ];
  test("exit status of help, version and bad input: the same, except the listed differences", () => {
    requireBinary();
    const diffs: string[] = [];
    for (const line of [...new Set(lines)]) {
      const args = line.split(" ");
      const a = run(PILOT_AGENT, args).code;
      const b = run(DIST_AGENT, args).code;
      const known = KNOWN_EXIT[line];
      if (known ? known[0] !== a || known[1] !== b : a !== b)
        diffs.push(`${line}: Istio ${a}, ours ${b}${known ? ` (listed as Istio ${known[0]}, ours ${known[1]})` : ""}`);
    }
    expect(diffs).toEqual([]);
  }, 60_000);
});
