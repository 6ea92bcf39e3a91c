// Rule generation: CaptureConfig -> ordered rules per table and family, in exactly the order
// istio-iptables' IptablesConfigurator.Run adds them (the order is the golden files' contract).
// Pure: warnings are returned, not logged.

import { IP_PLACEHOLDER as IP, RuleBuilder } from "./builder.ts";
import { CaptureConfigError, type CaptureConfig } from "./config.ts";
import { separateV4V6, splitList, type NetworkRange } from "./net.ts";

export const DNS_LISTENER_PORT = "15053";
export const OUTBOUND_MARK = "1338";

/** Trace identifiers (NFLOG prefixes) of the rules that get a companion NFLOG rule. */
export const TRACE = {
  JumpInbound: "JumpInbound",
  JumpOutbound: "JumpOutbound",
  ExcludeInboundPort: "ExcludeInboundPort",
  IncludeInboundPort: "IncludeInboundPort",
  InboundCapture: "InboundCapture",
  OutboundCapture: "OutboundCapture",
  KubevirtCommand: "KubevirtCommand",
  ExcludeInterfaceCommand: "ExcludeInterfaceCommand",
} as const;

/** One-line meaning of each trace identifier, logged with every traced packet. */
export const TRACE_COMMENTS: Record<string, string> = {
  JumpInbound: "direct all traffic through ISTIO_INBOUND chain",
  JumpOutbound: "direct all traffic through ISTIO_OUTPUT chain",
  ExcludeInboundPort: "exclude inbound port from capture",
  IncludeInboundPort: "include inbound port for capture",
  InboundCapture: "redirect inbound request to proxy",
  OutboundCapture: "redirect outbound request to proxy",
  KubevirtCommand: "Kubevirt outbound redirect",
  ExcludeInterfaceCommand: "Excluded interface",
};

export interface GeneratedRules {
  builder: RuleBuilder;
  /** DNS capture after the "no servers" check. */
  redirectDNS: boolean;
  warnings: string[];
}

/**
 * The outbound ranges and the DNS decision both capture modes start from: the CIDR lists split by
 * family (a bad entry or a wildcard exclude is refused), and whether DNS is redirected at all
 * (not without CAPTURE_ALL_DNS or DNS servers, with Istio's warning).
 */
export function outboundRanges(
  cfg: CaptureConfig,
  warnings: string[],
): { exclude: ReturnType<typeof separateV4V6>; include: ReturnType<typeof separateV4V6>; redirectDNS: boolean } {
  const exclude = separateV4V6(cfg.OUTBOUND_IPRANGES_EXCLUDE);
  if (exclude.bad !== undefined) throw new CaptureConfigError(`--istio-service-exclude-cidr: invalid CIDR "${exclude.bad}"`);
  if (exclude.v4.wildcard) throw new CaptureConfigError("invalid value for OUTBOUND_IP_RANGES_EXCLUDE");
  const include = separateV4V6(cfg.OUTBOUND_IPRANGES_INCLUDE);
  if (include.bad !== undefined) throw new CaptureConfigError(`--istio-service-cidr: invalid CIDR "${include.bad}"`);

  let redirectDNS = cfg.REDIRECT_DNS;
  if (redirectDNS && !cfg.CAPTURE_ALL_DNS && cfg.DNS_SERVERS_V4.length === 0 && cfg.DNS_SERVERS_V6.length === 0) {
    warnings.push("REDIRECT_DNS is set, but CAPTURE_ALL_DNS is false, and no DNS servers provided. DNS capture disabled.");
    redirectDNS = false;
  }
  return { exclude, include, redirectDNS };
}

