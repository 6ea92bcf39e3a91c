// Pure pieces of the capture: addresses, config validation, flags/env precedence, host parsing,
// trace companions, state verification, cleanup sweep, route planning, CLI errors.

import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runIptables } from "../../src/cli/iptables.ts";
import { buildCleanupFromState, buildRestore, istioLeftovers, RuleBuilder, stateFromSave } from "../../src/iptables/builder.ts";
import { runCapture } from "../../src/iptables/capture.ts";
import { defaultCaptureConfig, fillFromEnvironment, splitDnsServers, validateCaptureConfig, type CaptureHost } from "../../src/iptables/config.ts";
import { DryRunXtables, hasRules, xtablesErrorMessage, type IptablesVersion, type Xtables } from "../../src/iptables/deps.ts";
import { parseCaptureCommand } from "../../src/iptables/flags.ts";
import { lookupPasswd, parseResolvConf, pickLocalIP } from "../../src/iptables/host.ts";
import { canonicalAddr, parsePrefix, separateV4V6 } from "../../src/iptables/net.ts";
import { configureRoutes, planRoutes } from "../../src/iptables/routes.ts";
import { generateRules } from "../../src/iptables/rules.ts";
import { memoryLogger, silentLogger } from "../../src/lib/log.ts";

const host = (o: Partial<CaptureHost> = {}): CaptureHost => ({
  localIP: () => ({ ip: "10.0.0.1", ipv6: false }),
  dnsServers: () => ({ v4: [], v6: [] }),
  lookupUid: () => undefined,
  ...o,
});

