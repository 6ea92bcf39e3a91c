// nftables rule generation: CaptureConfig -> rules of Istio's three inet tables, in exactly the
// order istio-nftables' NftablesConfigurator.Run generates them (the order is the golden files'
// contract). IPv6 rules are extra rules in the same tables. Pure: warnings are returned.

import type { CaptureConfig } from "./config.ts";
import { splitList, type NetworkRange } from "./net.ts";
import { MANGLE_TABLE as MANGLE, NAT_TABLE as NAT, NftRuleBuilder, RAW_TABLE as RAW } from "./nft-builder.ts";
import { DNS_LISTENER_PORT, OUTBOUND_MARK, TRACE, outboundRanges } from "./rules.ts";

export interface GeneratedNftRules {
  builder: NftRuleBuilder;
  /** DNS capture after the "no servers" check. */
  redirectDNS: boolean;
  warnings: string[];
}

const C = "counter";

export function generateNftRules(cfg: CaptureConfig): GeneratedNftRules {
  const rb = new NftRuleBuilder(cfg.ENABLE_INBOUND_IPV6, cfg.TRACE_LOGGING);
  const warnings: string[] = [];
  const tproxy = cfg.INBOUND_INTERCEPTION_MODE === "TPROXY";
  const lb4 = cfg.HOST_IPV4_LOOPBACK_CIDR;

  const { exclude, include, redirectDNS } = outboundRanges(cfg, warnings);

  // Excluded interfaces, then kube-virt interfaces.
  const excluded = splitList(cfg.EXCLUDE_INTERFACES);
  for (const table of tproxy ? [NAT, MANGLE] : [NAT]) {
    for (const nic of excluded) {
      rb.append("prerouting", table, ["iifname", nic, C, "return"], TRACE.ExcludeInterfaceCommand);
      rb.append("output", table, ["oifname", nic, C, "return"], TRACE.ExcludeInterfaceCommand);
    }
  }
  const virt = splitList(cfg.KUBE_VIRT_INTERFACES);
  for (const nic of virt) rb.insert("prerouting", NAT, 0, ["iifname", nic, C, "return"], TRACE.KubevirtCommand);

  if (cfg.DROP_INVALID) {
    rb.append("prerouting", MANGLE, ["meta l4proto tcp", "ct state", "invalid", C, "jump", "istio-drop"]);
    rb.append("istio-drop", MANGLE, [C, "drop"]);
  }

  rb.append("istio-inbound", NAT, ["meta l4proto tcp", "tcp dport", cfg.INBOUND_TUNNEL_PORT, C, "return"]);
  rb.append("istio-redirect", NAT, ["meta l4proto tcp", C, "redirect to", `:${cfg.PROXY_PORT}`], TRACE.OutboundCapture);
  rb.append("istio-in-redirect", NAT, ["meta l4proto tcp", C, "redirect to", `:${cfg.INBOUND_CAPTURE_PORT}`], TRACE.InboundCapture);

  inboundPorts(rb, cfg, tproxy, lb4);

  rb.append("output", NAT, [C, "jump", "istio-output"], TRACE.JumpOutbound);
  const out = (tokens: string[]) => rb.append("istio-output", NAT, tokens);
  const out6 = (tokens: string[]) => rb.appendV6("istio-output", NAT, tokens);
  for (const port of splitList(cfg.OUTBOUND_PORTS_EXCLUDE)) {
    out(["tcp dport", port, C, "return"]);
    out(["udp dport", port, C, "return"]);
  }
  out(["oifname lo", "ip saddr", "127.0.0.6/32", C, "return"]);
  out6(["oifname lo", "ip6 saddr", "::6/128", C, "return"]);

  const loopbackIncluded = include.v4.hasLoopback || include.v6.hasLoopback;
  for (const [key, ids] of [
    ["skuid", splitList(cfg.PROXY_UID)],
    ["skgid", splitList(cfg.PROXY_GID)],
  ] as const) {
    for (const id of ids) {
      // Only the UID rule also skips DNS; Istio's GID rule always uses `!= <tunnel port>`.
      const ports = redirectDNS && key === "skuid" ? `{ 53, ${cfg.INBOUND_TUNNEL_PORT} }` : cfg.INBOUND_TUNNEL_PORT;
      out(["oifname lo", "meta l4proto tcp", "ip daddr", "!=", lb4, "tcp dport", "!=", ports, key, id, C, "jump", "istio-in-redirect"]);
      out6(["oifname lo", "meta l4proto tcp", "ip6 daddr", "!=", "::1/128", "tcp dport", "!=", ports, key, id, C, "jump", "istio-in-redirect"]);
      if (!loopbackIncluded) {
        if (redirectDNS) out(["oifname lo", "meta l4proto tcp", "tcp dport", "!=", "53", key, "!=", id, C, "return"]);
        else out(["oifname lo", key, "!=", id, C, "return"]);
      }
      out([key, id, C, "return"]);
    }
  }

  if (cfg.OUTBOUND_OWNER_GROUPS_INCLUDE === "*") {
    for (const g of splitList(cfg.OUTBOUND_OWNER_GROUPS_EXCLUDE)) out(["skgid", g, C, "return"]);
  } else {
    out([...splitList(cfg.OUTBOUND_OWNER_GROUPS_INCLUDE).flatMap((g) => ["skgid", "!=", g]), C, "return"]);
  }

  if (redirectDNS) dnsRedirect(rb, cfg);

  out(["ip daddr", lb4, C, "return"]);
  out6(["ip6 daddr", "::1/128", C, "return"]);
  for (const c of exclude.v4.cidrs) out(["ip daddr", c, C, "return"]);
  for (const c of exclude.v6.cidrs) out6(["ip6 daddr", c, C, "return"]);

  for (const port of splitList(cfg.OUTBOUND_PORTS_INCLUDE)) out(["tcp dport", port, C, "jump", "istio-redirect"]);

  outboundInclude(rb, virt, include.v4, include.v6);

  if (tproxy) tproxyExtras(rb, cfg, lb4);
  return { builder: rb, redirectDNS, warnings };
}