export function generateRules(cfg: CaptureConfig): GeneratedRules {
  const rb = new RuleBuilder(cfg.ENABLE_INBOUND_IPV6, cfg.TRACE_LOGGING);
  const warnings: string[] = [];
  const tproxy = cfg.INBOUND_INTERCEPTION_MODE === "TPROXY";
  const lb4 = cfg.HOST_IPV4_LOOPBACK_CIDR;

  const { exclude, include, redirectDNS } = outboundRanges(cfg, warnings);

  // Excluded interfaces, then kube-virt interfaces.
  for (const nic of splitList(cfg.EXCLUDE_INTERFACES)) {
    rb.append("PREROUTING", "nat", ["-i", nic, "-j", "RETURN"], TRACE.ExcludeInterfaceCommand);
    rb.append("OUTPUT", "nat", ["-o", nic, "-j", "RETURN"], TRACE.ExcludeInterfaceCommand);
  }
  if (tproxy) {
    for (const nic of splitList(cfg.EXCLUDE_INTERFACES)) {
      rb.append("PREROUTING", "mangle", ["-i", nic, "-j", "RETURN"], TRACE.ExcludeInterfaceCommand);
      rb.append("OUTPUT", "mangle", ["-o", nic, "-j", "RETURN"], TRACE.ExcludeInterfaceCommand);
    }
  }
  for (const nic of splitList(cfg.KUBE_VIRT_INTERFACES)) rb.insert("PREROUTING", "nat", 1, ["-i", nic, "-j", "RETURN"], TRACE.KubevirtCommand);

  if (cfg.DROP_INVALID) {
    rb.append("PREROUTING", "mangle", ["-m", "conntrack", "--ctstate", "INVALID", "-j", "ISTIO_DROP"]);
    rb.append("ISTIO_DROP", "mangle", ["-j", "DROP"]);
  }

  rb.append("ISTIO_INBOUND", "nat", ["-p", "tcp", "--dport", cfg.INBOUND_TUNNEL_PORT, "-j", "RETURN"]);
  rb.append("ISTIO_REDIRECT", "nat", ["-p", "tcp", "-j", "REDIRECT", "--to-ports", cfg.PROXY_PORT], TRACE.OutboundCapture);
  rb.append("ISTIO_IN_REDIRECT", "nat", ["-p", "tcp", "-j", "REDIRECT", "--to-ports", cfg.INBOUND_CAPTURE_PORT], TRACE.InboundCapture);

  inboundPorts(rb, cfg, tproxy, lb4);

  rb.append("OUTPUT", "nat", ["-j", "ISTIO_OUTPUT"], TRACE.JumpOutbound);
  for (const port of splitList(cfg.OUTBOUND_PORTS_EXCLUDE)) {
    rb.append("ISTIO_OUTPUT", "nat", ["-p", "tcp", "--dport", port, "-j", "RETURN"]);
    rb.append("ISTIO_OUTPUT", "nat", ["-p", "udp", "--dport", port, "-j", "RETURN"]);
  }
  rb.appendVersioned("127.0.0.6/32", "::6/128", "ISTIO_OUTPUT", "nat", ["-o", "lo", "-s", IP, "-j", "RETURN"]);

  const loopbackIncluded = include.v4.hasLoopback || include.v6.hasLoopback;
  const owners: ["uid" | "gid", string][] = [
    ...splitList(cfg.PROXY_UID).map((u) => ["uid", u] as ["uid", string]),
    ...splitList(cfg.PROXY_GID).map((g) => ["gid", g] as ["gid", string]),
  ];
  for (const [kind, id] of owners) {
    const owner = kind === "uid" ? "--uid-owner" : "--gid-owner";
    // Only the UID rule skips DNS with multiport; Istio's GID rule always uses `! --dport <tunnel>`.
    const ports =
      redirectDNS && kind === "uid" ? ["-m", "multiport", "!", "--dports", `53,${cfg.INBOUND_TUNNEL_PORT}`] : ["!", "--dport", cfg.INBOUND_TUNNEL_PORT];
    rb.appendVersioned(lb4, "::1/128", "ISTIO_OUTPUT", "nat", [
      "-o",
      "lo",
      "!",
      "-d",
      IP,
      "-p",
      "tcp",
      ...ports,
      "-m",
      "owner",
      owner,
      id,
      "-j",
      "ISTIO_IN_REDIRECT",
    ]);
    if (!loopbackIncluded) {
      if (redirectDNS) rb.append("ISTIO_OUTPUT", "nat", ["-o", "lo", "-p", "tcp", "!", "--dport", "53", "-m", "owner", "!", owner, id, "-j", "RETURN"]);
      else rb.append("ISTIO_OUTPUT", "nat", ["-o", "lo", "-m", "owner", "!", owner, id, "-j", "RETURN"]);
    }
    rb.append("ISTIO_OUTPUT", "nat", ["-m", "owner", owner, id, "-j", "RETURN"]);
  }

  // Owner groups.
  if (cfg.OUTBOUND_OWNER_GROUPS_INCLUDE === "*") {
    for (const g of splitList(cfg.OUTBOUND_OWNER_GROUPS_EXCLUDE)) rb.append("ISTIO_OUTPUT", "nat", ["-m", "owner", "--gid-owner", g, "-j", "RETURN"]);
  } else {
    const groups = splitList(cfg.OUTBOUND_OWNER_GROUPS_INCLUDE);
    rb.append("ISTIO_OUTPUT", "nat", [...groups.flatMap((g) => ["-m", "owner", "!", "--gid-owner", g]), "-j", "RETURN"]);
  }

  if (redirectDNS) dnsRedirect(rb, cfg);

  rb.appendVersioned(lb4, "::1/128", "ISTIO_OUTPUT", "nat", ["-d", IP, "-j", "RETURN"]);
  for (const c of exclude.v4.cidrs) rb.appendFamily("v4", "ISTIO_OUTPUT", "nat", ["-d", c, "-j", "RETURN"]);
  for (const c of exclude.v6.cidrs) rb.appendFamily("v6", "ISTIO_OUTPUT", "nat", ["-d", c, "-j", "RETURN"]);

  for (const port of splitList(cfg.OUTBOUND_PORTS_INCLUDE)) rb.append("ISTIO_OUTPUT", "nat", ["-p", "tcp", "--dport", port, "-j", "ISTIO_REDIRECT"]);

  outboundInclude(rb, cfg, "v4", include.v4);
  outboundInclude(rb, cfg, "v6", include.v6);

  if (tproxy) tproxyExtras(rb, cfg, lb4);
  return { builder: rb, redirectDNS, warnings };
}

