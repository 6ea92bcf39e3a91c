// Real packets for the other native nftables modes, in namespaces this test creates: TPROXY
// keeping the original source (with its policy routing, not duplicated on re-run), an excluded
// interface, IPv6 redirects from the same inet tables, NFLOG trace lines from `log group` rules,
// a changed configuration removing a table the new one leaves out, and every shared capture case
// applied twice to the same ruleset.

import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { defaultCaptureConfig, type CaptureConfig } from "../../src/iptables/config.ts";
import { spawnExec, type Exec } from "../../src/iptables/deps.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { renderCleanupProgram } from "../../src/iptables/nft-builder.ts";
import { realNft, runNftCapture } from "../../src/iptables/nft-capture.ts";
import { describeRequiring } from "../support/requires.ts";
import { connect, createPair, inetTables, iptables, must, parse, ruleset, setResolvConf, sh, startHelper, type Helper, type Pair } from "./netns.ts";
import { VECTORS } from "../conformance/vectors.ts";

describeRequiring({ root: true, tools: ["nft", "ip", "setpriv"], apt: ["nftables", "iproute2", "util-linux"] }, "native nftables modes on real packets", () => {
  const pairs: Pair[] = [];
  const helpers: Helper[] = [];
  const namespaces: string[] = [];
  const pair = (n: number) => {
    const p = createPair(n);
    pairs.push(p);
    return p;
  };
  const helper = async (ns: string, script: string, args: string[], uid?: number) => {
    const h = await startHelper(ns, script, args, uid);
    helpers.push(h);
    return h;
  };
  const ok = (r: { code: number; err: string }) => expect({ code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ code: 0, err: "" });
  afterAll(async () => {
    for (const h of helpers) await h.kill();
    for (const p of pairs) p.destroy();
    for (const ns of namespaces) sh(["ip", "netns", "del", ns]);
  });

  test("TPROXY inbound keeps the original source and destination; a re-run adds no policy route", async () => {
    const p = pair(22);
    const args = ["--native-nftables", "-u", "1337", "-m", "TPROXY", "-b", "9090"];
    ok(iptables(p.pod, args));
    expect(inetTables(p.pod).sort()).toEqual(["istio-proxy-mangle", "istio-proxy-nat"]);
    expect(must(["ip", "-n", p.pod, "rule", "show"])).toMatch(/fwmark 0x539 lookup 133/);
    await helper(p.pod, "listen.ts", ["15006", "transparent"]);
    const out = parse(connect(p.peer, p.podIP, 9090));
    expect(out.listener).toBe(15006);
    expect(out.local).toBe(`${p.podIP}:9090`);
    expect(out.peer.startsWith(`${p.peerIP}:`)).toBe(true);
    const rules = must(["ip", "-n", p.pod, "rule", "show"]);
    const before = ruleset(p.pod);
    ok(iptables(p.pod, args));
    expect(must(["ip", "-n", p.pod, "rule", "show"])).toBe(rules);
    expect(ruleset(p.pod)).toBe(before);
  }, 30_000);

  test("an excluded interface is not captured; without the exclusion the same connection is", async () => {
    const p = pair(23);
    await helper(p.pod, "listen.ts", ["15001"]);
    await helper(p.peer, "listen.ts", ["8080"]);
    ok(iptables(p.pod, ["--native-nftables", "-u", "1337", "-i", "*", "-c", "eth0"]));
    expect(parse(connect(p.pod, p.peerIP, 8080, 1000)).listener).toBe(8080);
    ok(iptables(p.pod, ["--native-nftables", "-u", "1337", "-i", "*"]));
    expect(parse(connect(p.pod, p.peerIP, 8080, 1000)).listener).toBe(15001);
  }, 30_000);

  test("NFLOG tracing: a redirected connection is logged from the `log group` rules with rule name, uid, devices and addresses", async () => {
    const p = pair(24);
    const tracer = await helper(p.pod, "trace.ts", []);
    const r = iptables(p.pod, ["--native-nftables", "-u", "1337", "-i", "*"], { IPTABLES_TRACE_LOGGING: "true" });
    ok(r);
    expect(ruleset(p.pod)).toContain('log prefix "OutboundCapture" group 1337 snaplen 20');
    await helper(p.pod, "listen.ts", ["15001"]);
    expect(parse(connect(p.pod, p.peerIP, 8080, 1000)).listener).toBe(15001);
    for (const command of ["JumpOutbound", "OutboundCapture"]) {
      const line = await tracer.waitFor((l) => l.includes(`command=${command}`));
      expect(line).toContain("\tiptables\t");
      for (const field of ["uid=1000", "gid=1000", "inDev=\t", "outDev=eth0", `src=${p.podIP}`, `dst=${p.peerIP}`]) expect(line).toContain(field);
    }
  }, 30_000);

  test("IPv6 in the same inet tables: outbound lands on 15001 and inbound on 15006 with the original destination; the proxy UID goes direct", async () => {
    const p = pair(26);
    must(["ip", "-n", p.pod, "addr", "add", "fd00:26::2/64", "dev", "eth0", "nodad"]);
    must(["ip", "-n", p.peer, "addr", "add", "fd00:26::1/64", "dev", "eth0", "nodad"]);
    // --dual-stack: IPv6 is on when the namespace has any global IPv6 address.
    ok(iptables(p.pod, ["--native-nftables", "-u", "1337", "-i", "*", "-b", "*", "--dual-stack"]));
    expect(ruleset(p.pod)).toContain("ip6 daddr != ::1 tcp dport != 15008 meta skuid 1337 counter jump istio-in-redirect");
    for (const port of ["15001", "15006"]) await helper(p.pod, "listen.ts", [port, "v6"]);
    await helper(p.peer, "listen.ts", ["8080", "v6"]);
    const out = parse(connect(p.pod, "fd00:26::1", 8080, 1000));
    expect([out.listener, out.orig]).toEqual([15001, "fd00:26:0:0:0:0:0:1:8080"]);
    const direct = parse(connect(p.pod, "fd00:26::1", 8080, 1337));
    expect([direct.listener, direct.local]).toEqual([8080, "fd00:26:0:0:0:0:0:1:8080"]);
    const inbound = parse(connect(p.peer, "fd00:26::2", 9090));
    expect([inbound.listener, inbound.orig]).toEqual([15006, "fd00:26:0:0:0:0:0:2:9090"]);
  }, 30_000);

  test("a re-run without DNS capture removes the raw table the earlier run created", () => {
    const p = pair(25);
    setResolvConf(p.pod, `nameserver ${p.peerIP}\n`);
    ok(iptables(p.pod, ["--native-nftables", "-u", "1337", "-i", "*", "--redirect-dns"]));
    expect(inetTables(p.pod).sort()).toEqual(["istio-proxy-nat", "istio-proxy-raw"]);
    const r = iptables(p.pod, ["--native-nftables", "-u", "1337", "-i", "*"]);
    ok(r);
    expect(inetTables(p.pod)).toEqual(["istio-proxy-nat"]);
  }, 30_000);

  // Istio's TestIdempotentEquivalentRerun: every case applied twice gives the same non-empty
  // ruleset; the cleanup transaction leaves nothing. Owner groups are forced to "0" so the group exists.
  const root = join(VECTORS, "nftables");
  const cases = JSON.parse(readFileSync(`${root}/cases.json`, "utf8")) as { name: string; config: Partial<CaptureConfig> }[];
  test(`every shared capture case (${cases.length}) applies twice to the same ruleset and cleans up to nothing`, async () => {
    const ns = `nftcases${process.pid}`;
    sh(["ip", "netns", "del", ns]);
    must(["ip", "netns", "add", ns]);
    namespaces.push(ns);
    must(["ip", "-n", ns, "link", "set", "lo", "up"]);
    must(["ip", "-n", ns, "addr", "add", "240.240.240.240/32", "dev", "lo"]);
    const exec: Exec = (cmd, args, opts) => spawnExec("ip", ["netns", "exec", ns, cmd, ...args], opts);
    const nft = realNft(exec);
    const failures: string[] = [];
    for (const c of cases) {
      const cfg: CaptureConfig = { ...defaultCaptureConfig(), ...c.config, DRY_RUN: false };
      if (cfg.OUTBOUND_OWNER_GROUPS_INCLUDE !== "*") cfg.OUTBOUND_OWNER_GROUPS_INCLUDE = "0";
      if (cfg.OUTBOUND_OWNER_GROUPS_EXCLUDE !== "") cfg.OUTBOUND_OWNER_GROUPS_EXCLUDE = "0";
      try {
        // The first apply is the whole run (check, apply, read-back); the second and the cleanup are bare nft.
        const program = await runNftCapture(cfg, nft, memoryLogger().log);
        const first = ruleset(ns);
        await nft.run(["-f", "-"], program);
        const second = ruleset(ns);
        if (first.trim() === "" || first !== second) failures.push(`${c.name}: rulesets differ or are empty`);
        await nft.run(["-f", "-"], renderCleanupProgram());
        if (ruleset(ns).trim() !== "") failures.push(`${c.name}: cleanup left ${ruleset(ns)}`);
      } catch (e) {
        failures.push(`${c.name}: ${(e as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
  }, 60_000);
});