describe("addresses", () => {
  test.each([
    ["::127.0.0.53", "::7f00:35"],
    ["2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["::ffff:1.2.3.4", "::ffff:1.2.3.4"],
    ["fe80::1:0:0:0", "fe80::1:0:0:0"],
    ["1:0:0:2:0:0:0:3", "1:0:0:2::3"],
    ["10.0.0.1", "10.0.0.1"],
  ])("canonical %s", (a, want) => expect(canonicalAddr(a)).toBe(want));
  test.each(["01.2.3.4", "1.2.3", "256.1.1.1", "1::2::3", "gg::1", ""])("rejects %s", (a) => expect(canonicalAddr(a)).toBeUndefined());
  test("prefixes keep the unmasked address like netip", () => {
    expect(parsePrefix("10.1.2.3/8")?.text).toBe("10.1.2.3/8");
    expect(parsePrefix("2001:DB8::/32")?.text).toBe("2001:db8::/32");
    expect(parsePrefix("10.0.0.0/33")).toBeUndefined();
    expect(parsePrefix("10.0.0.0")).toBeUndefined();
  });
  test("separateV4V6 splits families and flags loopback", () => {
    const r = separateV4V6("10.0.0.0/8,127.1.2.3/32,2001:db8::/32");
    expect(r.v4).toEqual({ wildcard: false, cidrs: ["10.0.0.0/8", "127.1.2.3/32"], hasLoopback: true });
    expect(r.v6.cidrs).toEqual(["2001:db8::/32"]);
    expect(separateV4V6("10.0.0.0/8,bogus").bad).toBe("bogus");
  });
});

describe("config validation names the flag", () => {
  const filled = (over: Record<string, unknown>) => ({ ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337", ...over });
  test.each([
    [{ PROXY_PORT: "70000" }, "--envoy-port"],
    [{ INBOUND_CAPTURE_PORT: "x" }, "--inbound-capture-port"],
    [{ INBOUND_PORTS_INCLUDE: "80,abc" }, "--istio-inbound-ports"],
    [{ OUTBOUND_PORTS_EXCLUDE: "0" }, "--istio-local-outbound-ports-exclude"],
    [{ OUTBOUND_IPRANGES_INCLUDE: "10.0.0.0/8,nope" }, "--istio-service-cidr"],
    [{ OUTBOUND_IPRANGES_EXCLUDE: "*" }, "--istio-service-exclude-cidr"],
    [{ INBOUND_INTERCEPTION_MODE: "tproxy" }, "--istio-inbound-interception-mode"],
    [{ PROXY_UID: "1337,,2" }, "--proxy-uid"],
    [{ INBOUND_TPROXY_MARK: "-1" }, "--istio-inbound-tproxy-mark"],
    [{ FORCE_IPTABLES_BINARY: "iptables" }, "--force-iptables-binary"],
    [{ HOST_IPV4_LOOPBACK_CIDR: "10.0.0.0/8" }, "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR"],
    [{ HOST_IPV4_LOOPBACK_CIDR: "127.0.0.0/4" }, "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR"],
    [{ OUTBOUND_OWNER_GROUPS_INCLUDE: Array.from({ length: 65 }, (_, i) => String(i)).join(",") }, "ISTIO_OUTBOUND_OWNER_GROUPS"],
  ])("%o", (over, flag) => expect(() => validateCaptureConfig(filled(over))).toThrow(flag));
  test("Istio's injector arguments are valid", () => {
    const p = parseCaptureCommand(
      [
        "-p",
        "15001",
        "-z",
        "15006",
        "-u",
        "1337",
        "-m",
        "REDIRECT",
        "-i",
        "*",
        "-x",
        "",
        "-b",
        "*",
        "-d",
        "15090,15021,15020",
        "--log_output_level=default:info",
      ],
      {},
    );
    expect(() => validateCaptureConfig(fillFromEnvironment(p.cfg, p.envOnly, host()))).not.toThrow();
  });
});

describe("flags and environment", () => {
  test("env applies, aliases win over the bound variable, the command line wins over both", () => {
    const env = { REDIRECT_DNS: "false", ISTIO_META_DNS_CAPTURE: "true", ISTIO_INBOUND_PORTS: "80", PROXY_UID: "5" };
    const p = parseCaptureCommand(["-b", "90"], env);
    expect(p.cfg.REDIRECT_DNS).toBe(true);
    expect(p.cfg.INBOUND_PORTS_INCLUDE).toBe("90");
    expect(p.cfg.PROXY_UID).toBe("5");
  });
  test("envoy-port has no env var", () => expect(parseCaptureCommand([], { ENVOY_PORT: "1" }).cfg.PROXY_PORT).toBe("15001"));
  test("a bad boolean env value names the variable; an empty one is ignored", () => {
    expect(() => parseCaptureCommand([], { DROP_INVALID: "maybe" })).toThrow("DROP_INVALID");
    expect(parseCaptureCommand([], { INVALID_DROP: "" }).cfg.DROP_INVALID).toBe(false);
  });
  test("unknown flags and positionals are errors", () => {
    expect(() => parseCaptureCommand(["--nope"], {})).toThrow("unknown flag: --nope");
    expect(() => parseCaptureCommand(["extra"], {})).toThrow("unexpected argument");
  });
  test("environment step: ENVOY_USER lookup, gid defaults to uid, DNS only without capture-all", () => {
    const p = parseCaptureCommand(["--redirect-dns"], { ENVOY_USER: "proxy" });
    const c = fillFromEnvironment(
      p.cfg,
      p.envOnly,
      host({ lookupUid: (u) => (u === "proxy" ? "1500" : undefined), dnsServers: () => ({ v4: ["10.96.0.10"], v6: [] }) }),
    );
    expect([c.PROXY_UID, c.PROXY_GID, c.DNS_SERVERS_V4]).toEqual(["1500", "1500", ["10.96.0.10"]]);
    const all = parseCaptureCommand(["--redirect-dns", "--capture-all-dns"], {});
    expect(fillFromEnvironment(all.cfg, all.envOnly, host({ dnsServers: () => ({ v4: ["1.1.1.1"], v6: [] }) })).DNS_SERVERS_V4).toEqual([]);
    expect(fillFromEnvironment(all.cfg, all.envOnly, host()).PROXY_UID).toBe("1337");
  });
});

describe("host facts", () => {
  test("resolv.conf, passwd, local IP choice", () => {
    expect(parseResolvConf("# c\nnameserver 10.0.0.10\nsearch x\nnameserver ::127.0.0.53 # local\n")).toEqual(["10.0.0.10", "::127.0.0.53"]);
    expect(splitDnsServers(["10.0.0.10", "::127.0.0.53", "bogus"])).toEqual({ v4: ["10.0.0.10"], v6: ["::7f00:35"] });
    expect(lookupPasswd("root:x:0:0::/root:/bin/sh\nistio-proxy:x:1337:1337::/:/bin/false\n", "istio-proxy")).toBe("1337");
    expect(pickLocalIP(["127.0.0.1", "fe80::1", "10.1.1.1", "2001:db8::1"], false)).toEqual({ ip: "10.1.1.1", ipv6: false });
    expect(pickLocalIP(["127.0.0.1", "10.1.1.1", "2001:db8::1"], true)).toEqual({ ip: "10.1.1.1", ipv6: true });
    expect(() => pickLocalIP(["127.0.0.1", "::1"], false)).toThrow("no valid local IP address found");
  });
});

describe("trace logging", () => {
  test("companions precede identified rules (append) and end up in front of inserted ones", () => {
    const cfg = { ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337", TRACE_LOGGING: true, KUBE_VIRT_INTERFACES: "eth1" };
    const restore = buildRestore(generateRules(cfg).builder.rules("v4"));
    expect(restore).toContain(
      "-A ISTIO_IN_REDIRECT -p tcp -j NFLOG --nflog-prefix InboundCapture --nflog-group 1337 --nflog-size 20\n-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006",
    );
    expect(restore).toContain("-A OUTPUT -j NFLOG --nflog-prefix JumpOutbound --nflog-group 1337 --nflog-size 20\n-A OUTPUT -j ISTIO_OUTPUT");
    expect(restore).toContain("-I PREROUTING 1 -i eth1 -j RETURN\n-I PREROUTING 1 -i eth1 -j NFLOG --nflog-prefix KubevirtCommand");
    expect(buildRestore(generateRules({ ...cfg, TRACE_LOGGING: false }).builder.rules("v4"))).not.toContain("NFLOG");
  });
});

describe("state and cleanup", () => {
  const save = `*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:ISTIO_OUTPUT - [0:0]\n:ISTIO_OLD - [0:0]\n-A OUTPUT -j ISTIO_OUTPUT\n-A OUTPUT -p tcp -j KEEP\n-A ISTIO_OUTPUT -j ISTIO_OLD\nCOMMIT\n`;
  test("leftovers sweep deletes jumps, then flushes, then deletes ISTIO_ chains only", () => {
    expect(buildCleanupFromState(istioLeftovers(stateFromSave(save)))).toEqual([
      ["-t", "nat", "-D", "ISTIO_OUTPUT", "-j", "ISTIO_OLD"],
      ["-t", "nat", "-D", "OUTPUT", "-j", "ISTIO_OUTPUT"],
      ["-t", "nat", "-F", "ISTIO_OUTPUT"],
      ["-t", "nat", "-F", "ISTIO_OLD"],
      ["-t", "nat", "-X", "ISTIO_OUTPUT"],
      ["-t", "nat", "-X", "ISTIO_OLD"],
    ]);
  });
  test("existing-rule detection counts rules, not empty chain headers", () => {
    expect(hasRules("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\nCOMMIT\n")).toBe(false);
    expect(hasRules(save)).toBe(true);
  });
  test("xtables errors name the exit type", () => {
    expect(xtablesErrorMessage("iptables v1.8.9 (nf_tables): Couldn't load target `X'\nTry `iptables -h'", 2)).toStartWith(
      "xtables parameter problem: Couldn't load target",
    );
  });

  /** Xtables whose IPv4 save returns a fixed state (IPv6 empty) and whose -C checks pass. */
  class StateXtables extends DryRunXtables {
    constructor(private readonly state: string) {
      super();
    }
    override async run(cmd: "iptables" | "save" | "restore", ver: IptablesVersion, args: readonly string[], stdin?: string): Promise<string> {
      await super.run(cmd, ver, args, stdin);
      return cmd === "save" && ver.saveBinary === "iptables-save" ? this.state : "";
    }
  }
  const cfg = { ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337" };
  test("matching residue: nothing applied; drift with --reconcile: guardrails, cleanup, apply, guardrails removed", async () => {
    // What real iptables-nft-save printed after our restore text for `cfg` was applied in a
    // scratch network namespace (not derived from the code under test).
    const live = readFileSync(join(import.meta.dir, "fixtures/default-capture-uid-gid-1337.v4.save"), "utf8");
    const same = new StateXtables(live);
    const mem = memoryLogger();
    await runCapture(cfg, same, mem.log);
    expect(same.transcript.some((l) => l.startsWith("-A "))).toBe(false);
    expect(mem.lines.join("\n")).toContain("reconciliation not needed");

    const drift = new StateXtables(live.replace("-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN\n", ""));
    await runCapture({ ...cfg, RECONCILE: true }, drift, silentLogger());
    const t = drift.transcript;
    const at = (s: string) => t.findIndex((l) => l.startsWith(s));
    expect(at("iptables -t filter -I INPUT 1 -p tcp -j DROP")).toBeGreaterThan(0);
    expect(at("iptables -t nat -D OUTPUT -j ISTIO_OUTPUT")).toBeGreaterThan(at("iptables -t filter -I INPUT 1"));
    expect(at("* nat")).toBeGreaterThan(at("iptables -t nat -X ISTIO_OUTPUT"));
    expect(t.lastIndexOf("iptables -t filter -D INPUT -p tcp -j DROP")).toBeGreaterThan(at("COMMIT"));
  });
  test("the dry-run --cleanup-only transcript undoes the configured rules without applying", async () => {
    let out = "";
    const code = await runIptables(["-n", "--cleanup-only", "-u", "1337", "-g", "1337"], {}, { stdout: (s) => (out += s), stderr: () => {}, host: host() });
    expect(code).toBe(0);
    const lines = out.trim().split("\n");
    expect(lines.slice(0, 2)).toEqual(["iptables-save", "ip6tables-save"]);
    expect(lines).toContain("iptables -t nat -D OUTPUT -j ISTIO_OUTPUT");
    expect(lines).toContain("iptables -t nat -X ISTIO_INBOUND");
    expect(lines.some((l) => l.startsWith("-A") || l.startsWith("*"))).toBe(false);
  });
});

describe("routes and CLI", () => {
  test("route plan: ::6 with IPv6, fwmark rule and local route for TPROXY", () => {
    const base = { ...defaultCaptureConfig(), INBOUND_PORTS_INCLUDE: "*", INBOUND_INTERCEPTION_MODE: "TPROXY", ENABLE_INBOUND_IPV6: true };
    expect(planRoutes(base).map((c) => c.args.join(" "))).toEqual([
      "-6 addr add ::6/128 dev lo",
      "-4 rule add fwmark 1337 lookup 133",
      "-6 rule add fwmark 1337 lookup 133",
      "-4 route add local default dev lo table 133",
      "-6 route add local default dev lo table 133",
    ]);
    expect(planRoutes({ ...base, INBOUND_INTERCEPTION_MODE: "REDIRECT", ENABLE_INBOUND_IPV6: false })).toEqual([]);
  });
  test("re-running routes: existing address and route are fine, a present fwmark rule is not added again, other errors fail", async () => {
    const cfg = { ...defaultCaptureConfig(), INBOUND_PORTS_INCLUDE: "*", INBOUND_INTERCEPTION_MODE: "TPROXY", ENABLE_INBOUND_IPV6: true };
    const calls: string[] = [];
    const exec = async (_cmd: string, args: readonly string[]) => {
      calls.push(args.join(" "));
      if (args.includes("show")) return { code: 0, stdout: "32765:\tfrom all fwmark 0x539 lookup 133\n", stderr: "" };
      if (args.includes("addr")) return { code: 2, stdout: "", stderr: "Error: ipv6: address already assigned.\n" };
      return { code: 2, stdout: "", stderr: "RTNETLINK answers: File exists\n" };
    };
    await configureRoutes(cfg, exec, silentLogger());
    expect(calls.filter((c) => c.includes("rule add"))).toEqual([]);
    await expect(
      configureRoutes(cfg, async () => ({ code: 2, stdout: "", stderr: "RTNETLINK answers: Operation not permitted" }), silentLogger()),
    ).rejects.toThrow("ip -6 addr add ::6/128 dev lo: RTNETLINK answers: Operation not permitted");
  });
  test("bad input exits 1 with one line naming it; --help exits 0", async () => {
    const run = async (argv: string[], env = {}) => {
      let out = "";
      let err = "";
      const code = await runIptables(argv, env, { stdout: (s) => (out += s), stderr: (s) => (err += s), host: host() });
      return { code, out, err };
    };
    expect(await run(["-n", "-p", "abc"])).toMatchObject({ code: 1 });
    expect((await run(["-n", "-p", "abc"])).err).toContain("--envoy-port");
    expect((await run(["-n", "-m", "NAT"])).err).toContain("--istio-inbound-interception-mode");
    expect((await run(["-n"], { DUAL_STACK: "yes" })).err).toContain("DUAL_STACK");
    // As Istio's cobra command: a flag it cannot parse, or a bad log option, fails before the
    // command runs and pilot-agent's main exits -1 (255); config errors exit 1.
    expect(await run(["-n", "--bogus"])).toMatchObject({ code: 255 });
    expect((await run(["-n", "--bogus"])).err).toContain("unknown flag: --bogus");
    expect((await run(["-n", "--log_output_level=default:loud"])).code).toBe(255);
    // pilot-agent registers klog's --vklog on every command line.
    expect((await run(["-n", "--vklog=9"])).code).toBe(0);
    expect((await run(["-n", "--vklog", "2"])).code).toBe(0);
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("--istio-inbound-ports");
    expect(help.out).toContain("ISTIO_OUTBOUND_OWNER_GROUPS");
  });
});

test('ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE="*" is accepted and written as given, as Istio does', async () => {
  let out = "";
  const code = await runIptables(
    ["-n", "-u", "1337", "-g", "1337"],
    { ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE: "*" },
    { stdout: (s) => (out += s), stderr: () => {}, host: host() },
  );
  expect(code).toBe(0);
  expect(out.split("\n")).toContain("-A ISTIO_OUTPUT -m owner --gid-owner * -j RETURN");
});

test("the real Xtables path checks payloads with --test before applying", async () => {
  const calls: string[] = [];
  const xt: Xtables = {
    testsPayloads: true,
    detect: async (v6) => ({
      binary: v6 ? "ip6tables" : "iptables",
      saveBinary: "save",
      restoreBinary: "restore",
      version: [1, 8, 9],
      legacy: false,
      existingRules: false,
    }),
    run: async (cmd, _v, args, stdin) => {
      calls.push(`${cmd} ${args.join(" ")}`);
      if (cmd === "restore" && args.includes("--test")) throw new Error("line 3 failed");
      return "";
    },
  };
  await expect(runCapture({ ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337" }, xt, silentLogger())).rejects.toThrow(
    "rejected by restore --test; nothing was applied",
  );
  expect(calls.filter((c) => c.startsWith("restore"))).toEqual(["restore --test --noflush"]);
});
