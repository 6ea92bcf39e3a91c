// The capture configuration: Istio's tools/common/config Config, field for field (JSON tags are
// Istio's), its defaults, the environment step (host facts) and validation. Values that go into
// rules stay strings, exactly as Istio keeps them, so rules render byte-for-byte the same.

import { canonicalAddr, isPort, isPortOrRange, parseAddr, parsePrefix, isLoopback, splitList, separateV4V6 } from "./net.ts";

export class CaptureConfigError extends Error {
  override name = "CaptureConfigError";
}

export interface CaptureConfig {
  PROXY_PORT: string;
  INBOUND_CAPTURE_PORT: string;
  INBOUND_TUNNEL_PORT: string;
  PROXY_UID: string;
  PROXY_GID: string;
  INBOUND_INTERCEPTION_MODE: string;
  INBOUND_TPROXY_MARK: string;
  INBOUND_TPROXY_ROUTE_TABLE: string;
  INBOUND_PORTS_INCLUDE: string;
  INBOUND_PORTS_EXCLUDE: string;
  OUTBOUND_OWNER_GROUPS_INCLUDE: string;
  OUTBOUND_OWNER_GROUPS_EXCLUDE: string;
  OUTBOUND_PORTS_INCLUDE: string;
  OUTBOUND_PORTS_EXCLUDE: string;
  OUTBOUND_IPRANGES_INCLUDE: string;
  OUTBOUND_IPRANGES_EXCLUDE: string;
  KUBE_VIRT_INTERFACES: string;
  EXCLUDE_INTERFACES: string;
  IPTABLES_PROBE_PORT: number;
  /** Milliseconds. */
  PROBE_TIMEOUT: number;
  DRY_RUN: boolean;
  SKIP_RULE_APPLY: boolean;
  RUN_VALIDATION: boolean;
  REDIRECT_DNS: boolean;
  DROP_INVALID: boolean;
  CAPTURE_ALL_DNS: boolean;
  ENABLE_INBOUND_IPV6: boolean;
  DNS_SERVERS_V4: string[];
  DNS_SERVERS_V6: string[];
  NETWORK_NAMESPACE: string;
  CNI_MODE: boolean;
  DUAL_STACK: boolean;
  /** Derived from the host; used only by validation (which loopback to probe). */
  HOST_IP: string;
  HOST_IPV4_LOOPBACK_CIDR: string;
  RECONCILE: boolean;
  CLEANUP_ONLY: boolean;
  FORCE_APPLY: boolean;
  NATIVE_NFTABLES: boolean;
  FORCE_IPTABLES_BINARY: string;
  /** Beyond Istio: companion NFLOG rules for identified rules (IPTABLES_TRACE_LOGGING). */
  TRACE_LOGGING: boolean;
}

export function defaultCaptureConfig(): CaptureConfig {
  return {
    PROXY_PORT: "15001",
    INBOUND_CAPTURE_PORT: "15006",
    INBOUND_TUNNEL_PORT: "15008",
    PROXY_UID: "",
    PROXY_GID: "",
    INBOUND_INTERCEPTION_MODE: "",
    INBOUND_TPROXY_MARK: "1337",
    INBOUND_TPROXY_ROUTE_TABLE: "133",
    INBOUND_PORTS_INCLUDE: "",
    INBOUND_PORTS_EXCLUDE: "",
    OUTBOUND_OWNER_GROUPS_INCLUDE: "*",
    OUTBOUND_OWNER_GROUPS_EXCLUDE: "",
    OUTBOUND_PORTS_INCLUDE: "",
    OUTBOUND_PORTS_EXCLUDE: "",
    OUTBOUND_IPRANGES_INCLUDE: "",
    OUTBOUND_IPRANGES_EXCLUDE: "",
    KUBE_VIRT_INTERFACES: "",
    EXCLUDE_INTERFACES: "",
    IPTABLES_PROBE_PORT: 15002,
    PROBE_TIMEOUT: 5000,
    DRY_RUN: false,
    SKIP_RULE_APPLY: false,
    RUN_VALIDATION: false,
    REDIRECT_DNS: false,
    DROP_INVALID: false,
    CAPTURE_ALL_DNS: false,
    ENABLE_INBOUND_IPV6: false,
    DNS_SERVERS_V4: [],
    DNS_SERVERS_V6: [],
    NETWORK_NAMESPACE: "",
    CNI_MODE: false,
    DUAL_STACK: false,
    HOST_IP: "",
    HOST_IPV4_LOOPBACK_CIDR: "127.0.0.1/32",
    RECONCILE: false,
    CLEANUP_ONLY: false,
    FORCE_APPLY: false,
    NATIVE_NFTABLES: false,
    FORCE_IPTABLES_BINARY: "",
    TRACE_LOGGING: false,
  };
}