function inboundPorts(rb: NftRuleBuilder, cfg: CaptureConfig, tproxy: boolean, lb4: string): void {
  if (cfg.INBOUND_PORTS_INCLUDE === "") return;
  const wildcard = cfg.INBOUND_PORTS_INCLUDE === "*";
  if (!tproxy) {
    rb.append("prerouting", NAT, ["meta l4proto tcp", C, "jump", "istio-inbound"], TRACE.JumpInbound);
    if (wildcard) {
      for (const port of splitList(cfg.INBOUND_PORTS_EXCLUDE))
        rb.append("istio-inbound", NAT, ["meta l4proto tcp", "tcp dport", port, C, "return"], TRACE.ExcludeInboundPort);
      rb.append("istio-inbound", NAT, ["meta l4proto tcp", C, "jump", "istio-in-redirect"]);
      return;
    }
    for (const port of splitList(cfg.INBOUND_PORTS_INCLUDE))
      rb.append("istio-inbound", NAT, ["meta l4proto tcp", "tcp dport", port, C, "jump", "istio-in-redirect"], TRACE.IncludeInboundPort);
    return;
  }
  const mark = cfg.INBOUND_TPROXY_MARK;
  rb.append("istio-divert", MANGLE, [C, "meta mark set", mark]);
  rb.append("istio-divert", MANGLE, [C, "accept"]);
  rb.append("istio-tproxy", MANGLE, [
    "meta l4proto tcp",
    "ip daddr",
    "!=",
    lb4,
    "tproxy ip to",
    `:${cfg.INBOUND_CAPTURE_PORT}`,
    "meta mark set",
    mark,
    C,
    "accept",
  ]);
  rb.appendV6("istio-tproxy", MANGLE, [
    "meta l4proto tcp",
    "ip6 daddr",
    "!=",
    "::1/128",
    "tproxy ip6 to",
    `:${cfg.INBOUND_CAPTURE_PORT}`,
    "meta mark set",
    mark,
    C,
    "accept",
  ]);
  rb.append("prerouting", MANGLE, ["meta l4proto tcp", C, "jump", "istio-inbound"], TRACE.JumpInbound);
  if (wildcard) {
    for (const port of splitList(cfg.INBOUND_PORTS_EXCLUDE))
      rb.append("istio-inbound", MANGLE, ["meta l4proto tcp", "tcp dport", port, C, "return"], TRACE.ExcludeInboundPort);
    rb.append("istio-inbound", MANGLE, ["meta l4proto tcp", "ct state", "related,established", C, "jump", "istio-divert"]);
    rb.append("istio-inbound", MANGLE, ["meta l4proto tcp", C, "jump", "istio-tproxy"]);
    return;
  }
  for (const port of splitList(cfg.INBOUND_PORTS_INCLUDE)) {
    rb.append(
      "istio-inbound",
      MANGLE,
      ["meta l4proto tcp", "ct state", "related,established", "tcp dport", port, C, "jump", "istio-divert"],
      TRACE.IncludeInboundPort,
    );
    rb.append("istio-inbound", MANGLE, ["meta l4proto tcp", "tcp dport", port, C, "jump", "istio-tproxy"], TRACE.IncludeInboundPort);
  }
}

function outboundInclude(rb: NftRuleBuilder, virt: readonly string[], v4: NetworkRange, v6: NetworkRange): void {
  if (v4.wildcard || v6.wildcard) {
    rb.append("istio-output", NAT, [C, "jump", "istio-redirect"]);
    for (const nic of virt) rb.insert("prerouting", NAT, 0, ["iifname", nic, C, "jump", "istio-redirect"], TRACE.KubevirtCommand);
    return;
  }
  for (const cidr of v4.cidrs) {
    for (const nic of virt) rb.insert("prerouting", NAT, 0, ["iifname", nic, "ip daddr", cidr, C, "jump", "istio-redirect"], TRACE.KubevirtCommand);
    rb.append("istio-output", NAT, ["ip daddr", cidr, C, "jump", "istio-redirect"]);
  }
  for (const cidr of v6.cidrs) {
    for (const nic of virt) rb.insertV6("prerouting", NAT, 0, ["iifname", nic, "ip6 daddr", cidr, C, "jump", "istio-redirect"], TRACE.KubevirtCommand);
    rb.appendV6("istio-output", NAT, ["ip6 daddr", cidr, C, "jump", "istio-redirect"]);
  }
}

