// The survivors of `npm run mutate -- iptables -- --mutate src/iptables/rules.ts` (issue 23): the
// refusals of bad outbound CIDR lists, the DNS-capture decision, CAPTURE_ALL_DNS (no golden case
// covers it), DNS servers of one family only, v6 rules with IPv6 off, and the trace comments.
// Expected rules written by hand from istio-iptables' SetupDNSRedir and addDNSConntrackZones
// (tools/istio-iptables/pkg/capture/run.go at 86c9f01); trace comments from Istio's
// tools/istio-iptables/pkg/log Command table (JumpOutbound's chain name and OutboundCapture are ours,
// see docs/iptables.md).

import { describe, expect, test } from "bun:test";
import { CaptureConfigError, defaultCaptureConfig, type CaptureConfig } from "../../src/iptables/config.ts";
import { generateRules } from "../../src/iptables/rules.ts";
import { describePacket } from "../../src/iptables/tracer.ts";

const generate = (cfg: Partial<CaptureConfig>) => generateRules({ ...defaultCaptureConfig(), PROXY_UID: "1337", PROXY_GID: "1337", ...cfg });

const rulesOf = (cfg: Partial<CaptureConfig>, f: "v4" | "v6", table: string) =>
  generate(cfg)
    .builder.rules(f)
    .filter((r) => r.table === table)
    .map((r) => r.params.join(" "));

/** The error generateRules throws for `cfg` (fails the test when it does not throw). */
function refusal(cfg: Partial<CaptureConfig>): { isCaptureConfigError: boolean; message: string } {
  try {
    generate(cfg);
  } catch (e) {
    return { isCaptureConfigError: e instanceof CaptureConfigError, message: (e as Error).message };
  }
  throw new Error("generateRules accepted the configuration");
}

describe("outbound CIDR lists the rule generator refuses (naming the input)", () => {
  test("an unparsable exclude entry", () => {
    expect(refusal({ OUTBOUND_IPRANGES_EXCLUDE: "10.0.0.0/8,not-a-cidr" })).toEqual({
      isCaptureConfigError: true,
      message: '--istio-service-exclude-cidr: invalid CIDR "not-a-cidr"',
    });
  });
  test('"*" as the exclude list: Istio\'s "invalid value for OUTBOUND_IP_RANGES_EXCLUDE"', () => {
    expect(refusal({ OUTBOUND_IPRANGES_EXCLUDE: "*" })).toEqual({ isCaptureConfigError: true, message: "invalid value for OUTBOUND_IP_RANGES_EXCLUDE" });
  });
  test("an unparsable include entry", () => {
    expect(refusal({ OUTBOUND_IPRANGES_INCLUDE: "10.0.0.0/33" })).toEqual({
      isCaptureConfigError: true,
      message: '--istio-service-cidr: invalid CIDR "10.0.0.0/33"',
    });
  });
  test("valid lists are accepted (the sentinel for the refusals above)", () => {
    expect(generate({ OUTBOUND_IPRANGES_EXCLUDE: "10.0.0.0/8", OUTBOUND_IPRANGES_INCLUDE: "*" }).warnings).toEqual([]);
  });
});

describe("whether DNS is redirected", () => {
  test("REDIRECT_DNS off: no DNS rules and no warning", () => {
    const g = generate({ REDIRECT_DNS: false });
    expect(g.redirectDNS).toBe(false);
    expect(g.warnings).toEqual([]);
    expect(g.builder.rules("v4").filter((r) => r.table === "raw")).toEqual([]);
  });
  test("CAPTURE_ALL_DNS without servers: redirected, no warning", () => {
    const g = generate({ REDIRECT_DNS: true, CAPTURE_ALL_DNS: true });
    expect(g.redirectDNS).toBe(true);
    expect(g.warnings).toEqual([]);
  });
  test("IPv6 servers only: redirected, no warning", () => {
    const g = generate({ REDIRECT_DNS: true, ENABLE_INBOUND_IPV6: true, DNS_SERVERS_V6: ["fd00::a"] });
    expect(g.redirectDNS).toBe(true);
    expect(g.warnings).toEqual([]);
  });
});

