// Real packets through `agent iptables --native-nftables`, in namespaces this test creates:
// outbound to an included range lands on 15001 with SO_ORIGINAL_DST, the proxy UID, an excluded
// CIDR, an excluded port and a range outside the included one pass untouched, inbound lands on
// 15006, DNS to the resolv.conf server goes to 15053; a second apply leaves the same ruleset and
// --cleanup-only removes our tables while a foreign inet table survives.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { connect, createPair, inetTables, iptables, must, parse, ruleset, setResolvConf, sh, startHelper, type Helper, type Pair } from "./netns.ts";

const OURS = ["istio-proxy-nat", "istio-proxy-mangle", "istio-proxy-raw"];
const FOREIGN = "table inet foreign {\n chain out {\n  type filter hook output priority 0; policy accept;\n  counter\n }\n}\n";

describeRequiring(
  { root: true, tools: ["nft", "ip", "setpriv", "dig"], apt: ["nftables", "iproute2", "util-linux", "dnsutils"] },
  "native nftables capture on real packets",
  () => {
    let pair: Pair;
    const helpers: Helper[] = [];
    const outside = "10.251.21.1";
    const capture = (p: Pair) => [
      "--native-nftables",
      "-p",
      "15001",
      "-z",
      "15006",
      "-u",
      "1337",
      "-m",
      "REDIRECT",
      "-i",
      "10.250.21.0/24",
      "-x",
      `${p.peerIP2}/32`,
      "-b",
      "*",
      "-d",
      "15020",
      "-o",
      "8081",
      "--redirect-dns",
    ];
    let firstApply: { code: number; out: string; err: string };

    beforeAll(async () => {
      pair = createPair(21);
      expect(sh(["ip", "netns", "exec", pair.pod, "nft", "-f", "-"], { stdin: FOREIGN }).code).toBe(0);
      must(["ip", "-n", pair.peer, "addr", "add", `${outside}/24`, "dev", "eth0"]);
      must(["ip", "-n", pair.pod, "route", "add", "10.251.21.0/24", "dev", "eth0"]);
      setResolvConf(pair.pod, `nameserver ${pair.peerIP}\n`);
      firstApply = iptables(pair.pod, capture(pair));
      for (const port of [15001, 15006, 15020]) helpers.push(await startHelper(pair.pod, "listen.ts", [String(port)]));
      for (const port of [8080, 8081]) helpers.push(await startHelper(pair.peer, "listen.ts", [String(port)]));
      helpers.push(await startHelper(pair.pod, "dns.ts", ["15053", "10.9.9.9", "127.0.0.1"], 1337));
      helpers.push(await startHelper(pair.peer, "dns.ts", ["53", "10.8.8.8"]));
    }, 30_000);
    afterAll(async () => {
      for (const h of helpers) await h.kill();
      pair?.destroy();
    });

    test("apply succeeds, installs our inet tables beside the foreign one, and no iptables rules", () => {
      expect({ code: firstApply.code, err: firstApply.code === 0 ? "" : firstApply.err }).toEqual({ code: 0, err: "" });
      expect(firstApply.out).toContain("nftables rules programmed:");
      expect(inetTables(pair.pod).sort()).toEqual(["foreign", "istio-proxy-nat", "istio-proxy-raw"]);
      expect(must(["ip", "netns", "exec", pair.pod, "iptables-nft-save"])).not.toContain("ISTIO_");
    });

    test("outbound TCP from an application UID to the included range lands on 15001 with the original destination", () => {
      const r = parse(connect(pair.pod, pair.peerIP, 8080, 1000));
      expect(r.listener).toBe(15001);
      expect(r.orig).toBe(`${pair.peerIP}:8080`);
    });

    test("outbound TCP from the proxy UID 1337 is not redirected", () => {
      const r = parse(connect(pair.pod, pair.peerIP, 8080, 1337));
      expect(r.listener).toBe(8080);
      expect(r.local).toBe(`${pair.peerIP}:8080`);
    });

    test("excluded CIDR, excluded port and a destination outside the included range pass untouched", () => {
      const excluded = parse(connect(pair.pod, pair.peerIP2, 8080, 1000));
      expect([excluded.listener, excluded.local]).toEqual([8080, `${pair.peerIP2}:8080`]);
      expect(parse(connect(pair.pod, pair.peerIP, 8081, 1000)).listener).toBe(8081);
      const out = parse(connect(pair.pod, outside, 8080, 1000));
      expect([out.listener, out.local]).toEqual([8080, `${outside}:8080`]);
    });

    test("inbound connections from the peer land on 15006; the excluded inbound port goes straight through", () => {
      const r = parse(connect(pair.peer, pair.podIP, 9090));
      expect(r.listener).toBe(15006);
      expect(r.orig).toBe(`${pair.podIP}:9090`);
      expect(r.peer.startsWith(`${pair.peerIP}:`)).toBe(true);
      expect(parse(connect(pair.peer, pair.podIP, 15020)).listener).toBe(15020);
    });

    test("DNS to the resolv.conf server is answered by 15053; the proxy UID's queries reach the server", () => {
      const dig = (uid: number) =>
        sh([
          "ip",
          "netns",
          "exec",
          pair.pod,
          "setpriv",
          `--reuid=${uid}`,
          `--regid=${uid}`,
          "--clear-groups",
          "dig",
          "+short",
          "+time=2",
          "+tries=1",
          `@${pair.peerIP}`,
          "svc.example.com",
        ]).out.trim();
      expect(dig(1000)).toBe("10.9.9.9");
      expect(dig(1337)).toBe("10.8.8.8");
    });

    test("a second apply leaves the same ruleset", () => {
      const before = ruleset(pair.pod);
      expect(before).toContain("table inet istio-proxy-nat");
      const again = iptables(pair.pod, capture(pair));
      expect({ code: again.code, err: again.code === 0 ? "" : again.err }).toEqual({ code: 0, err: "" });
      expect(ruleset(pair.pod)).toBe(before);
    });

    test("--cleanup-only removes exactly our tables; the foreign table survives and traffic flows directly", () => {
      const r = iptables(pair.pod, ["--native-nftables", "--cleanup-only"]);
      expect({ code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ code: 0, err: "" });
      expect(inetTables(pair.pod)).toEqual(["foreign"]);
      expect(ruleset(pair.pod)).toContain("chain out {");
      for (const t of OURS) expect(ruleset(pair.pod)).not.toContain(t);
      expect(parse(connect(pair.pod, pair.peerIP, 8080, 1000)).listener).toBe(8080);
    });
  },
);