/** Facts the CLI takes from the machine; tests inject fixed ones. */
export interface CaptureHost {
  /** First non-loopback, non-link-local address (with dualStack: the first IPv6 one if any, else the first). Throws when none. */
  localIP(dualStack: boolean): { ip: string; ipv6: boolean };
  /** DNS servers of /etc/resolv.conf split by family, each canonicalised (Go's netip String()). */
  dnsServers(): { v4: string[]; v6: string[] };
  /** Numeric UID of a user name, or undefined. */
  lookupUid(user: string): string | undefined;
}

/** Values read from env vars that have no flag (Istio's env-only variables). */
export interface EnvOnly {
  ownerGroupsInclude: string;
  ownerGroupsExclude: string;
  loopbackCidr: string;
  envoyUser: string;
}

/** Go's netutil.IPsSplitV4V6 with netip canonicalisation; unparsable entries are skipped. */
export function splitDnsServers(servers: readonly string[]): { v4: string[]; v6: string[] } {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const s of servers) {
    const a = parseAddr(s);
    if (!a) continue;
    const text = canonicalAddr(s)!;
    if (a.family === 4) v4.push(text);
    else if (text.startsWith("::ffff:") && text.includes(".")) v4.push(text.slice(7));
    else v6.push(text);
  }
  return { v4, v6 };
}

/** Istio's FillConfigFromEnvironment with host facts injected. */
export function fillFromEnvironment(cfg: CaptureConfig, envOnly: EnvOnly, host: CaptureHost): CaptureConfig {
  const out = { ...cfg };
  out.OUTBOUND_OWNER_GROUPS_INCLUDE = envOnly.ownerGroupsInclude;
  out.OUTBOUND_OWNER_GROUPS_EXCLUDE = envOnly.ownerGroupsExclude;
  out.HOST_IPV4_LOOPBACK_CIDR = envOnly.loopbackCidr;
  if (out.PROXY_UID === "") out.PROXY_UID = host.lookupUid(envOnly.envoyUser) ?? "1337";
  if (out.PROXY_GID === "") out.PROXY_GID = out.PROXY_UID;
  const local = host.localIP(out.DUAL_STACK);
  out.HOST_IP = local.ip;
  out.ENABLE_INBOUND_IPV6 = local.ipv6;
  if (out.REDIRECT_DNS && !out.CAPTURE_ALL_DNS) {
    const { v4, v6 } = host.dnsServers();
    out.DNS_SERVERS_V4 = v4;
    out.DNS_SERVERS_V6 = v6;
  }
  return out;
}

