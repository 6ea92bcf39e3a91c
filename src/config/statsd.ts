import { errorMessage } from "../lib/errors.ts";
// statsdUdpAddress resolved to an IP before the bootstrap is rendered, as pilot-agent's
// ConstructProxyConfig does (network.ResolveAddr): Envoy's statsd sink takes a socket address, and a
// host name there is rejected. The first IPv4 address wins, else the last address returned; on
// failure the sink is turned off with a warning naming the input (Istio clears the address too).
// Lookups are injected so the caller decides the resolver and tests can fake it.

export interface ResolvedIp {
  address: string;
  family: number;
}

/** All addresses of a host, in the resolver's order (node:dns lookup with `all: true`). */
export type IpLookup = (host: string, signal: AbortSignal) => Promise<ResolvedIp[]>;

/** Istio waits at most 15 s for the lookup. */
export const RESOLVE_TIMEOUT_MS = 15_000;

export type ResolveOutcome = { ok: true; address: string } | { ok: false; error: string };

/** Split `host:port` / `[v6]:port` like Go's net.SplitHostPort. */
export function splitHostPort(addr: string): { host: string; port: string } {
  if (addr.startsWith("[")) {
    const end = addr.indexOf("]");
    if (end < 0) throw new Error(`address ${addr}: missing ']' in address`);
    if (addr[end + 1] !== ":") throw new Error(`address ${addr}: missing port in address`);
    return { host: addr.slice(1, end), port: addr.slice(end + 2) };
  }
  const i = addr.lastIndexOf(":");
  if (i < 0) throw new Error(`address ${addr}: missing port in address`);
  if (addr.indexOf(":") !== i) throw new Error(`address ${addr}: too many colons in address`);
  return { host: addr.slice(0, i), port: addr.slice(i + 1) };
}

/** `ip:port`, IPv6 in brackets; IPv4-mapped IPv6 unwrapped (netip.AddrPort.String of Unmap()). */
function formatAddrPort(ip: ResolvedIp, port: number): { text: string; v4: boolean } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip.address);
  if (ip.family === 4 || mapped) return { text: `${mapped ? mapped[1] : ip.address}:${port}`, v4: true };
  return { text: `[${ip.address}]:${port}`, v4: false };
}

/** Resolve `host:port` to `ip:port` (first IPv4, else the last address), or say why not. */
export async function resolveAddr(addr: string, lookup: IpLookup, timeoutMs = RESOLVE_TIMEOUT_MS): Promise<ResolveOutcome> {
  let hp: { host: string; port: string };
  try {
    hp = splitHostPort(addr);
  } catch (e) {
    return { ok: false, error: errorMessage(e) };
  }
  const port = /^\d{1,5}$/.test(hp.port) ? Number(hp.port) : NaN;
  if (!(port >= 0 && port <= 65535)) return { ok: false, error: `address ${addr}: invalid port ${JSON.stringify(hp.port)}` };
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  let ips: ResolvedIp[];
  try {
    ips = await Promise.race([
      lookup(hp.host, ac.signal),
      new Promise<never>((_, reject) => ac.signal.addEventListener("abort", () => reject(new Error(`no answer within ${timeoutMs / 1000}s`)), { once: true })),
    ]);
  } catch (e) {
    return { ok: false, error: `lookup failed for IP address: lookup ${hp.host}: ${errorMessage(e)}` };
  } finally {
    clearTimeout(timer);
  }
  if (ips.length === 0) return { ok: false, error: `lookup failed for IP address: lookup ${hp.host}: no addresses` };
  let chosen = "";
  for (const ip of ips) {
    const f = formatAddrPort(ip, port);
    chosen = f.text;
    if (f.v4) break;
  }
  return { ok: true, address: chosen };
}

export interface StatsdResolution {
  /** The address to render, undefined when the sink is off. */
  address: string | undefined;
  /** One log line: info when resolved, warning when the sink was turned off. */
  line: { level: "info" | "warn"; text: string };
}

/** Istio's step: resolve statsdUdpAddress, or turn the sink off naming the input. */
export async function resolveStatsdAddress(addr: string, lookup: IpLookup, timeoutMs = RESOLVE_TIMEOUT_MS): Promise<StatsdResolution> {
  const r = await resolveAddr(addr, lookup, timeoutMs);
  if (r.ok) return { address: r.address, line: { level: "info", text: `statsdUdpAddress ${addr} resolved to ${r.address}` } };
  return {
    address: undefined,
    line: { level: "warn", text: `resolve StatsdUdpAddress failed: statsdUdpAddress ${JSON.stringify(addr)}: ${r.error}; the statsd sink is off` },
  };
}
