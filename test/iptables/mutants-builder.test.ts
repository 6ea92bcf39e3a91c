// The rule builder's renderings on small hand-written rule lists, expected output written out
// by hand from istio-iptables' builder (tools/istio-iptables/pkg/builder: BuildV4/BuildV4Restore,
// BuildCheck, BuildCleanup, BuildGuardrails, GetStateFromSave, HasIstioLeftovers,
// BuildCleanupFromState): long option forms, quoted chain names, table order, chains declared
// once, rules skipped by the undo. Found by mutation testing (npm run mutate -- iptables).

import { describe, expect, test } from "bun:test";
import {
  buildCheck,
  buildCleanup,
  buildCleanupFromState,
  buildCleanupGuardrails,
  buildCommands,
  buildGuardrails,
  buildRestore,
  istioLeftovers,
  RuleBuilder,
  stateFromSave,
  undoRules,
  type Rule,
} from "../../src/iptables/builder.ts";

const r = (table: string, ...params: string[]): Rule => ({ chain: params[1]!, table, params });

describe("RuleBuilder", () => {
  test("v6 rules only with IPv6 enabled; append and insert reach both families", () => {
    const off = new RuleBuilder(false).append("OUTPUT", "nat", ["-j", "ISTIO_OUTPUT"]).insert("PREROUTING", "nat", 1, ["-j", "RETURN"]);
    expect(off.rules("v6")).toEqual([]);
    expect(off.rules("v4")).toEqual([
      { chain: "OUTPUT", table: "nat", params: ["-A", "OUTPUT", "-j", "ISTIO_OUTPUT"] },
      { chain: "PREROUTING", table: "nat", params: ["-I", "PREROUTING", "1", "-j", "RETURN"] },
    ]);
    const on = new RuleBuilder(true).append("OUTPUT", "nat", ["-j", "ISTIO_OUTPUT"]);
    expect(on.rules("v6")).toEqual([{ chain: "OUTPUT", table: "nat", params: ["-A", "OUTPUT", "-j", "ISTIO_OUTPUT"] }]);
    expect(on.v6).toBe(on.rules("v6") as Rule[]);
  });

  test("appendVersioned substitutes only the placeholder, per family", () => {
    const b = new RuleBuilder(true).appendVersioned("127.0.0.6/32", "::6/128", "ISTIO_OUTPUT", "nat", [
      "-s",
      "PLACEHOLDER_IP_VERSION_SPECIFIC",
      "-j",
      "RETURN",
    ]);
    expect(b.rules("v4")[0]!.params).toEqual(["-A", "ISTIO_OUTPUT", "-s", "127.0.0.6/32", "-j", "RETURN"]);
    expect(b.rules("v6")[0]!.params).toEqual(["-A", "ISTIO_OUTPUT", "-s", "::6/128", "-j", "RETURN"]);
    const own = new RuleBuilder(true).appendVersioned("a", "b", "C", "nat", ["-d", "IP", "-j", "RETURN"], "IP");
    expect(own.rules("v6")[0]!.params).toEqual(["-A", "C", "-d", "b", "-j", "RETURN"]);
  });

  test("trace companions: only with trace logging, a trace id and a -j; NFLOG in place of the target", () => {
    const nflog = ["-j", "NFLOG", "--nflog-prefix", "T", "--nflog-group", "1337", "--nflog-size", "20"];
    const on = new RuleBuilder(true, true)
      .append("ISTIO_INBOUND", "nat", ["-p", "tcp", "-j", "RETURN"], "T")
      .append("ISTIO_INBOUND", "nat", ["-p", "tcp", "-j", "RETURN"])
      .append("ISTIO_INBOUND", "nat", ["-p", "tcp"], "T")
      .insert("PREROUTING", "nat", 2, ["-i", "eth1", "-j", "RETURN"], "T");
    expect(on.rules("v6").map((x) => x.params.join(" "))).toEqual([
      `-A ISTIO_INBOUND -p tcp ${nflog.join(" ")}`,
      "-A ISTIO_INBOUND -p tcp -j RETURN",
      "-A ISTIO_INBOUND -p tcp -j RETURN",
      "-A ISTIO_INBOUND -p tcp",
      "-I PREROUTING 2 -i eth1 -j RETURN",
      `-I PREROUTING 2 -i eth1 ${nflog.join(" ")}`,
    ]);
    const off = new RuleBuilder(false, false).append("C", "nat", ["-j", "RETURN"], "T").insert("C", "nat", 1, ["-j", "RETURN"], "T");
    expect(off.rules("v4")).toHaveLength(2);
    expect(new RuleBuilder(false).append("C", "nat", ["-j", "RETURN"], "T").rules("v4")).toHaveLength(1); // off by default
  });
});

