// Rule generation for configurations Istio's golden cases do not cover: DNS capture limited to
// the resolv.conf servers, TPROXY with wildcard inbound ports, excluded ports and an excluded
// interface, and wildcard outbound capture with kube-virt interfaces. Expected rules written out
// by hand from istio-iptables' Run, SetupDNSRedir and addDNSConntrackZones
// (tools/istio-iptables/pkg/capture/run.go at 86c9f01). Found by mutation testing (npm run mutate -- iptables).

import { describe, expect, test } from "bun:test";
import { defaultCaptureConfig, type CaptureConfig } from "../../src/iptables/config.ts";
import { generateRules } from "../../src/iptables/rules.ts";

const rulesOf = (cfg: Partial<CaptureConfig>, f: "v4" | "v6", table: string) =>
  generateRules({ ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337", ...cfg })
    .builder.rules(f)
    .filter((r) => r.table === table)
    .map((r) => r.params.join(" "));

describe("DNS capture limited to the given servers (CAPTURE_ALL_DNS off)", () => {
  const cfg = { REDIRECT_DNS: true, ENABLE_INBOUND_IPV6: true, DNS_SERVERS_V4: ["10.96.0.10"], DNS_SERVERS_V6: ["fd00::a"] };
  test("raw: conntrack zones for the proxy's own queries, then per server, per family", () => {
    const zones = [
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -m owner --uid-owner 1337 -j CT --zone 1",
      "-A ISTIO_OUTPUT_DNS -p udp --sport 15053 -m owner --uid-owner 1337 -j CT --zone 2",
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -m owner --gid-owner 1337 -j CT --zone 1",
      "-A ISTIO_OUTPUT_DNS -p udp --sport 15053 -m owner --gid-owner 1337 -j CT --zone 2",
    ];
    expect(rulesOf(cfg, "v4", "raw")).toEqual([
      "-A OUTPUT -j ISTIO_OUTPUT_DNS",
      ...zones,
      "-A PREROUTING -j ISTIO_INBOUND",
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d 10.96.0.10/32 -j CT --zone 2",
      "-A ISTIO_INBOUND -p udp --sport 53 -s 10.96.0.10/32 -j CT --zone 1",
    ]);
    expect(rulesOf(cfg, "v6", "raw")).toEqual([
      "-A OUTPUT -j ISTIO_OUTPUT_DNS",
      ...zones,
      "-A PREROUTING -j ISTIO_INBOUND",
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d fd00::a/128 -j CT --zone 2",
      "-A ISTIO_INBOUND -p udp --sport 53 -s fd00::a/128 -j CT --zone 1",
    ]);
  });

  test("nat: only queries to the servers are redirected to 15053, tcp then udp", () => {
    const dns = (f: "v4" | "v6") => rulesOf(cfg, f, "nat").filter((l) => l.includes("ISTIO_OUTPUT_DNS"));
    expect(dns("v4")).toEqual([
      "-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS",
      "-A ISTIO_OUTPUT_DNS -p tcp --dport 53 -d 10.96.0.10/32 -j REDIRECT --to-ports 15053",
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d 10.96.0.10/32 -j REDIRECT --to-port 15053",
    ]);
    expect(dns("v6")).toEqual([
      "-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS",
      "-A ISTIO_OUTPUT_DNS -p tcp --dport 53 -d fd00::a/128 -j REDIRECT --to-ports 15053",
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d fd00::a/128 -j REDIRECT --to-port 15053",
    ]);
  });

  test("servers of one family only: the other family gets no DNS jump and no PREROUTING zone rule", () => {
    const only4 = { ...cfg, DNS_SERVERS_V6: [] };
    expect(rulesOf(only4, "v6", "nat").filter((l) => l.includes("ISTIO_OUTPUT_DNS"))).toEqual([]);
    expect(rulesOf(only4, "v6", "raw").filter((l) => l.includes("PREROUTING") || l.includes("-s "))).toEqual([]);
  });

  test("no servers and no capture-all: DNS capture off, with Istio's warning", () => {
    const g = generateRules({ ...defaultCaptureConfig(), PROXY_UID: "1337", REDIRECT_DNS: true });
    expect(g.redirectDNS).toBe(false);
    expect(g.warnings).toEqual(["REDIRECT_DNS is set, but CAPTURE_ALL_DNS is false, and no DNS servers provided. DNS capture disabled."]);
    expect(g.builder.rules("v4").filter((r) => r.table === "raw")).toEqual([]);
  });
});

describe("TPROXY", () => {
  test("wildcard inbound ports with excluded ports and an excluded interface: the mangle table in Istio's order", () => {
    const cfg = { INBOUND_INTERCEPTION_MODE: "TPROXY", INBOUND_PORTS_INCLUDE: "*", INBOUND_PORTS_EXCLUDE: "15090,15021", EXCLUDE_INTERFACES: "eth9" };
    expect(rulesOf(cfg, "v4", "mangle")).toEqual([
      "-A PREROUTING -i eth9 -j RETURN",
      "-A OUTPUT -o eth9 -j RETURN",
      "-A ISTIO_DIVERT -j MARK --set-mark 1337",
      "-A ISTIO_DIVERT -j ACCEPT",
      "-A ISTIO_TPROXY ! -d 127.0.0.1/32 -p tcp -j TPROXY --tproxy-mark 1337/0xffffffff --on-port 15006",
      "-A PREROUTING -p tcp -j ISTIO_INBOUND",
      "-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN",
      "-A ISTIO_INBOUND -p tcp --dport 15021 -j RETURN",
      "-A ISTIO_INBOUND -p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j ISTIO_DIVERT",
      "-A ISTIO_INBOUND -p tcp -j ISTIO_TPROXY",
      "-A PREROUTING -p tcp -m mark --mark 1337 -j CONNMARK --save-mark",
      "-A OUTPUT -p tcp -o lo -m mark --mark 1337 -j RETURN",
      "-A OUTPUT ! -d 127.0.0.1/32 -p tcp -o lo -m owner --uid-owner 1337 -j MARK --set-mark 1338",
      "-A OUTPUT ! -d 127.0.0.1/32 -p tcp -o lo -m owner --gid-owner 1337 -j MARK --set-mark 1338",
      "-A OUTPUT -p tcp -m connmark --mark 1337 -j CONNMARK --restore-mark",
      "-I ISTIO_INBOUND 1 -p tcp -m mark --mark 1337 -j RETURN",
      "-I ISTIO_INBOUND 2 -p tcp -s 127.0.0.6/32 -i lo -j RETURN",
      "-I ISTIO_INBOUND 3 -p tcp -i lo -m mark ! --mark 1338 -j RETURN",
    ]);
    // The excluded interface is also let through in nat; no inbound redirect in nat under TPROXY.
    const nat = rulesOf(cfg, "v4", "nat");
    expect(nat.slice(0, 2)).toEqual(["-A PREROUTING -i eth9 -j RETURN", "-A OUTPUT -o eth9 -j RETURN"]);
    expect(nat.filter((l) => l.includes("-j ISTIO_INBOUND") || l.includes("ISTIO_INBOUND -p tcp -j"))).toEqual([]);
  });

  test("IPv6 uses ::6 and ::1 in the TPROXY rules", () => {
    const cfg = { INBOUND_INTERCEPTION_MODE: "TPROXY", INBOUND_PORTS_INCLUDE: "80", ENABLE_INBOUND_IPV6: true };
    const m = rulesOf(cfg, "v6", "mangle");
    expect(m).toContain("-A ISTIO_TPROXY ! -d ::1/128 -p tcp -j TPROXY --tproxy-mark 1337/0xffffffff --on-port 15006");
    expect(m).toContain("-I ISTIO_INBOUND 2 -p tcp -s ::6/128 -i lo -j RETURN");
    expect(m).toContain("-A OUTPUT ! -d ::1/128 -p tcp -o lo -m owner --uid-owner 1337 -j MARK --set-mark 1338");
    expect(m.filter((l) => l.includes("127.0.0"))).toEqual([]);
  });
});

describe("outbound capture", () => {
  test("a wildcard include with kube-virt interfaces redirects everything from them, per family", () => {
    const cfg = { OUTBOUND_IPRANGES_INCLUDE: "*", KUBE_VIRT_INTERFACES: "eth1,eth2", ENABLE_INBOUND_IPV6: true };
    for (const f of ["v4", "v6"] as const) {
      const nat = rulesOf(cfg, f, "nat");
      expect(nat.filter((l) => l.startsWith("-I PREROUTING"))).toEqual([
        "-I PREROUTING 1 -i eth1 -j RETURN",
        "-I PREROUTING 1 -i eth2 -j RETURN",
        "-I PREROUTING 1 -i eth1 -j ISTIO_REDIRECT",
        "-I PREROUTING 1 -i eth2 -j ISTIO_REDIRECT",
      ]);
      // Istio appends the catch-all first, then inserts the interface rules.
      expect(nat.slice(-3)).toEqual([
        "-A ISTIO_OUTPUT -j ISTIO_REDIRECT",
        "-I PREROUTING 1 -i eth1 -j ISTIO_REDIRECT",
        "-I PREROUTING 1 -i eth2 -j ISTIO_REDIRECT",
      ]);
    }
  });

  test("excluded outbound ports return for tcp and udp", () => {
    const nat = rulesOf({ OUTBOUND_PORTS_EXCLUDE: "3306" }, "v4", "nat");
    expect(nat).toContain("-A ISTIO_OUTPUT -p tcp --dport 3306 -j RETURN");
    expect(nat).toContain("-A ISTIO_OUTPUT -p udp --dport 3306 -j RETURN");
  });
});
