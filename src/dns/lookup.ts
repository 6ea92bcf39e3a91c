// The lookup table the DNS proxy answers from, built once per NameTable (pure). Each name maps to
// its A and AAAA record data and, for search-domain expansions (`<name>.<search[0]>.`), a CNAME to
// the name, so a resolver walking its search list gets the answer on its first query.
//
// Istio semantics kept: a name present in the table is answered authoritatively even when it has
// no record of the asked family (NOERROR, empty); wildcard entries `*.<parent>` match any name
// below the parent, closest parent first; only A and AAAA are answered locally, other types are
// forwarded. One deliberate difference from Istio's legacy table: a search-expanded CNAME never
// shadows a real name sent by istiod (Istio's newer name index does the same).

import type { HostEntry } from "./althosts.ts";
import { encodeName } from "./names.ts";

export const TYPE_A = 1;
export const TYPE_AAAA = 28;
export const TYPE_CNAME = 5;

export interface NameRecord {
  /** 4-byte record data of each A record. */
  a: Uint8Array[];
  /** 16-byte record data of each AAAA record. */
  aaaa: Uint8Array[];
  /** Search-expansion alias: lower-case target with trailing dot, and its wire form. */
  cname?: string;
  cnameWire?: Uint8Array;
}

export interface LookupResult {
  /** A CNAME from the question to this name precedes the addresses. */
  cname?: string;
  cnameWire?: Uint8Array;
  /** Record data; owner is the CNAME target when `cname` is set, else the question name. */
  addresses: Uint8Array[];
}

export class LookupTable {
  constructor(readonly records: ReadonlyMap<string, NameRecord>) {}

  get size(): number {
    return this.records.size;
  }

  /**
   * `name` is lower case with a trailing dot. Returns undefined when the proxy does not own the
   * answer (name unknown, or a type other than A/AAAA): the query goes upstream.
   */
  lookup(qtype: number, name: string): LookupResult | undefined {
    if (qtype !== TYPE_A && qtype !== TYPE_AAAA) return undefined;
    let rec = this.records.get(name);
    if (!rec) {
      let dot = name.indexOf(".");
      while (dot >= 0 && dot < name.length - 1) {
        rec = this.records.get("*" + name.slice(dot));
        if (rec) break;
        dot = name.indexOf(".", dot + 1);
      }
      if (!rec) return undefined;
    }
    let target: NameRecord | undefined = rec;
    const cname = rec.cname;
    if (cname !== undefined) target = this.records.get(cname);
    const addresses = target ? (qtype === TYPE_A ? target.a : target.aaaa) : [];
    // Istio answers the CNAME only together with addresses; otherwise NOERROR with nothing.
    if (addresses.length === 0) return { addresses: [] };
    return cname !== undefined ? { cname, cnameWire: rec.cnameWire, addresses } : { addresses };
  }
}

/** Build the table from the entries' names and the first resolv.conf search domain. */
export function buildLookupTable(entries: readonly HostEntry[], search: readonly string[]): LookupTable {
  const records = new Map<string, NameRecord>();
  const aliases = new Map<string, string>();
  const search0 = search[0];
  for (const e of entries) {
    const a = e.v4.map((ip) => ip.bytes);
    const aaaa = e.v6.map((ip) => ip.bytes);
    const lowerNames = new Set([...e.names].map((n) => n.toLowerCase()));
    for (const h of lowerNames) {
      let rec = records.get(h);
      if (!rec) records.set(h, (rec = { a: [], aaaa: [] }));
      if (a.length > 0) rec.a = a;
      if (aaaa.length > 0) rec.aaaa = aaaa;
      if (search0 && !h.endsWith(search0 + ".")) {
        let expanded = (h + search0).toLowerCase();
        if (!search0.endsWith(".")) expanded += ".";
        if (!lowerNames.has(expanded)) aliases.set(expanded, h);
      }
    }
  }
  for (const [alias, target] of aliases) {
    const wire = encodeName(target);
    if (records.has(alias) || !wire) continue;
    records.set(alias, { a: [], aaaa: [], cname: target, cnameWire: wire });
  }
  return new LookupTable(records);
}