function inboundPorts(rb: RuleBuilder, cfg: CaptureConfig, tproxy: boolean, lb4: string): void {
  if (cfg.INBOUND_PORTS_INCLUDE === "") return;
  let table = "nat";
  if (tproxy) {
    rb.append("ISTIO_DIVERT", "mangle", ["-j", "MARK", "--set-mark", cfg.INBOUND_TPROXY_MARK]);
    rb.append("ISTIO_DIVERT", "mangle", ["-j", "ACCEPT"]);
    rb.appendVersioned(lb4, "::1/128", "ISTIO_TPROXY", "mangle", [
      "!",
      "-d",
      IP,
      "-p",
      "tcp",
      "-j",
      "TPROXY",
      "--tproxy-mark",
      `${cfg.INBOUND_TPROXY_MARK}/0xffffffff`,
      "--on-port",
      cfg.INBOUND_CAPTURE_PORT,
    ]);
    table = "mangle";
  }
  rb.append("PREROUTING", table, ["-p", "tcp", "-j", "ISTIO_INBOUND"], TRACE.JumpInbound);
  if (cfg.INBOUND_PORTS_INCLUDE === "*") {
    for (const port of splitList(cfg.INBOUND_PORTS_EXCLUDE))
      rb.append("ISTIO_INBOUND", table, ["-p", "tcp", "--dport", port, "-j", "RETURN"], TRACE.ExcludeInboundPort);
    if (tproxy) {
      rb.append("ISTIO_INBOUND", "mangle", ["-p", "tcp", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ISTIO_DIVERT"]);
      rb.append("ISTIO_INBOUND", "mangle", ["-p", "tcp", "-j", "ISTIO_TPROXY"]);
    } else {
      rb.append("ISTIO_INBOUND", "nat", ["-p", "tcp", "-j", "ISTIO_IN_REDIRECT"]);
    }
    return;
  }
  for (const port of splitList(cfg.INBOUND_PORTS_INCLUDE)) {
    if (tproxy) {
      rb.append(
        "ISTIO_INBOUND",
        "mangle",
        ["-p", "tcp", "--dport", port, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ISTIO_DIVERT"],
        TRACE.IncludeInboundPort,
      );
      rb.append("ISTIO_INBOUND", "mangle", ["-p", "tcp", "--dport", port, "-j", "ISTIO_TPROXY"], TRACE.IncludeInboundPort);
    } else {
      rb.append("ISTIO_INBOUND", "nat", ["-p", "tcp", "--dport", port, "-j", "ISTIO_IN_REDIRECT"], TRACE.IncludeInboundPort);
    }
  }
}

function outboundInclude(rb: RuleBuilder, cfg: CaptureConfig, f: "v4" | "v6", range: NetworkRange): void {
  if (range.wildcard) {
    rb.appendFamily(f, "ISTIO_OUTPUT", "nat", ["-j", "ISTIO_REDIRECT"]);
    for (const nic of splitList(cfg.KUBE_VIRT_INTERFACES))
      rb.insertFamily(f, "PREROUTING", "nat", 1, ["-i", nic, "-j", "ISTIO_REDIRECT"], TRACE.KubevirtCommand);
    return;
  }
  for (const cidr of range.cidrs) {
    for (const nic of splitList(cfg.KUBE_VIRT_INTERFACES))
      rb.insertFamily(f, "PREROUTING", "nat", 1, ["-i", nic, "-d", cidr, "-j", "ISTIO_REDIRECT"], TRACE.KubevirtCommand);
    rb.appendFamily(f, "ISTIO_OUTPUT", "nat", ["-d", cidr, "-j", "ISTIO_REDIRECT"]);
  }
}

function dnsRedirect(rb: RuleBuilder, cfg: CaptureConfig): void {
  const all = cfg.CAPTURE_ALL_DNS;
  const v4 = cfg.DNS_SERVERS_V4;
  const v6 = cfg.DNS_SERVERS_V6;
  rb.append("OUTPUT", "raw", ["-j", "ISTIO_OUTPUT_DNS"]);
  if (all || v4.length > 0) rb.appendFamily("v4", "ISTIO_OUTPUT", "nat", ["-j", "ISTIO_OUTPUT_DNS"]);
  if (all || v6.length > 0) rb.appendFamily("v6", "ISTIO_OUTPUT", "nat", ["-j", "ISTIO_OUTPUT_DNS"]);
  for (const [proto, toPorts] of [
    ["tcp", "--to-ports"],
    ["udp", "--to-port"],
  ] as const) {
    if (all) {
      rb.append("ISTIO_OUTPUT_DNS", "nat", ["-p", proto, "--dport", "53", "-j", "REDIRECT", toPorts, DNS_LISTENER_PORT]);
      continue;
    }
    for (const s of v4)
      rb.appendFamily("v4", "ISTIO_OUTPUT_DNS", "nat", ["-p", proto, "--dport", "53", "-d", `${s}/32`, "-j", "REDIRECT", toPorts, DNS_LISTENER_PORT]);
    for (const s of v6)
      rb.appendFamily("v6", "ISTIO_OUTPUT_DNS", "nat", ["-p", proto, "--dport", "53", "-d", `${s}/128`, "-j", "REDIRECT", toPorts, DNS_LISTENER_PORT]);
  }
  // Conntrack zones: agent <-> upstream resolvers in zone 1, application <-> agent in zone 2.
  for (const [owner, ids] of [
    ["--uid-owner", splitList(cfg.PROXY_UID)],
    ["--gid-owner", splitList(cfg.PROXY_GID)],
  ] as const) {
    for (const id of ids) {
      rb.append("ISTIO_OUTPUT_DNS", "raw", ["-p", "udp", "--dport", "53", "-m", "owner", owner, id, "-j", "CT", "--zone", "1"]);
      rb.append("ISTIO_OUTPUT_DNS", "raw", ["-p", "udp", "--sport", DNS_LISTENER_PORT, "-m", "owner", owner, id, "-j", "CT", "--zone", "2"]);
    }
  }
  if (all) {
    rb.append("PREROUTING", "raw", ["-j", "ISTIO_INBOUND"]);
    rb.append("ISTIO_OUTPUT_DNS", "raw", ["-p", "udp", "--dport", "53", "-j", "CT", "--zone", "2"]);
    rb.append("ISTIO_INBOUND", "raw", ["-p", "udp", "--sport", "53", "-j", "CT", "--zone", "1"]);
    return;
  }
  for (const [f, servers, bits] of [
    ["v4", v4, "32"],
    ["v6", v6, "128"],
  ] as const) {
    if (servers.length > 0) rb.appendFamily(f, "PREROUTING", "raw", ["-j", "ISTIO_INBOUND"]);
    for (const s of servers) {
      rb.appendFamily(f, "ISTIO_OUTPUT_DNS", "raw", ["-p", "udp", "--dport", "53", "-d", `${s}/${bits}`, "-j", "CT", "--zone", "2"]);
      rb.appendFamily(f, "ISTIO_INBOUND", "raw", ["-p", "udp", "--sport", "53", "-s", `${s}/${bits}`, "-j", "CT", "--zone", "1"]);
    }
  }
}

function tproxyExtras(rb: RuleBuilder, cfg: CaptureConfig, lb4: string): void {
  const mark = cfg.INBOUND_TPROXY_MARK;
  rb.append("PREROUTING", "mangle", ["-p", "tcp", "-m", "mark", "--mark", mark, "-j", "CONNMARK", "--save-mark"]);
  rb.append("OUTPUT", "mangle", ["-p", "tcp", "-o", "lo", "-m", "mark", "--mark", mark, "-j", "RETURN"]);
  for (const [owner, ids] of [
    ["--uid-owner", splitList(cfg.PROXY_UID)],
    ["--gid-owner", splitList(cfg.PROXY_GID)],
  ] as const) {
    for (const id of ids)
      rb.appendVersioned(lb4, "::1/128", "OUTPUT", "mangle", [
        "!",
        "-d",
        IP,
        "-p",
        "tcp",
        "-o",
        "lo",
        "-m",
        "owner",
        owner,
        id,
        "-j",
        "MARK",
        "--set-mark",
        OUTBOUND_MARK,
      ]);
  }
  rb.append("OUTPUT", "mangle", ["-p", "tcp", "-m", "connmark", "--mark", mark, "-j", "CONNMARK", "--restore-mark"]);
  rb.insert("ISTIO_INBOUND", "mangle", 1, ["-p", "tcp", "-m", "mark", "--mark", mark, "-j", "RETURN"]);
  rb.insertFamily("v4", "ISTIO_INBOUND", "mangle", 2, ["-p", "tcp", "-s", "127.0.0.6/32", "-i", "lo", "-j", "RETURN"]);
  rb.insertFamily("v6", "ISTIO_INBOUND", "mangle", 2, ["-p", "tcp", "-s", "::6/128", "-i", "lo", "-j", "RETURN"]);
  rb.insert("ISTIO_INBOUND", "mangle", 3, ["-p", "tcp", "-i", "lo", "-m", "mark", "!", "--mark", OUTBOUND_MARK, "-j", "RETURN"]);
}
