// Native nftables units: the insert-to-add count rule, trace companions, the state model's
// refusals, the read-back summary of real `nft -j` output, the sweep of tables a configuration
// leaves out, and the CLI's real-run flow (check before apply, read-back, version) on a fake nft.

import { describe, expect, test } from "bun:test";
import { runIptables } from "../../src/cli/iptables.ts";
import type { CaptureHost } from "../../src/iptables/config.ts";
import { defaultCaptureConfig } from "../../src/iptables/config.ts";
import type { Exec } from "../../src/iptables/deps.ts";
import { NftRuleBuilder, renderCleanupProgram, renderProgram, ruleLines } from "../../src/iptables/nft-builder.ts";
import { nftProgram, parseNftVersion, sweepLines } from "../../src/iptables/nft-capture.ts";
import { generateNftRules } from "../../src/iptables/nft-rules.ts";
import { diffSummaries, NftState, summaryFromJson } from "../../src/iptables/nft-state.ts";
import { memoryLogger } from "../../src/lib/log.ts";

describe("insert lines", () => {
  test("an insert into an empty chain or at/after its end is an add; each rule counts, converted or not", () => {
    const rb = new NftRuleBuilder(false);
    rb.insert("c", "t", 0, ["a"]); // empty chain -> add
    rb.insert("c", "t", 0, ["b"]); // 1 rule, index 0 -> insert
    rb.insert("c", "t", 2, ["c"]); // 2 rules, index 2 -> add
    rb.insert("c", "t", 2, ["d"]); // 3 rules, index 2 -> insert
    rb.insert("other", "t", 1, ["e"]); // counts are per chain
    expect(ruleLines("t", rb.rules("t"))).toEqual([
      "add rule inet t c a",
      "insert rule inet t c index 0 b",
      "add rule inet t c c",
      "insert rule inet t c index 2 d",
      "add rule inet t other e",
    ]);
  });

  test("v6-only calls store nothing without IPv6", () => {
    const rb = new NftRuleBuilder(false);
    rb.appendV6("c", "t", ["ip6", "x"]).insertV6("c", "t", 0, ["ip6", "y"]);
    expect(rb.rules("t")).toEqual([]);
  });
});

