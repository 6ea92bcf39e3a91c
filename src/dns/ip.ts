// IP address parsing and formatting with Go netip semantics: strict dotted quads (no leading
// zeros), IPv6 with `::` and an embedded IPv4 tail, an optional zone (dropped), and RFC 5952
// canonical text for IPv6. IPv4-mapped IPv6 addresses stay IPv6, as netip.Addr.Is6 says.

import { formatAddr } from "../lib/ipformat.ts";

export interface ParsedIp {
  family: 4 | 6;
  bytes: Uint8Array;
}

export function parseIp(text: string): ParsedIp | undefined {
  const v4 = parseIpv4(text);
  if (v4) return { family: 4, bytes: v4 };
  const v6 = parseIpv6(text);
  return v6 ? { family: 6, bytes: v6 } : undefined;
}

function parseIpv4(s: string): Uint8Array | undefined {
  const parts = s.split(".");
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^\d{1,3}$/.test(p) || (p.length > 1 && p[0] === "0")) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

function parseIpv6(input: string): Uint8Array | undefined {
  let s = input;
  const pct = s.indexOf("%");
  if (pct >= 0) {
    if (pct === s.length - 1) return undefined;
    s = s.slice(0, pct);
  }
  if (!s.includes(":")) return undefined;
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string): number[] | undefined => {
    if (part === "") return [];
    const out: number[] = [];
    const items = part.split(":");
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      if (i === items.length - 1 && it.includes(".")) {
        const v4 = parseIpv4(it);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(it)) return undefined;
        out.push(parseInt(it, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  const total = head.length + tail.length;
  if (halves.length === 1 ? total !== 8 : total > 7) return undefined;
  const all = [...head, ...new Array(8 - total).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (longest zero run of >= 2 groups as `::`, mapped v4 as `::ffff:a.b.c.d`). */
export const formatIp: (ip: ParsedIp) => string = formatAddr;

/** Split textual IPs into IPv4 and IPv6 (unparsable ones are skipped), as Istio's ParseIPsSplitToV4V6. */
export function splitIps(ips: readonly string[]): { v4: ParsedIp[]; v6: ParsedIp[]; invalid: string[] } {
  const v4: ParsedIp[] = [];
  const v6: ParsedIp[] = [];
  const invalid: string[] = [];
  for (const text of ips) {
    const ip = parseIp(text);
    if (!ip) invalid.push(text);
    else if (ip.family === 4) v4.push(ip);
    else v6.push(ip);
  }
  return { v4, v6, invalid };
}
