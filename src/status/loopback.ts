// Who may call what, and which loopback address to use. Istio's rules (status/server.go):
// mutating and debug endpoints answer loopback clients only; the Envoy admin API and the probe
// source address follow the pod's IP family.

import { isIPv4, isIPv6 } from "node:net";

/** The 403 body for a non-loopback client of a loopback-only route (Istio's words). */
export const LOCALHOST_ONLY = "Only requests from localhost are allowed";

/** 127.0.0.0/8, ::1 and IPv4-mapped loopback (::ffff:127.x.y.z), as Go's net.IP.IsLoopback. */
export function isLoopback(address: string | undefined | null): boolean {
  if (!address) return false;
  let a = address.trim().toLowerCase();
  if (a.startsWith("[") && a.endsWith("]")) a = a.slice(1, -1);
  const zone = a.indexOf("%");
  if (zone >= 0) a = a.slice(0, zone);
  if (a.startsWith("::ffff:") && isIPv4(a.slice(7))) a = a.slice(7);
  if (isIPv4(a)) return a.startsWith("127.");
  if (!isIPv6(a)) return false;
  return expandIPv6(a) === "0000:0000:0000:0000:0000:0000:0000:0001";
}

function expandIPv6(a: string): string {
  const [head, tail] = a.includes("::") ? a.split("::") : [a, undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const fill = tail === undefined ? [] : Array(8 - h.length - t.length).fill("0");
  return [...h, ...fill, ...t].map((p) => p.padStart(4, "0")).join(":");
}

function isLinkLocalV6(a: string): boolean {
  return /^fe[89ab][0-9a-f]:/i.test(expandIPv6(a.split("%")[0]!));
}

/**
 * Istio's choice of "localhost" for the Envoy admin API and the probe source address: IPv6 when
 * the proxy is IPv6-only, or when INSTANCE_IP is a non-link-local IPv6 address; IPv4 otherwise.
 */
export function useIPv6Loopback(ipv6Only: boolean, instanceIP: string): boolean {
  if (ipv6Only) return true;
  return isIPv6(instanceIP) && !isIPv4MappedOrLinkLocal(instanceIP);
}

function isIPv4MappedOrLinkLocal(a: string): boolean {
  return a.toLowerCase().startsWith("::ffff:") || isLinkLocalV6(a);
}

export function adminLocalhost(ipv6: boolean): string {
  return ipv6 ? "::1" : "127.0.0.1";
}

/** Source address of app probes: iptables lets 127.0.0.6 (::6) bypass the inbound capture. */
export function probeSourceAddress(ipv6: boolean): string {
  return ipv6 ? "::6" : "127.0.0.6";
}

/** host:port with IPv6 literals bracketed. */
export function joinHostPort(host: string, port: number | string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
}