describe("trace companions", () => {
  test("a traced rule gets a `log group 1337` rule with its matches in front of it; untraced rules do not", () => {
    const rb = new NftRuleBuilder(false, true);
    rb.append("c", "t", ["iifname", "eth0", "counter", "return"], "ExcludeInterfaceCommand");
    rb.append("c", "t", ["counter", "return"]);
    rb.insert("c", "t", 0, ["iifname", "v1", "counter", "return"], "KubevirtCommand");
    expect(ruleLines("t", rb.rules("t"))).toEqual([
      'add rule inet t c iifname eth0 log prefix "ExcludeInterfaceCommand" group 1337 snaplen 20',
      "add rule inet t c iifname eth0 counter return",
      "add rule inet t c counter return",
      "insert rule inet t c index 0 iifname v1 counter return",
      'insert rule inet t c index 0 iifname v1 log prefix "KubevirtCommand" group 1337 snaplen 20',
    ]);
    const state = new NftState().apply(["add table inet t", "add chain inet t c", ...ruleLines("t", rb.rules("t"))].join("\n"));
    expect(state.dump().split("\n").slice(2, 4)).toEqual([
      'add rule inet t c iifname v1 log prefix "KubevirtCommand" group 1337 snaplen 20',
      "add rule inet t c iifname v1 counter return",
    ]);
  });

  test("IPTABLES_TRACE_LOGGING puts companions before the capture rules; off, the program has none", () => {
    const cfg = { ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337", OUTBOUND_IPRANGES_INCLUDE: "*", INBOUND_PORTS_INCLUDE: "*" };
    const traced = renderProgram(generateNftRules({ ...cfg, TRACE_LOGGING: true }).builder);
    expect(traced).toContain(
      'add rule inet istio-proxy-nat output log prefix "JumpOutbound" group 1337 snaplen 20\nadd rule inet istio-proxy-nat output counter jump istio-output\n',
    );
    expect(traced).toContain(
      'add rule inet istio-proxy-nat istio-redirect meta l4proto tcp log prefix "OutboundCapture" group 1337 snaplen 20\nadd rule inet istio-proxy-nat istio-redirect meta l4proto tcp counter redirect to :15001\n',
    );
    expect(traced).toContain('add rule inet istio-proxy-nat prerouting meta l4proto tcp log prefix "JumpInbound" group 1337 snaplen 20\n');
    expect(renderProgram(generateNftRules(cfg).builder)).not.toContain(" log ");
  });
});

describe("state model", () => {
  test("refuses what nft refuses: insert past the end, jump to a missing chain, rule in a missing chain or table", () => {
    const base = "add table inet t\nadd chain inet t c\n";
    expect(() => new NftState().apply(base + "insert rule inet t c index 0 return")).toThrow("index 0 is past the 0 rule(s) of chain c");
    expect(() => new NftState().apply(base + "add rule inet t c jump nowhere")).toThrow("jump to chain nowhere, which does not exist");
    expect(() => new NftState().apply(base + "add rule inet t d return")).toThrow("no chain d in table inet t");
    expect(() => new NftState().apply("add rule inet u c return")).toThrow("no table inet u");
    expect(() => new NftState().apply("delete table inet u")).toThrow("no table inet u");
  });

  test("flush empties the chains but keeps them; delete removes the table", () => {
    const s = new NftState().apply("add table inet t\nadd chain inet t c\nadd rule inet t c return\nflush table inet t\n");
    expect(s.dump()).toBe("add table inet t\nadd chain inet t c\n");
    expect(s.apply("delete table inet t").dump()).toBe("");
  });

  test("the cleanup program adds then deletes each of our tables, in order", () => {
    expect(renderCleanupProgram()).toBe(
      "add table inet istio-proxy-nat\ndelete table inet istio-proxy-nat\nadd table inet istio-proxy-mangle\ndelete table inet istio-proxy-mangle\nadd table inet istio-proxy-raw\ndelete table inet istio-proxy-raw\n",
    );
    expect(new NftState().apply(renderCleanupProgram()).dump()).toBe("");
  });

  test("IPv6-only DNS servers with IPv6 off: a clear error instead of a jump to a chain that is never created", () => {
    const cfg = { ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337", REDIRECT_DNS: true, DNS_SERVERS_V6: ["fd00::53"] };
    expect(() => nftProgram(cfg, memoryLogger().log)).toThrow(
      /nftables rules are inconsistent \(jump to chain istio-output-dns, which does not exist in table inet istio-proxy-nat.*check the DNS servers and IPv6 settings/,
    );
  });
});

// `nft -j list ruleset inet` of nft 1.0.6 after a small program plus a foreign table.
const REAL_JSON = `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "inet", "name": "istio-proxy-nat", "handle": 1}}, {"chain": {"family": "inet", "table": "istio-proxy-nat", "name": "output", "handle": 1, "type": "nat", "hook": "output", "prio": -100, "policy": "accept"}}, {"chain": {"family": "inet", "table": "istio-proxy-nat", "name": "istio-output", "handle": 2}}, {"rule": {"family": "inet", "table": "istio-proxy-nat", "chain": "output", "handle": 3, "expr": [{"counter": {"packets": 0, "bytes": 0}}, {"jump": {"target": "istio-output"}}]}}, {"rule": {"family": "inet", "table": "istio-proxy-nat", "chain": "istio-output", "handle": 4, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "skuid"}}, "right": 1337}}, {"counter": {"packets": 0, "bytes": 0}}, {"return": null}]}}, {"table": {"family": "inet", "name": "foreign", "handle": 2}}, {"chain": {"family": "inet", "table": "foreign", "name": "c", "handle": 1}}, {"rule": {"family": "inet", "table": "foreign", "chain": "c", "handle": 2, "expr": [{"counter": {"packets": 0, "bytes": 0}}]}}]}`;
const TABLES = ["istio-proxy-nat", "istio-proxy-mangle", "istio-proxy-raw"];

describe("read-back", () => {
  test("the summary of real nft JSON keeps our tables only, with hooks and rule counts", () => {
    expect(summaryFromJson(REAL_JSON, "inet", TABLES)).toEqual({
      "istio-proxy-nat": { output: { base: "nat output -100", rules: 1 }, "istio-output": { base: "", rules: 1 } },
    });
  });

  test("the model's summary of the same program is equal; differences are named", () => {
    const program =
      "add table inet istio-proxy-nat\nflush table inet istio-proxy-nat\nadd chain inet istio-proxy-nat output { type nat hook output priority -100 ; }\nadd chain inet istio-proxy-nat istio-output\nadd rule inet istio-proxy-nat output counter jump istio-output\nadd rule inet istio-proxy-nat istio-output skuid 1337 counter return\n";
    const want = new NftState().apply(program).summary("inet", TABLES);
    expect(diffSummaries(want, summaryFromJson(REAL_JSON, "inet", TABLES))).toEqual([]);
    const more = new NftState().apply(program + "add rule inet istio-proxy-nat istio-output return\nadd table inet istio-proxy-raw\n").summary("inet", TABLES);
    expect(diffSummaries(more, summaryFromJson(REAL_JSON, "inet", TABLES))).toEqual([
      "table istio-proxy-nat chain istio-output: 1 rule(s), want 2",
      "table istio-proxy-raw: missing",
    ]);
  });

  test("an extra empty chain (kept by flush from an earlier run) is not a difference; an extra chain with rules is", () => {
    const want = { t: { a: { base: "", rules: 1 } } };
    expect(diffSummaries(want, { t: { a: { base: "", rules: 1 }, old: { base: "nat prerouting -100", rules: 0 } } })).toEqual([]);
    expect(diffSummaries(want, { t: { a: { base: "", rules: 1 }, old: { base: "", rules: 2 } } })).toEqual(["table t chain old: unexpected"]);
  });

  test("output that is not nft JSON is an error naming the command", () => {
    expect(() => summaryFromJson("Error: oops", "inet", TABLES)).toThrow("nft -j list ruleset: output is not JSON");
    expect(() => summaryFromJson("{}", "inet", TABLES)).toThrow("nft -j list ruleset: output has no nftables array");
  });

  test("the sweep deletes exactly our tables the program leaves out", () => {
    expect(sweepLines("add table inet istio-proxy-nat\nflush table inet istio-proxy-nat\n")).toBe(
      "add table inet istio-proxy-mangle\ndelete table inet istio-proxy-mangle\nadd table inet istio-proxy-raw\ndelete table inet istio-proxy-raw\n",
    );
    expect(sweepLines("add table inet istio-proxy-nat\nadd table inet istio-proxy-mangle\nadd table inet istio-proxy-raw\n")).toBe("");
  });

  test("nft versions", () => {
    expect(parseNftVersion("nftables v1.0.6 (Lester Gooch #5)\n")).toEqual([1, 0, 6]);
    expect(parseNftVersion("nftables v0.9\n")).toEqual([0, 9, 0]);
    expect(parseNftVersion("garbage")).toBeUndefined();
  });
});

// The CLI on a fake nft: every call is recorded; answers are given per subcommand.
const host: CaptureHost = { localIP: () => ({ ip: "10.0.0.10", ipv6: false }), dnsServers: () => ({ v4: [], v6: [] }), lookupUid: () => undefined };
// What real nft would list after `-u 1337 -g 1337` (counts from the `empty` golden).
const APPLIED_JSON = JSON.stringify({
  nftables: [
    { table: { family: "inet", name: "istio-proxy-nat" } },
    { chain: { family: "inet", table: "istio-proxy-nat", name: "output", type: "nat", hook: "output", prio: -100 } },
    ...["istio-inbound", "istio-redirect", "istio-in-redirect", "istio-output"].map((name) => ({ chain: { family: "inet", table: "istio-proxy-nat", name } })),
    ...[
      ["output", 1],
      ["istio-inbound", 1],
      ["istio-redirect", 1],
      ["istio-in-redirect", 1],
      ["istio-output", 8],
    ].flatMap(([chain, n]) => Array.from({ length: n as number }, () => ({ rule: { family: "inet", table: "istio-proxy-nat", chain } }))),
  ],
});

async function cli(argv: string[], answer: (args: readonly string[]) => { code: number; stdout?: string; stderr?: string }) {
  const calls: { cmd: string; args: string[]; stdin?: string }[] = [];
  const exec: Exec = async (cmd, args, opts) => {
    calls.push({ cmd, args: [...args], stdin: opts?.stdin });
    if (cmd !== "nft") return { code: 0, stdout: "", stderr: "" };
    const a = answer(args);
    return { code: a.code, stdout: a.stdout ?? "", stderr: a.stderr ?? "" };
  };
  let out = "";
  let err = "";
  const code = await runIptables(argv, {}, { stdout: (s) => (out += s), stderr: (s) => (err += s), host, exec });
  return { code, out, err, calls };
}

const goodNft = (args: readonly string[]) =>
  args[0] === "--version" ? { code: 0, stdout: "nftables v1.0.6 (Lester Gooch #5)\n" } : args[0] === "-j" ? { code: 0, stdout: APPLIED_JSON } : { code: 0 };

describe("agent iptables --native-nftables (real run on a fake nft)", () => {
  test("version, check, apply and read back, in that order, the same program with the sweep of the unused tables", async () => {
    const r = await cli(["--native-nftables", "-u", "1337", "-g", "1337"], goodNft);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    const nft = r.calls.filter((c) => c.cmd === "nft");
    expect(nft.map((c) => c.args.join(" "))).toEqual(["--version", "-c -f -", "-f -", "-j list ruleset inet"]);
    expect(nft[1]!.stdin).toBe(nft[2]!.stdin!);
    expect(nft[2]!.stdin!.startsWith("add table inet istio-proxy-nat\nflush table inet istio-proxy-nat\n")).toBe(true);
    expect(
      nft[2]!.stdin!.endsWith(
        "add rule inet istio-proxy-nat istio-output ip daddr 127.0.0.1/32 counter return\nadd table inet istio-proxy-mangle\ndelete table inet istio-proxy-mangle\nadd table inet istio-proxy-raw\ndelete table inet istio-proxy-raw\n",
      ),
    ).toBe(true);
    expect(r.out).toContain("nftables rules programmed:\nadd table inet istio-proxy-nat");
  });

  test("a program nft --check rejects is never applied; the error carries nft's message", async () => {
    const r = await cli(["--native-nftables", "-u", "1337"], (a) =>
      a[0] === "-c" ? { code: 1, stderr: "Error: Could not process rule: No such file or directory\n" } : goodNft(a),
    );
    expect(r.code).toBe(1);
    expect(r.calls.filter((c) => c.cmd === "nft").map((c) => c.args.join(" "))).toEqual(["--version", "-c -f -"]);
    expect(r.out + r.err).toContain(
      "the generated nftables program was rejected by nft --check; nothing was applied: nft -c -f -: Error: Could not process rule: No such file or directory",
    );
  });

  test("a ruleset that reads back different from the program fails the run and names the difference", async () => {
    const json = JSON.parse(APPLIED_JSON) as { nftables: { rule?: { chain: string } }[] };
    json.nftables.pop(); // one istio-output rule missing
    const r = await cli(["--native-nftables", "-u", "1337", "-g", "1337"], (a) => (a[0] === "-j" ? { code: 0, stdout: JSON.stringify(json) } : goodNft(a)));
    expect(r.code).toBe(1);
    expect(r.out + r.err).toContain(
      "the nftables ruleset read back after applying differs from the program: table istio-proxy-nat chain istio-output: 7 rule(s), want 8",
    );
  });

  test("nft older than 1.0.1 is refused before anything runs", async () => {
    const r = await cli(["--native-nftables", "-u", "1337"], (a) => (a[0] === "--version" ? { code: 0, stdout: "nftables v0.9.8 (E.D.S.)\n" } : goodNft(a)));
    expect(r.code).toBe(1);
    expect(r.calls.filter((c) => c.cmd === "nft").map((c) => c.args.join(" "))).toEqual(["--version"]);
    expect(r.out + r.err).toContain("nft 0.9.8 is too old: native nftables needs nft 1.0.1 or later");
  });

  test("a missing nft binary fails the run with a message naming nft", async () => {
    let out = "";
    const code = await runIptables(
      ["--native-nftables", "-u", "1337"],
      {},
      {
        stdout: (t) => (out += t),
        stderr: (t) => (out += t),
        host,
        exec: async () => {
          throw new Error('Executable not found in $PATH: "nft"');
        },
      },
    );
    expect(code).toBe(1);
    expect(out).toContain('nft --version: Executable not found in $PATH: "nft"');
  });

  test("--cleanup-only applies only the cleanup transaction", async () => {
    const r = await cli(["--native-nftables", "--cleanup-only", "-u", "1337"], (a) => (a[0] === "-j" ? { code: 0, stdout: '{"nftables": []}' } : goodNft(a)));
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    expect(r.calls.find((c) => c.cmd === "nft" && c.args[0] === "-f")!.stdin).toBe(renderCleanupProgram());
  });

  test("the same validation as the iptables mode: a bad flag value exits 1 naming the flag, nothing runs", async () => {
    const r = await cli(["--native-nftables", "-u", "1337", "-m", "BOGUS"], goodNft);
    expect(r.code).toBe(1);
    expect(r.out + r.err).toContain('--istio-inbound-interception-mode (ISTIO_INBOUND_INTERCEPTION_MODE): invalid mode "BOGUS"');
    expect(r.calls).toEqual([]);
  });

  test("NATIVE_NFTABLES=true in the environment selects the mode; --dry-run prints the program and runs nothing", async () => {
    const calls: string[] = [];
    let out = "";
    const code = await runIptables(
      ["-u", "1337", "-g", "1337"],
      { NATIVE_NFTABLES: "true", DRY_RUN: "true" },
      { stdout: (s) => (out += s), stderr: () => {}, host, exec: async (c) => (calls.push(c), { code: 0, stdout: "", stderr: "" }) },
    );
    expect(code).toBe(0);
    expect(calls).toEqual([]);
    expect(
      out.startsWith(
        "add table inet istio-proxy-nat\nflush table inet istio-proxy-nat\nadd chain inet istio-proxy-nat output { type nat hook output priority -100 ; }\n",
      ),
    ).toBe(true);
  });
});