describe("renderings", () => {
  const rules = [
    r("nat", "-A", "ISTIO_INBOUND", "-p", "tcp", "--dport", "15008", "-j", "RETURN"),
    r("nat", "-A", "PREROUTING", "-p", "tcp", "-j", "ISTIO_INBOUND"),
    r("mangle", "-I", "ISTIO_INBOUND", "1", "-p", "tcp", "-j", "ISTIO_DIVERT"),
    r("nat", "-A", "ISTIO_INBOUND", "-p", "tcp", "-j", "ISTIO_IN_REDIRECT"),
    r("raw", "-A", "OUTPUT", "-j", "ISTIO_OUTPUT_DNS"),
  ];

  test("commands: -N once per non-built-in chain and table, then every rule", () => {
    expect(buildCommands(rules)).toEqual([
      ["-t", "nat", "-N", "ISTIO_INBOUND"],
      ["-t", "mangle", "-N", "ISTIO_INBOUND"],
      ["-t", "nat", "-A", "ISTIO_INBOUND", "-p", "tcp", "--dport", "15008", "-j", "RETURN"],
      ["-t", "nat", "-A", "PREROUTING", "-p", "tcp", "-j", "ISTIO_INBOUND"],
      ["-t", "mangle", "-I", "ISTIO_INBOUND", "1", "-p", "tcp", "-j", "ISTIO_DIVERT"],
      ["-t", "nat", "-A", "ISTIO_INBOUND", "-p", "tcp", "-j", "ISTIO_IN_REDIRECT"],
      ["-t", "raw", "-A", "OUTPUT", "-j", "ISTIO_OUTPUT_DNS"],
    ]);
    expect(buildCommands([])).toEqual([]);
    // Every built-in chain is used as is.
    const builtins = ["INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"].map((c) => r("filter", "-A", c, "-j", "ACCEPT"));
    expect(buildCommands(builtins).filter((c) => c.includes("-N"))).toEqual([]);
  });

  test("restore: tables sorted, empty ones left out, chains then bare jump targets declared once", () => {
    expect(buildRestore(rules)).toBe(
      [
        "* mangle",
        "-N ISTIO_INBOUND",
        "-N ISTIO_DIVERT",
        "-I ISTIO_INBOUND 1 -p tcp -j ISTIO_DIVERT",
        "COMMIT",
        "* nat",
        "-N ISTIO_INBOUND",
        "-N ISTIO_IN_REDIRECT",
        "-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN",
        "-A PREROUTING -p tcp -j ISTIO_INBOUND",
        "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT",
        "COMMIT",
        "* raw",
        "-N ISTIO_OUTPUT_DNS",
        "-A OUTPUT -j ISTIO_OUTPUT_DNS",
        "COMMIT",
        "",
      ].join("\n"),
    );
    expect(buildRestore([])).toBe("");
    // A target that is not last (a REDIRECT with options) is not declared.
    expect(buildRestore([r("nat", "-A", "OUTPUT", "-j", "REDIRECT", "--to-ports", "15001")])).toBe("* nat\n-A OUTPUT -j REDIRECT --to-ports 15001\nCOMMIT\n");
    expect(buildRestore([r("filter", "-A", "INPUT", "-j")])).toBe("* filter\n-A INPUT -j\nCOMMIT\n");
  });

  test("check: -C for -A/--append and -I/--insert, the insert position dropped", () => {
    expect(
      buildCheck([
        r("nat", "-A", "OUTPUT", "-j", "X"),
        r("nat", "--append", "OUTPUT", "-j", "X"),
        r("nat", "-I", "OUTPUT", "3", "-j", "X"),
        r("nat", "--insert", "OUTPUT", "3", "-p", "1", "-j", "X"),
      ]),
    ).toEqual([
      ["-t", "nat", "-C", "OUTPUT", "-j", "X"],
      ["-t", "nat", "-C", "OUTPUT", "-j", "X"],
      ["-t", "nat", "-C", "OUTPUT", "-j", "X"],
      ["-t", "nat", "-C", "OUTPUT", "-p", "1", "-j", "X"],
    ]);
  });

  test("undo: rules inside ISTIO_ chains are skipped unless they jump to an ISTIO_ chain (either option form)", () => {
    expect(
      undoRules([
        r("nat", "-A", "ISTIO_OUTPUT", "-j", "RETURN"),
        r("nat", "--append", "ISTIO_OUTPUT", "-d", "1.1.1.1", "-j", "RETURN"),
        r("nat", "-I", "ISTIO_OUTPUT", "1", "-j", "ISTIO_REDIRECT"),
        r("nat", "--insert", "ISTIO_OUTPUT", "1", "--jump", "ISTIO_REDIRECT"),
        r("nat", "-A", "OUTPUT", "-j", "RETURN"),
        r("nat", "-A", "ISTIO_X", "-j", "ISTIO_Y", "-m", "comment"),
        r("nat", "-I", "ISTIO_INBOUND", "1", "-p", "tcp", "-j", "RETURN"),
        r("nat", "--insert", "ISTIO_INBOUND", "2", "-p", "udp", "-j", "RETURN"),
        r("nat", "-A", "ISTIO_OUTPUT", "-m", "comment", "--comment", "ISTIO_NOTE", "-j", "RETURN"),
      ]).map((x) => x.params.join(" ")),
    ).toEqual(["-D ISTIO_OUTPUT -j ISTIO_REDIRECT", "-D ISTIO_OUTPUT --jump ISTIO_REDIRECT", "-D OUTPUT -j RETURN", "-D ISTIO_X -j ISTIO_Y -m comment"]);
  });

  test("cleanup: undo in reverse, then flush and delete each chain once, in reverse order of first use", () => {
    expect(buildCleanup(rules)).toEqual([
      ["-t", "raw", "-D", "OUTPUT", "-j", "ISTIO_OUTPUT_DNS"],
      ["-t", "nat", "-D", "ISTIO_INBOUND", "-p", "tcp", "-j", "ISTIO_IN_REDIRECT"],
      ["-t", "mangle", "-D", "ISTIO_INBOUND", "-p", "tcp", "-j", "ISTIO_DIVERT"],
      ["-t", "nat", "-D", "PREROUTING", "-p", "tcp", "-j", "ISTIO_INBOUND"],
      ["-t", "nat", "-F", "ISTIO_INBOUND"],
      ["-t", "nat", "-X", "ISTIO_INBOUND"],
      ["-t", "mangle", "-F", "ISTIO_INBOUND"],
      ["-t", "mangle", "-X", "ISTIO_INBOUND"],
    ]);
  });

  test("guardrails: DROP tcp and udp at the top of INPUT, FORWARD and OUTPUT; their removal", () => {
    const want: string[][] = [];
    const undo: string[][] = [];
    for (const chain of ["INPUT", "FORWARD", "OUTPUT"]) {
      for (const p of ["tcp", "udp"]) {
        want.push(["-t", "filter", "-I", chain, "1", "-p", p, "-j", "DROP"]);
        undo.push(["-t", "filter", "-D", chain, "-p", p, "-j", "DROP"]);
      }
    }
    expect(buildGuardrails()).toEqual(want);
    expect(buildCleanupGuardrails()).toEqual(undo);
  });
});

