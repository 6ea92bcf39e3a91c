// Real packets for the other capture modes, in namespaces this test creates: the legacy backend,
// DNS to the resolv.conf server redirected to 15053 (dig), TPROXY keeping the original source,
// and NFLOG trace lines from the tracer component.

import { afterAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { connect, createPair, iptables, must, parse, saveState, setResolvConf, sh, startHelper, type Helper, type Pair } from "./netns.ts";

describeRequiring(
  {
    root: true,
    tools: ["ip", "iptables-legacy", "iptables-legacy-save", "iptables-nft", "iptables-nft-save", "setpriv", "dig"],
    apt: ["iproute2", "iptables", "util-linux", "dnsutils"],
  },
  "capture modes on real packets",
  () => {
    const pairs: Pair[] = [];
    const helpers: Helper[] = [];
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
    afterAll(async () => {
      for (const h of helpers) await h.kill();
      for (const p of pairs) p.destroy();
    });

    test("legacy backend: FORCE_IPTABLES_BINARY=legacy applies, redirects and cleans up in legacy tables", async () => {
      const p = pair(12);
      const r = iptables(p.pod, ["-u", "1337", "-i", "*"], { FORCE_IPTABLES_BINARY: "legacy" });
      expect(r.code).toBe(0);
      expect(saveState(p.pod, "iptables-legacy-save")).toContain(":ISTIO_OUTPUT -");
      expect(saveState(p.pod, "iptables-nft-save")).not.toContain("ISTIO_");
      await helper(p.pod, "listen.ts", ["15001"]);
      const out = parse(connect(p.pod, p.peerIP, 8080, 1000));
      expect(out.listener).toBe(15001);
      expect(out.orig).toBe(`${p.peerIP}:8080`);
      // Detection without the override now picks legacy, where the rules are.
      const again = iptables(p.pod, ["-u", "1337", "-i", "*"]);
      expect(again.code).toBe(0);
      expect(again.out).toContain("reconciliation not needed");
      expect(iptables(p.pod, ["--cleanup-only"]).code).toBe(0);
      expect(saveState(p.pod, "iptables-legacy-save")).not.toContain("ISTIO_");
    });

    test("DNS to the resolv.conf server is redirected to 15053; the proxy UID's queries are not", async () => {
      const p = pair(13);
      setResolvConf(p.pod, `nameserver ${p.peerIP}\n`);
      const r = iptables(p.pod, ["-u", "1337", "-i", "*", "--redirect-dns"]);
      expect(r.code).toBe(0);
      expect(saveState(p.pod)).toContain(`-d ${p.peerIP}/32 -p udp -m udp --dport 53 -j REDIRECT --to-ports 15053`);
      // The agent's DNS proxy runs as the proxy UID: its answers go to conntrack zone 2.
      await helper(p.pod, "dns.ts", ["15053", "10.9.9.9", "127.0.0.1"], 1337);
      await helper(p.peer, "dns.ts", ["53", "10.8.8.8"]);
      const dig = (uid: number) =>
        sh([
          "ip",
          "netns",
          "exec",
          p.pod,
          "setpriv",
          `--reuid=${uid}`,
          `--regid=${uid}`,
          "--clear-groups",
          "dig",
          "+short",
          "+time=2",
          "+tries=1",
          `@${p.peerIP}`,
          "svc.example.com",
        ]).out.trim();
      expect(dig(1000)).toBe("10.9.9.9");
      expect(dig(1337)).toBe("10.8.8.8");
    });

    test("TPROXY inbound keeps the original source and destination", async () => {
      const p = pair(14);
      const r = iptables(p.pod, ["-u", "1337", "-m", "TPROXY", "-b", "9090"]);
      expect(r.code).toBe(0);
      expect(must(["ip", "-n", p.pod, "rule", "show"])).toMatch(/fwmark 0x539 lookup 133/);
      await helper(p.pod, "listen.ts", ["15006", "transparent"]);
      const out = parse(connect(p.peer, p.podIP, 9090));
      expect(out.listener).toBe(15006);
      expect(out.local).toBe(`${p.podIP}:9090`);
      expect(out.peer.startsWith(`${p.peerIP}:`)).toBe(true);
      // Re-running adds neither rules nor a duplicate policy-routing entry.
      const rules = must(["ip", "-n", p.pod, "rule", "show"]);
      expect(iptables(p.pod, ["-u", "1337", "-m", "TPROXY", "-b", "9090"]).code).toBe(0);
      expect(must(["ip", "-n", p.pod, "rule", "show"])).toBe(rules);
    });

    test("NFLOG tracing: a redirected connection is logged with rule name, uid, gid, devices and addresses", async () => {
      const p = pair(15);
      const tracer = await helper(p.pod, "trace.ts", []);
      const r = iptables(p.pod, ["-u", "1337", "-i", "*"], { IPTABLES_TRACE_LOGGING: "true" });
      expect(r.code).toBe(0);
      await helper(p.pod, "listen.ts", ["15001"]);
      expect(parse(connect(p.pod, p.peerIP, 8080, 1000)).listener).toBe(15001);
      for (const command of ["JumpOutbound", "OutboundCapture"]) {
        const line = await tracer.waitFor((l) => l.includes(`command=${command}`));
        expect(line).toContain("\tiptables\t");
        for (const field of ["uid=1000", "gid=1000", "inDev=\t", "outDev=eth0", `src=${p.podIP}`, `dst=${p.peerIP}`]) expect(line).toContain(field);
      }
    });
  },
);