function dnsRedirect(rb: NftRuleBuilder, cfg: CaptureConfig): void {
  const all = cfg.CAPTURE_ALL_DNS;
  const v4 = cfg.DNS_SERVERS_V4;
  const v6 = cfg.DNS_SERVERS_V6;
  const to = ["redirect to", `:${DNS_LISTENER_PORT}`];
  rb.append("output", RAW, [C, "jump", "istio-output-dns"]);
  rb.append("istio-output", NAT, [C, "jump", "istio-output-dns"]);
  for (const proto of ["tcp", "udp"] as const) {
    if (all) {
      rb.append("istio-output-dns", NAT, [...(proto === "tcp" ? ["meta l4proto tcp"] : []), `${proto} dport`, "53", C, ...to]);
      continue;
    }
    for (const s of v4) rb.append("istio-output-dns", NAT, ["ip daddr", `${s}/32`, `${proto} dport`, "53", C, ...to]);
    for (const s of v6) rb.appendV6("istio-output-dns", NAT, ["ip6 daddr", `${s}/128`, `${proto} dport`, "53", C, ...to]);
  }
  // Conntrack zones: agent <-> upstream resolvers in zone 1, application <-> agent in zone 2.
  for (const [key, ids] of [
    ["skuid", splitList(cfg.PROXY_UID)],
    ["skgid", splitList(cfg.PROXY_GID)],
  ] as const) {
    for (const id of ids) {
      rb.append("istio-output-dns", RAW, ["udp dport", "53", "meta", key, id, C, "ct", "zone", "set", "1"]);
      rb.append("istio-output-dns", RAW, ["udp sport", DNS_LISTENER_PORT, "meta", key, id, C, "ct", "zone", "set", "2"]);
    }
  }
  if (all) {
    rb.append("prerouting", RAW, [C, "jump", "istio-inbound"]);
    rb.append("istio-output-dns", RAW, ["udp dport", "53", C, "ct", "zone", "set", "2"]);
    rb.append("istio-inbound", RAW, ["udp sport", "53", C, "ct", "zone", "set", "1"]);
    return;
  }
  if (v4.length > 0 || v6.length > 0) rb.append("prerouting", RAW, [C, "jump", "istio-inbound"]);
  for (const s of v4) {
    rb.append("istio-output-dns", RAW, ["udp dport", "53", "ip daddr", `${s}/32`, C, "ct", "zone", "set", "2"]);
    rb.append("istio-inbound", RAW, ["udp sport", "53", "ip saddr", `${s}/32`, C, "ct", "zone", "set", "1"]);
  }
  for (const s of v6) {
    rb.appendV6("istio-output-dns", RAW, ["udp dport", "53", "ip6 daddr", `${s}/128`, C, "ct", "zone", "set", "2"]);
    rb.appendV6("istio-inbound", RAW, ["udp sport", "53", "ip6 saddr", `${s}/128`, C, "ct", "zone", "set", "1"]);
  }
}

function tproxyExtras(rb: NftRuleBuilder, cfg: CaptureConfig, lb4: string): void {
  const mark = cfg.INBOUND_TPROXY_MARK;
  rb.append("prerouting", MANGLE, ["meta l4proto tcp", "mark", mark, C, "ct mark set mark"]);
  rb.append("output", MANGLE, ["oifname lo", "meta l4proto tcp", "mark", mark, C, "return"]);
  for (const [key, ids] of [
    ["skuid", splitList(cfg.PROXY_UID)],
    ["skgid", splitList(cfg.PROXY_GID)],
  ] as const) {
    for (const id of ids) {
      rb.append("output", MANGLE, ["oifname lo", "meta l4proto tcp", "ip daddr", "!=", lb4, key, id, C, "meta mark set", OUTBOUND_MARK]);
      rb.appendV6("output", MANGLE, ["oifname lo", "meta l4proto tcp", "ip6 daddr", "!=", "::1/128", key, id, C, "meta mark set", OUTBOUND_MARK]);
    }
  }
  rb.append("output", MANGLE, ["meta l4proto tcp", "ct mark", mark, C, "meta mark set ct mark"]);
  rb.insert("istio-inbound", MANGLE, 0, ["meta l4proto tcp", "mark", mark, C, "return"]);
  rb.insert("istio-inbound", MANGLE, 1, ["iifname lo", "meta l4proto tcp", "ip saddr", "127.0.0.6/32", C, "return"]);
  rb.insertV6("istio-inbound", MANGLE, 1, ["iifname lo", "meta l4proto tcp", "ip6 saddr", "::6/128", C, "return"]);
  rb.insert("istio-inbound", MANGLE, 2, ["iifname lo", "meta l4proto tcp", "mark", "!=", OUTBOUND_MARK, C, "return"]);
}