const NAME_OR_ID = /^(\d+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$/;

/**
 * Validation: Istio's (owner groups, FORCE_IPTABLES_BINARY, loopback CIDR) plus what Istio leaves to
 * iptables-restore to fail on later (ports, CIDRs, mode, UIDs, mark, table). Each message names the
 * flag (and its env var) carrying the bad value.
 */
export function validateCaptureConfig(c: CaptureConfig): void {
  const fail = (flag: string, msg: string): never => {
    throw new CaptureConfigError(`${flag}: ${msg}`);
  };
  for (const [flag, v] of [
    ["--envoy-port", c.PROXY_PORT],
    ["--inbound-capture-port (INBOUND_CAPTURE_PORT)", c.INBOUND_CAPTURE_PORT],
    ["--inbound-tunnel-port (INBOUND_TUNNEL_PORT)", c.INBOUND_TUNNEL_PORT],
  ] as const) {
    if (!isPort(v)) fail(flag, `invalid port "${v}" (want 1-65535)`);
  }
  const portList = (flag: string, v: string, wildcard: boolean) => {
    if (wildcard && v === "*") return;
    for (const p of splitList(v))
      if (!isPortOrRange(p.trim())) fail(flag, `invalid port "${p}" in "${v}" (want a comma list of ports${wildcard ? ' or "*"' : ""})`);
  };
  portList("--istio-inbound-ports (ISTIO_INBOUND_PORTS)", c.INBOUND_PORTS_INCLUDE, true);
  portList("--istio-local-exclude-ports (ISTIO_LOCAL_EXCLUDE_PORTS)", c.INBOUND_PORTS_EXCLUDE, false);
  portList("--istio-outbound-ports (ISTIO_OUTBOUND_PORTS)", c.OUTBOUND_PORTS_INCLUDE, false);
  portList("--istio-local-outbound-ports-exclude (ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE)", c.OUTBOUND_PORTS_EXCLUDE, false);
  const cidrs = (flag: string, v: string) => {
    const r = separateV4V6(v);
    if (r.bad !== undefined)
      fail(flag, `invalid CIDR "${r.bad}" (want a comma list like 10.0.0.0/8,2001:db8::/32${flag.includes("exclude") ? "" : ' or "*"'})`);
    return r;
  };
  cidrs("--istio-service-cidr (ISTIO_SERVICE_CIDR)", c.OUTBOUND_IPRANGES_INCLUDE);
  if (cidrs("--istio-service-exclude-cidr (ISTIO_SERVICE_EXCLUDE_CIDR)", c.OUTBOUND_IPRANGES_EXCLUDE).v4.wildcard) {
    fail("--istio-service-exclude-cidr (ISTIO_SERVICE_EXCLUDE_CIDR)", `"*" is not allowed (invalid value for OUTBOUND_IP_RANGES_EXCLUDE)`);
  }
  const mode = c.INBOUND_INTERCEPTION_MODE;
  if (mode !== "" && mode !== "REDIRECT" && mode !== "TPROXY") {
    fail("--istio-inbound-interception-mode (ISTIO_INBOUND_INTERCEPTION_MODE)", `invalid mode "${mode}" (want REDIRECT or TPROXY)`);
  }
  for (const [flag, v] of [
    ["--proxy-uid (PROXY_UID)", c.PROXY_UID],
    ["--proxy-gid (PROXY_GID)", c.PROXY_GID],
  ] as const) {
    const items = v.split(",");
    if (v === "" || items.some((x) => !NAME_OR_ID.test(x))) fail(flag, `invalid ID list "${v}" (want comma separated numeric IDs or names)`);
  }
  for (const [name, v] of [
    ["ISTIO_OUTBOUND_OWNER_GROUPS", c.OUTBOUND_OWNER_GROUPS_INCLUDE === "*" ? "" : c.OUTBOUND_OWNER_GROUPS_INCLUDE],
    ["ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", c.OUTBOUND_OWNER_GROUPS_EXCLUDE],
  ] as const) {
    // Istio writes "*" in the excluded list as given (`--gid-owner *`): accepted as it does.
    for (const g of splitList(v))
      if (!NAME_OR_ID.test(g) && !(g === "*" && name.endsWith("_EXCLUDE"))) fail(name, `invalid group "${g}" (want a group name or numeric GID)`);
  }
  if (c.OUTBOUND_OWNER_GROUPS_INCLUDE !== "*" && splitList(c.OUTBOUND_OWNER_GROUPS_INCLUDE).length > 64) {
    const n = splitList(c.OUTBOUND_OWNER_GROUPS_INCLUDE).length;
    fail("ISTIO_OUTBOUND_OWNER_GROUPS", `number of owner groups whose outgoing traffic should be redirected to Envoy cannot exceed 64, got ${n}`);
  }
  const u32 = (flag: string, v: string, min: number) => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > 0xffffffff) fail(flag, `invalid value "${v}" (want an integer ${min}-4294967295)`);
  };
  u32("--istio-inbound-tproxy-mark (ISTIO_INBOUND_TPROXY_MARK)", c.INBOUND_TPROXY_MARK, 1);
  u32("--istio-inbound-tproxy-route-table (ISTIO_INBOUND_TPROXY_ROUTE_TABLE)", c.INBOUND_TPROXY_ROUTE_TABLE, 1);
  for (const [flag, v] of [
    ["--istio-exclude-interfaces (ISTIO_EXCLUDE_INTERFACES)", c.EXCLUDE_INTERFACES],
    ["--kube-virt-interfaces (KUBE_VIRT_INTERFACES)", c.KUBE_VIRT_INTERFACES],
  ] as const) {
    for (const i of splitList(v)) if (!/^[^\s/:]{1,15}$/.test(i)) fail(flag, `invalid interface name "${i}"`);
  }
  if (!["", "legacy", "nft"].includes(c.FORCE_IPTABLES_BINARY)) {
    fail("--force-iptables-binary (FORCE_IPTABLES_BINARY)", `invalid FORCE_IPTABLES_BINARY value "${c.FORCE_IPTABLES_BINARY}" (want legacy or nft)`);
  }
  const lb = parsePrefix(c.HOST_IPV4_LOOPBACK_CIDR);
  if (!lb) fail("ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR", `failed to parse CIDR ${c.HOST_IPV4_LOOPBACK_CIDR}`);
  if (lb!.addr.family !== 4 || !isLoopback(lb!.addr))
    fail("ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR", `expected valid IPv4 loopback address in CIDR ${c.HOST_IPV4_LOOPBACK_CIDR}`);
  if (lb!.bits < 8) fail("ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR", `expected CIDR ${c.HOST_IPV4_LOOPBACK_CIDR} to have mask in range [8, 32]; found ${lb!.bits}`);
}