describe("state from a save", () => {
  const save = [
    "# Generated by iptables-save v1.8.9",
    "*nat",
    "# -A ISTIO_COMMENTED -j RETURN",
    ":PREROUTING ACCEPT [0:0]",
    ":ISTIO_INBOUND - [0:0]",
    ":ISTIO_EMPTY - [0:0]",
    ":KUBE-SERVICES - [0:0]",
    "-A PREROUTING -p tcp -j ISTIO_INBOUND",
    '--append "ISTIO_INBOUND" -p tcp --jump "ISTIO_IN_REDIRECT"',
    "-I OUTPUT 1 -j KUBE-SERVICES",
    "--insert OUTPUT 2 -j RETURN",
    "-N ISTIO_NEW",
    "-N KUBE-OTHER",
    "--new ISTIO_LONG",
    '-N "ISTIO_QUOTED"',
    "-A",
    "",
    "COMMIT",
    "*mangle",
    "-A ISTIO_DIVERT -j MARK --set-mark 1337",
    "COMMIT",
    "*security",
    "-A INPUT -j ACCEPT",
    "COMMIT",
  ].join("\n");

  test("rules per table and chain; empty ISTIO chains kept; other tables and headers left out", () => {
    expect(stateFromSave(save)).toEqual({
      filter: {},
      nat: {
        ISTIO_INBOUND: ['--append "ISTIO_INBOUND" -p tcp --jump "ISTIO_IN_REDIRECT"'],
        ISTIO_EMPTY: [],
        PREROUTING: ["-A PREROUTING -p tcp -j ISTIO_INBOUND"],
        OUTPUT: ["-I OUTPUT 1 -j KUBE-SERVICES", "--insert OUTPUT 2 -j RETURN"],
        ISTIO_NEW: [],
        ISTIO_LONG: [],
        ISTIO_QUOTED: [],
      },
      mangle: { ISTIO_DIVERT: ["-A ISTIO_DIVERT -j MARK --set-mark 1337"] },
      raw: {},
    });
  });

  test("leftovers: ISTIO_ chains and jumps to them, per table; tables without any left out", () => {
    const state = stateFromSave(save);
    expect(istioLeftovers(state)).toEqual({
      nat: {
        chains: ["ISTIO_INBOUND", "ISTIO_EMPTY", "ISTIO_NEW", "ISTIO_LONG", "ISTIO_QUOTED"],
        rules: ['--append "ISTIO_INBOUND" -p tcp --jump "ISTIO_IN_REDIRECT"', "-A PREROUTING -p tcp -j ISTIO_INBOUND"],
      },
      mangle: { chains: ["ISTIO_DIVERT"], rules: [] },
    });
    expect(istioLeftovers({ nat: { OUTPUT: ["-A OUTPUT -j", "-A OUTPUT  -j  'ISTIO_X' "] } })).toEqual({
      nat: { chains: [], rules: ["-A OUTPUT  -j  'ISTIO_X' "] },
    });
    expect(istioLeftovers({ nat: { ISTIOX: [] } })).toEqual({});
  });

  test("cleanup from state: tables sorted; jumps deleted, then every chain flushed, then deleted", () => {
    expect(
      buildCleanupFromState({
        nat: { chains: ["ISTIO_A", "ISTIO_B"], rules: ["-A OUTPUT -j ISTIO_A", "-I ISTIO_A 1 -j ISTIO_B", "-A ISTIO_B -j RETURN"] },
        mangle: { chains: ["ISTIO_C"], rules: ["--append PREROUTING --jump ISTIO_C"] },
      }),
    ).toEqual([
      ["-t", "mangle", "-D", "PREROUTING", "--jump", "ISTIO_C"],
      ["-t", "nat", "-D", "OUTPUT", "-j", "ISTIO_A"],
      ["-t", "nat", "-D", "ISTIO_A", "-j", "ISTIO_B"],
      ["-t", "mangle", "-F", "ISTIO_C"],
      ["-t", "nat", "-F", "ISTIO_A"],
      ["-t", "nat", "-F", "ISTIO_B"],
      ["-t", "mangle", "-X", "ISTIO_C"],
      ["-t", "nat", "-X", "ISTIO_A"],
      ["-t", "nat", "-X", "ISTIO_B"],
    ]);
  });
});