describe("CAPTURE_ALL_DNS: every port-53 query, no server addresses", () => {
  const cfg = { REDIRECT_DNS: true, CAPTURE_ALL_DNS: true, ENABLE_INBOUND_IPV6: true };
  for (const f of ["v4", "v6"] as const) {
    test(`${f} raw: the proxy's zones, then all udp/53 out in zone 2 and all udp from 53 in zone 1`, () => {
      expect(rulesOf(cfg, f, "raw")).toEqual([
        "-A OUTPUT -j ISTIO_OUTPUT_DNS",
        "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -m owner --uid-owner 1337 -j CT --zone 1",
        "-A ISTIO_OUTPUT_DNS -p udp --sport 15053 -m owner --uid-owner 1337 -j CT --zone 2",
        "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -m owner --gid-owner 1337 -j CT --zone 1",
        "-A ISTIO_OUTPUT_DNS -p udp --sport 15053 -m owner --gid-owner 1337 -j CT --zone 2",
        "-A PREROUTING -j ISTIO_INBOUND",
        "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -j CT --zone 2",
        "-A ISTIO_INBOUND -p udp --sport 53 -j CT --zone 1",
      ]);
    });
    test(`${f} nat: the DNS jump, then tcp and udp port 53 redirected to 15053`, () => {
      expect(rulesOf(cfg, f, "nat").filter((l) => l.includes("ISTIO_OUTPUT_DNS") || l.includes("15053"))).toEqual([
        "-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS",
        "-A ISTIO_OUTPUT_DNS -p tcp --dport 53 -j REDIRECT --to-ports 15053",
        "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -j REDIRECT --to-port 15053",
      ]);
    });
  }
});

describe("DNS servers of IPv6 only", () => {
  const cfg = { REDIRECT_DNS: true, ENABLE_INBOUND_IPV6: true, DNS_SERVERS_V6: ["fd00::a"] };
  test("v4 nat gets no jump to ISTIO_OUTPUT_DNS; v6 nat gets the jump and the server's redirects", () => {
    const dns = (f: "v4" | "v6") => rulesOf(cfg, f, "nat").filter((l) => l.includes("ISTIO_OUTPUT_DNS"));
    expect(dns("v6")).toEqual([
      "-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS",
      "-A ISTIO_OUTPUT_DNS -p tcp --dport 53 -d fd00::a/128 -j REDIRECT --to-ports 15053",
      "-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d fd00::a/128 -j REDIRECT --to-port 15053",
    ]);
    expect(dns("v4")).toEqual([]);
  });
});

describe("IPv6 off: v6 rules are dropped, whatever v6 inputs there are", () => {
  test("v6 exclude and include CIDRs, v6 DNS servers and TPROXY leave the v6 list empty", () => {
    const g = generate({
      ENABLE_INBOUND_IPV6: false,
      INBOUND_INTERCEPTION_MODE: "TPROXY",
      OUTBOUND_IPRANGES_EXCLUDE: "10.1.0.0/16,fd00:1::/64",
      OUTBOUND_IPRANGES_INCLUDE: "10.0.0.0/8,fd00::/8",
      REDIRECT_DNS: true,
      DNS_SERVERS_V4: ["10.96.0.10"],
      DNS_SERVERS_V6: ["fd00::a"],
    });
    // Sentinel: the same inputs produce the v4 side.
    const v4 = g.builder.rules("v4").map((r) => `${r.table} ${r.params.join(" ")}`);
    expect(v4).toContain("nat -A ISTIO_OUTPUT -d 10.1.0.0/16 -j RETURN");
    expect(v4).toContain("nat -A ISTIO_OUTPUT -d 10.0.0.0/8 -j ISTIO_REDIRECT");
    expect(v4).toContain("mangle -I ISTIO_INBOUND 2 -p tcp -s 127.0.0.6/32 -i lo -j RETURN");
    expect(g.builder.rules("v6")).toEqual([]);
  });
});

describe("trace comments logged with each traced packet", () => {
  const comments: [string, string][] = [
    ["JumpInbound", "direct all traffic through ISTIO_INBOUND chain"],
    ["JumpOutbound", "direct all traffic through ISTIO_OUTPUT chain"],
    ["ExcludeInboundPort", "exclude inbound port from capture"],
    ["IncludeInboundPort", "include inbound port for capture"],
    ["InboundCapture", "redirect inbound request to proxy"],
    ["OutboundCapture", "redirect outbound request to proxy"],
    ["KubevirtCommand", "Kubevirt outbound redirect"],
    ["ExcludeInterfaceCommand", "Excluded interface"],
  ];
  for (const [prefix, comment] of comments) {
    test(prefix, () => {
      expect(describePacket({ prefix }, () => undefined).msg).toBe(comment);
    });
  }
  test("an unknown prefix is logged as itself", () => {
    expect(describePacket({ prefix: "SomethingElse" }, () => undefined).msg).toBe("SomethingElse");
  });
});
