// Go's netip.Addr.String() for an address's bytes: the text Istio prints and compares, shared by
// the capture (src/iptables) and the host's addresses (src/config/hostaddrs.ts).

/** An IPv4 (4 bytes) or IPv6 (16 bytes) address, network order. */
export interface AddrBytes {
  family: 4 | 6;
  bytes: Uint8Array;
}

/** Go's netip.Addr.String(): dotted quad, or RFC 5952 with `::ffff:a.b.c.d` for IPv4-mapped. */
export function formatAddr(a: AddrBytes): string {
  const b = a.bytes;
  if (a.family === 4) return Array.from(b).join(".");
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push((b[i * 2]! << 8) | b[i * 2 + 1]!);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `::ffff:${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  }
  // Longest run of >= 2 zero groups, leftmost on ties.
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}
