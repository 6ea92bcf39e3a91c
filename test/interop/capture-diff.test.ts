// Differential: `istio-iptables --dry-run` of our agent and of Istio's pilot-agent on the same
// generated flag/environment combinations. The iptables-restore inputs each would feed are
// compared byte for byte, the effective config block line for line, and a rejected input must
// be rejected by both. INTEROP_SEED picks the corpus, INTEROP_CAPTURE_CASES its size.

import { expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { captureCase, istioNftTranscript, reproduce, transcriptOf, type CaptureCase } from "./support/capture-corpus.ts";
import { corpusSeed, mapLimit, seededRng } from "./support/seeded.ts";

const splitGroups = (v: string | undefined): string[] => (v ?? "").split(",").map((g) => g.trim());
/** Known, reported differences: a case matching one is compared without the listed part. */
const flagValue = (c: CaptureCase, flag: string, value: string): boolean => c.args.some((a, i) => a === flag && c.args[i + 1] === value);
const EXPECTED_DIFFERENCES: { name: string; applies: (c: CaptureCase) => boolean; part: "config" | "restores" | "exit"; reason: string }[] = [
  {
    name: "invalid port, mode, UID or mark",
    applies: (c) => flagValue(c, "-p", "notaport") || flagValue(c, "-m", "SOMETIMES") || flagValue(c, "-u", "-5") || flagValue(c, "-t", "x"),
    part: "exit",
    reason:
      "a non-numeric port, unknown interception mode, negative UID or non-numeric mark: Istio's dry run accepts it (and would write rules iptables-restore rejects), we exit 1 naming the flag",
  },
  {
    name: "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE=* with --native-nftables",
    applies: (c) => c.args.includes("--native-nftables") && splitGroups(c.env.ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE).includes("*"),
    part: "exit",
    reason:
      "Istio's nftables dry run hands `skgid *` to nft, which rejects it (exit 1); ours runs nothing in a dry run (the documented nftables dry-run difference) and prints the transaction; a real run of ours fails at `nft -c` as Istio's does",
  },
];

/** Lines only we print in the config block (documented in docs/compat.md). */
const OUR_EXTRA_CONFIG = /^IPTABLES_TRACE_LOGGING=/;

interface Outcome {
  code: number;
  out: string;
  log: string;
}

/**
 * A new network namespace with loopback and a veth pair (10.0.0.5/24, fd00::5/64) up: the agents
 * need a local IP. The command starts at once: v0's carrier may not be set yet, and both agents
 * list the addresses of an interface without carrier (Go's net package; ours getifaddrs, see
 * local-ip.test.ts).
 */
const NETNS_PREFIX = [
  "unshare",
  "--net",
  "--",
  "sh",
  "-c",
  'ip link set lo up && ip link add v0 type veth peer name v1 && ip addr add 10.0.0.5/24 dev v0 && ip -6 addr add fd00::5/64 dev v0 nodad && ip link set v0 up && ip link set v1 up && exec "$@"',
  "netns",
];

/** `netns`: run in a new network namespace (Istio's nftables dry run programs the namespace it runs in). */
async function dryRun(bin: string, c: CaptureCase, netns = false): Promise<Outcome> {
  const p = Bun.spawn([...(netns ? NETNS_PREFIX : []), bin, "istio-iptables", ...c.args], {
    cwd: "/",
    env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin", ...c.env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, log: out + "\n" + err };
}

describeRequiring({ check: () => interopUnmet(["pilot-agent"]) }, "capture differential: istio-iptables --dry-run, ours vs Istio's pilot-agent", () => {
  const seed = corpusSeed(15001);
  const size = Number(process.env.INTEROP_CAPTURE_CASES ?? 500);
  const rng = seededRng(seed);
  const seen = new Set<string>();
  const cases: CaptureCase[] = [];
  while (cases.length < size) {
    const c = captureCase(rng);
    const key = JSON.stringify(c);
    if (seen.has(key)) continue;
    seen.add(key);
    cases.push(c);
  }

  test("the transcript extraction finds the restore input in Istio's own output", async () => {
    const o = await dryRun(PILOT_AGENT, { args: ["--dry-run"], env: {} });
    const t = transcriptOf(o.log);
    expect(o.code).toBe(0);
    expect(t.restores.length).toBe(1);
    expect(t.restores[0]!.split("\n").slice(0, 3)).toEqual(["iptables-restore", "* nat", "-N ISTIO_INBOUND"]);
    expect(t.config).toContain("PROXY_PORT=15001");
  });

  test(`${size} generated cases (seed ${seed}): same restore inputs, same config, same accept/reject`, async () => {
    requireBinary();
    console.log(`capture differential: seed ${seed} (INTEROP_SEED=${seed} reproduces), ${cases.length} cases`);
    const failures: string[] = [];
    let accepted = 0;
    const seenExpected = new Map<string, number>();
    await mapLimit(cases, 6, async (c) => {
      const [theirs, ours] = await Promise.all([dryRun(PILOT_AGENT, c), dryRun(DIST_AGENT, c)]);
      const expected = EXPECTED_DIFFERENCES.filter((d) => d.applies(c));
      for (const d of expected) seenExpected.set(d.name, (seenExpected.get(d.name) ?? 0) + 1);
      const skip = new Set(expected.map((d) => d.part));
      const problems: string[] = [];
      if (!skip.has("exit") && (theirs.code === 0) !== (ours.code === 0)) {
        problems.push(`exit: Istio ${theirs.code}, ours ${ours.code}`);
      }
      if (theirs.code === 0 && ours.code === 0) {
        accepted++;
        const a = transcriptOf(theirs.log);
        const b = transcriptOf(ours.log);
        if (!skip.has("restores") && JSON.stringify(a.restores) !== JSON.stringify(b.restores)) {
          problems.push(`restore inputs differ:\n--- Istio\n${a.restores.join("\n")}\n--- ours\n${b.restores.join("\n")}`);
        }
        const ourConfig = b.config.filter((l) => !OUR_EXTRA_CONFIG.test(l));
        if (!skip.has("config") && JSON.stringify(a.config) !== JSON.stringify(ourConfig)) {
          const only = (x: string[], y: string[]) => x.filter((l) => !y.includes(l));
          problems.push(`config differs: Istio only ${JSON.stringify(only(a.config, ourConfig))}, ours only ${JSON.stringify(only(ourConfig, a.config))}`);
        }
      }
      if (problems.length) failures.push(`${reproduce(c, "<agent>")}\n  ${problems.join("\n  ")}`);
    });
    for (const [name, n] of seenExpected) console.log(`capture differential: expected difference "${name}" in ${n} cases`);
    if (failures.length) {
      console.log(`capture differential: ${failures.length}/${cases.length} cases differ (seed ${seed}); first ones:\n\n${failures.slice(0, 8).join("\n\n")}`);
    }
    expect(failures.length).toBe(0);
    // A corpus where nearly everything is rejected would prove nothing.
    expect(accepted).toBeGreaterThan(cases.length / 2);
  }, 900_000);
});

describeRequiring(
  { root: true, tools: ["nft", "unshare", "ip"], apt: ["nftables", "util-linux", "iproute2"], check: () => interopUnmet(["pilot-agent"]) },
  "capture differential: istio-iptables --native-nftables --dry-run, ours vs Istio's pilot-agent",
  () => {
    const seed = corpusSeed(15002);
    const size = Number(process.env.INTEROP_NFT_CASES ?? 150);
    const rng = seededRng(seed);
    const cases: CaptureCase[] = [];
    const seen = new Set<string>();
    while (cases.length < size) {
      const c = captureCase(rng);
      c.args.push("--native-nftables");
      const key = JSON.stringify(c);
      if (!seen.has(key)) (seen.add(key), cases.push(c));
    }

    test(`${size} generated cases (seed ${seed}): the same nftables transaction, same accept/reject`, async () => {
      requireBinary();
      console.log(
        `nftables capture differential: seed ${seed} (INTEROP_SEED=${seed} reproduces), ${cases.length} cases, each agent in its own network namespace`,
      );
      const failures: string[] = [];
      let accepted = 0;
      await mapLimit(cases, 4, async (c) => {
        const [theirs, ours] = await Promise.all([dryRun(PILOT_AGENT, c, true), dryRun(DIST_AGENT, c, true)]);
        const expected = EXPECTED_DIFFERENCES.some((d) => d.part === "exit" && d.applies(c));
        const problems: string[] = [];
        if (!expected && (theirs.code === 0) !== (ours.code === 0)) problems.push(`exit: Istio ${theirs.code}, ours ${ours.code}`);
        if (theirs.code === 0 && ours.code === 0) {
          accepted++;
          const a = istioNftTranscript(theirs.log) ?? "(none logged)";
          const b = ours.out.trim();
          if (a !== b) problems.push(`transactions differ:\n--- Istio\n${a}\n--- ours\n${b}`);
        }
        if (problems.length) failures.push(`unshare --net ${reproduce(c, "<agent>")}\n  ${problems.join("\n  ")}`);
      });
      if (failures.length)
        console.log(
          `nftables capture differential: ${failures.length}/${cases.length} cases differ (seed ${seed}); first ones:\n\n${failures.slice(0, 6).join("\n\n")}`,
        );
      expect(failures.length).toBe(0);
      expect(accepted).toBeGreaterThan(cases.length / 2);
    }, 900_000);
  },
);
