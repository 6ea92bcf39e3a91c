// resolv.conf reading and the listen plan, as Istio's NewLocalDNSServer decides them (pure):
// `nameserver` lines give the upstreams (port 53), `search`/`domain` the search list; an address
// ending in `:53` means "replace the system resolver": as root the proxy answers upstream even
// before the first table and prefers /var/lib/istio/resolv.conf; otherwise it falls back to
// localhost:15053. `localhost` binds 127.0.0.1 and/or ::1 by the families of the nameservers.

import { DnsError } from "./errors.ts";
import { parseIp } from "./ip.ts";

export const DEFAULT_DNS_PROXY_ADDR = "localhost:15053";
export const SYSTEM_RESOLV_CONF = "/etc/resolv.conf";
export const ALTERNATE_RESOLV_CONF = "/var/lib/istio/resolv.conf";

export interface ResolvConf {
  /** `nameserver` values in file order (as written). */
  servers: string[];
  search: string[];
}

/** Parse like miekg/dns ClientConfigFromReader: comments `#`/`;`, last `search`/`domain` wins. */
export function parseResolvConf(text: string): ResolvConf {
  const servers: string[] = [];
  let search: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const f = line.split(/\s+/);
    switch (f[0]) {
      case "nameserver":
        if (f.length > 1) servers.push(f[1]!);
        break;
      case "domain":
        search = f.length > 1 ? [f[1]!] : [];
        break;
      case "search":
        search = f.slice(1);
        break;
    }
  }
  return { servers, search };
}

export interface HostPort {
  host: string;
  port: number;
}

/** Go net.SplitHostPort: `host:port`, `[v6]:port`, `:port`. */
export function splitHostPort(addr: string): HostPort {
  const bad = () => new DnsError("config", `DNS_PROXY_ADDR "${addr}": dns address must be a valid host:port`);
  let host: string;
  let portText: string;
  if (addr.startsWith("[")) {
    const end = addr.indexOf("]");
    if (end < 0 || addr[end + 1] !== ":") throw bad();
    host = addr.slice(1, end);
    portText = addr.slice(end + 2);
  } else {
    const i = addr.lastIndexOf(":");
    if (i < 0) throw bad();
    host = addr.slice(0, i);
    portText = addr.slice(i + 1);
    if (host.includes(":")) throw bad();
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) throw bad();
  return { host, port: Number(portText) };
}

export function joinHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

export interface DnsPlanInput {
  /** DNS_PROXY_ADDR ("" means the default). */
  addr: string;
  uid: number;
  /** Whether /var/lib/istio/resolv.conf exists. */
  alternateResolvConfExists: boolean;
  /** An explicit resolv.conf path (tests); overrides the system/alternate choice. */
  resolvConfPath?: string;
}

export interface DnsPlan {
  addr: string;
  resolvConfPath: string;
  /** Forward queries while no table has arrived yet (`:53` as root), instead of SERVFAIL. */
  respondBeforeSync: boolean;
  /** A problem to log (Istio logs it at error level and continues). */
  warning?: string;
}

export function planDns(input: DnsPlanInput): DnsPlan {
  let addr = input.addr || DEFAULT_DNS_PROXY_ADDR;
  let resolvConfPath = SYSTEM_RESOLV_CONF;
  let respondBeforeSync = false;
  let warning: string | undefined;
  if (addr.endsWith(":53")) {
    if (input.uid === 0) {
      respondBeforeSync = true;
      if (input.alternateResolvConfExists) resolvConfPath = ALTERNATE_RESOLV_CONF;
    } else {
      warning = `DNS address ${addr} needs root; listening on ${DEFAULT_DNS_PROXY_ADDR} instead`;
      addr = DEFAULT_DNS_PROXY_ADDR;
    }
  }
  return { addr, resolvConfPath: input.resolvConfPath ?? resolvConfPath, respondBeforeSync, warning };
}

/** The addresses to bind (each with UDP and TCP). */
export function bindAddresses(addr: string, servers: readonly string[]): HostPort[] {
  const hp = splitHostPort(addr);
  // Go's ":53" listens on every interface; we bind the IPv4 wildcard.
  if (hp.host === "") return [{ host: "0.0.0.0", port: hp.port }];
  if (hp.host !== "localhost") return [hp];
  let v4 = false;
  let v6 = false;
  for (const s of servers) {
    const ip = parseIp(s);
    if (ip?.family === 4) v4 = true;
    if (ip?.family === 6) v6 = true;
  }
  if (!v4 && !v6) return [hp];
  const out: HostPort[] = [];
  if (v4) out.push({ host: "127.0.0.1", port: hp.port });
  if (v6) out.push({ host: "::1", port: hp.port });
  return out;
}

/** Upstream resolvers: every nameserver that is an IP address, at `port` (53 unless injected). */
export function upstreamServers(servers: readonly string[], port = 53): { upstreams: HostPort[]; ignored: string[] } {
  const upstreams: HostPort[] = [];
  const ignored: string[] = [];
  for (const s of servers) {
    if (parseIp(s)) upstreams.push({ host: s, port });
    else ignored.push(s);
  }
  return { upstreams, ignored };
}
