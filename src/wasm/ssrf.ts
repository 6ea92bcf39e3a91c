// Where a Wasm module may be fetched from (Istio's pkg/wasm/ssrf.go and pkg/security/dial.go):
// every address a module URL's host resolves to — on the first request and on every redirect hop
// — is refused when it is link-local (169.254.0.0/16, fe80::/10, which holds cloud metadata
// endpoints), a known cloud metadata address outside that range (Alibaba's 100.100.100.200, AWS's
// fd00:ec2::/32), or inside one of the operator's BLOCKED_CIDRS_IN_WASM_FETCH ranges.

import { BlockList, isIP } from "node:net";
import { errorMessage } from "../lib/errors.ts";

export class BlockedAddressError extends Error {
  override name = "BlockedAddressError";
}

export class CidrListError extends Error {
  override name = "CidrListError";
}

export type Lookup = (host: string) => Promise<{ address: string; family: number }[]>;

interface Cidr {
  text: string;
  list: BlockList;
}

function cidr(text: string): Cidr {
  const slash = text.indexOf("/");
  if (slash < 0) throw new CidrListError(`BLOCKED_CIDRS_IN_WASM_FETCH: "${text}" is not a CIDR (want e.g. 10.0.0.0/8)`);
  const addr = text.slice(0, slash);
  const bitsText = text.slice(slash + 1);
  const family = isIP(addr);
  const bits = /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : NaN;
  if (family === 0 || !(bits >= 0 && bits <= (family === 4 ? 32 : 128)))
    throw new CidrListError(`BLOCKED_CIDRS_IN_WASM_FETCH: "${text}" is not a CIDR (want e.g. 10.0.0.0/8)`);
  const list = new BlockList();
  list.addSubnet(addr, bits, family === 4 ? "ipv4" : "ipv6");
  return { text, list };
}

/**
 * Parse the comma-separated BLOCKED_CIDRS_IN_WASM_FETCH value as Istio does: empty entries are
 * ignored, an entry that is not a CIDR is skipped (and reported) and the rest still apply.
 */
export function parseBlockedCidrs(value: string): { cidrs: string[]; problems: string[] } {
  const cidrs: string[] = [];
  const problems: string[] = [];
  for (const raw of value.split(",")) {
    const t = raw.trim();
    if (!t) continue;
    try {
      cidr(t);
      cidrs.push(t);
    } catch (e) {
      problems.push(errorMessage(e));
    }
  }
  return { cidrs, problems };
}

const ALWAYS = [
  { c: cidr("169.254.0.0/16"), why: "is link-local" },
  { c: cidr("fe80::/10"), why: "is link-local" },
  { c: cidr("224.0.0.0/24"), why: "is link-local" },
  { c: cidr("ff02::/16"), why: "is link-local" },
  { c: cidr("100.100.100.200/32"), why: "is a known cloud metadata address" },
  { c: cidr("fd00:ec2::/32"), why: "is a known cloud metadata address" },
];

/** One BlockList holding every CIDR of `cidrs` (IPv4 and IPv6 alike); for fixed lists in the code. */
export function rangeList(cidrs: readonly string[]): BlockList {
  const l = new BlockList();
  for (const c of cidrs) {
    const [addr, bits] = c.split("/") as [string, string];
    l.addSubnet(addr, Number(bits), isIP(addr) === 6 ? "ipv6" : "ipv4");
  }
  return l;
}

function contains(c: Cidr, ip: string): boolean {
  const family = isIP(ip) === 6 ? "ipv6" : "ipv4";
  return c.list.check(ip, family);
}

/** IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry. */
function unmap(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return m ? m[1]! : ip;
}

export class AddressGuard {
  private readonly blocked: Cidr[];

  constructor(
    blockedCidrs: readonly string[],
    private readonly lookup: Lookup,
  ) {
    this.blocked = blockedCidrs.map(cidr);
  }

  /** Why `ip` is refused, or undefined when it may be dialled. */
  reason(ipText: string): string | undefined {
    const ip = unmap(ipText);
    for (const a of ALWAYS) if (contains(a.c, ip)) return `connection blocked: resolved IP ${ip} ${a.why}`;
    for (const c of this.blocked) if (contains(c, ip)) return `connection blocked: resolved IP ${ip} is in blocked CIDR range ${c.text}`;
    return undefined;
  }

  /** Resolve `host` and return the first address, refusing the host if any address is blocked. */
  async resolve(host: string): Promise<string> {
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    const addrs = isIP(bare) ? [{ address: bare, family: isIP(bare) }] : await this.lookup(bare);
    if (addrs.length === 0) throw new BlockedAddressError(`${host} resolves to no address`);
    for (const a of addrs) {
      const r = this.reason(a.address);
      if (r) throw new BlockedAddressError(`${r} (host ${host})`);
    }
    return addrs[0]!.address;
  }
}
