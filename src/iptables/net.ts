// Addresses, prefixes, ports and comma lists with the semantics istio-iptables relies on: Go's
// netip parsing (strict dotted quads, RFC 4291 IPv6) and its canonical String() form, which ends
// up verbatim in the rules (`-d 2001:db8::/32`, DNS servers from resolv.conf).

import { formatAddr } from "../lib/ipformat.ts";

export { formatAddr };

export interface ParsedAddr {
  family: 4 | 6;
  /** 4 or 16 bytes. */
  bytes: Uint8Array;
}

export interface ParsedPrefix {
  addr: ParsedAddr;
  bits: number;
  /** Go's netip.Prefix.String(): the address as given (not masked) in canonical form, then /bits. */
  text: string;
}

/** Go's config.Split: comma separated, empty items dropped. */
export function splitList(s: string): string[] {
  if (s === "") return [];
  return s.split(",").filter((x) => x !== "");
}

function parseV4(s: string): Uint8Array | undefined {
  const parts = s.split(".");
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^\d{1,3}$/.test(p) || (p.length > 1 && p.startsWith("0"))) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

function parseV6(s: string): Uint8Array | undefined {
  if (s.includes("%")) return undefined; // zones are not valid in prefixes or rules
  let head = s;
  let tailV4: Uint8Array | undefined;
  const lastColon = s.lastIndexOf(":");
  if (lastColon >= 0 && s.slice(lastColon + 1).includes(".")) {
    tailV4 = parseV4(s.slice(lastColon + 1));
    if (!tailV4) return undefined;
    head = s.slice(0, lastColon + 1) + "0:0"; // placeholder groups, replaced below
  }
  const dbl = head.indexOf("::");
  if (dbl !== head.lastIndexOf("::")) return undefined;
  const parseGroups = (t: string): number[] | undefined => {
    if (t === "") return [];
    const gs = t.split(":");
    const out: number[] = [];
    for (const g of gs) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  let groups: number[];
  if (dbl >= 0) {
    const left = parseGroups(head.slice(0, dbl));
    const right = parseGroups(head.slice(dbl + 2));
    if (!left || !right || left.length + right.length > 7) return undefined;
    groups = [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  } else {
    const all = parseGroups(head);
    if (!all || all.length !== 8) return undefined;
    groups = all;
  }
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  if (tailV4) out.set(tailV4, 12);
  return out;
}

/** Go's netip.ParseAddr (without zones). */
export function parseAddr(s: string): ParsedAddr | undefined {
  if (s.includes(":")) {
    const b = parseV6(s);
    return b ? { family: 6, bytes: b } : undefined;
  }
  const b = parseV4(s);
  return b ? { family: 4, bytes: b } : undefined;
}

/** Canonical text of an address, or undefined when it does not parse. */
export function canonicalAddr(s: string): string | undefined {
  const a = parseAddr(s);
  return a ? formatAddr(a) : undefined;
}

/** Go's netip.ParsePrefix. */
export function parsePrefix(s: string): ParsedPrefix | undefined {
  const slash = s.lastIndexOf("/");
  if (slash < 0) return undefined;
  const addr = parseAddr(s.slice(0, slash));
  const bitsText = s.slice(slash + 1);
  if (!addr || !/^\d{1,3}$/.test(bitsText) || (bitsText.length > 1 && bitsText.startsWith("0"))) return undefined;
  const bits = Number(bitsText);
  if (bits > (addr.family === 4 ? 32 : 128)) return undefined;
  return { addr, bits, text: `${formatAddr(addr)}/${bits}` };
}

/** Go's Addr.IsLoopback: 127/8 or ::1. */
export function isLoopback(a: ParsedAddr): boolean {
  if (a.family === 4) return a.bytes[0] === 127;
  return a.bytes.slice(0, 15).every((x) => x === 0) && a.bytes[15] === 1;
}

/** Link-local unicast or multicast (169.254/16, 224.0.0/24, fe80::/10, ff02::/16). */
export function isLinkLocal(a: ParsedAddr): boolean {
  const b = a.bytes;
  if (a.family === 4) return (b[0] === 169 && b[1] === 254) || (b[0] === 224 && b[1] === 0 && b[2] === 0);
  return (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) || (b[0] === 0xff && (b[1]! & 0x0f) === 0x02);
}

export interface NetworkRange {
  wildcard: boolean;
  cidrs: string[];
  hasLoopback: boolean;
}

/** Go's config.SeparateV4V6: `*` is a wildcard for both families; otherwise split by family. */
export function separateV4V6(list: string): { v4: NetworkRange; v6: NetworkRange; bad?: string } {
  if (list === "*") return { v4: { wildcard: true, cidrs: [], hasLoopback: false }, v6: { wildcard: true, cidrs: [], hasLoopback: false } };
  const v4: NetworkRange = { wildcard: false, cidrs: [], hasLoopback: false };
  const v6: NetworkRange = { wildcard: false, cidrs: [], hasLoopback: false };
  for (const item of splitList(list)) {
    const p = parsePrefix(item);
    if (!p) return { v4, v6, bad: item };
    const r = p.addr.family === 4 ? v4 : v6;
    r.cidrs.push(p.text);
    if (isLoopback(p.addr)) r.hasLoopback = true;
  }
  return { v4, v6 };
}

/** A TCP/UDP port number, 1-65535 (0 is accepted only when `allowZero`). */
export function isPort(s: string, allowZero = false): boolean {
  if (!/^\d{1,5}$/.test(s)) return false;
  const n = Number(s);
  return n <= 65535 && (allowZero || n >= 1);
}

/** A port or an iptables port range `lo:hi`. */
export function isPortOrRange(s: string): boolean {
  const m = /^(\d+):(\d+)$/.exec(s);
  if (m) return isPort(m[1]!, true) && isPort(m[2]!) && Number(m[1]) <= Number(m[2]);
  return isPort(s);
}
