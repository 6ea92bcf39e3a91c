// The nftables rule builder and the text of the one transaction (`nft -f -` input) that
// `agent iptables --native-nftables` applies: Istio's three inet tables, each added, flushed and
// refilled in the same transaction. Pure: no I/O.

import { TRACE_NFLOG_GROUP } from "./builder.ts";

export const NFT_FAMILY = "inet";
export const NAT_TABLE = "istio-proxy-nat";
export const MANGLE_TABLE = "istio-proxy-mangle";
export const RAW_TABLE = "istio-proxy-raw";

/** Our tables, in the order they appear in a transaction. Nothing else is ever touched. */
export const NFT_TABLES: readonly string[] = [NAT_TABLE, MANGLE_TABLE, RAW_TABLE];

export interface NftChainSpec {
  name: string;
  /** `{ type … hook … priority … ; }` for a base chain; absent for a regular chain. */
  base?: { type: string; hook: string; priority: number };
}

const base = (name: string, type: string, hook: string, priority: number): NftChainSpec => ({ name, base: { type, hook, priority } });

/** Each table's chains in the fixed order a transaction declares them (dstnat -100, mangle -150, raw -300). */
export const NFT_CHAINS: Readonly<Record<string, readonly NftChainSpec[]>> = {
  [NAT_TABLE]: [
    base("prerouting", "nat", "prerouting", -100),
    base("output", "nat", "output", -100),
    { name: "istio-inbound" },
    { name: "istio-redirect" },
    { name: "istio-in-redirect" },
    { name: "istio-output" },
    { name: "istio-output-dns" },
  ],
  [MANGLE_TABLE]: [
    base("prerouting", "filter", "prerouting", -150),
    base("output", "route", "output", -150),
    { name: "istio-divert" },
    { name: "istio-tproxy" },
    { name: "istio-inbound" },
    { name: "istio-drop" },
  ],
  [RAW_TABLE]: [
    base("prerouting", "filter", "prerouting", -300),
    base("output", "filter", "output", -300),
    { name: "istio-inbound" },
    { name: "istio-output-dns" },
  ],
};

export interface NftRule {
  table: string;
  chain: string;
  /** The rule's tokens joined with single spaces. */
  text: string;
  /** Insert before the rule at this index; absent for an append. */
  index?: number;
}

/** `add chain` text of a chain spec. */
export function chainDecl(table: string, c: NftChainSpec): string {
  const b = c.base ? ` { type ${c.base.type} hook ${c.base.hook} priority ${c.base.priority} ; }` : "";
  return `add chain ${NFT_FAMILY} ${table} ${c.name}${b}`;
}

export class NftRuleBuilder {
  private readonly byTable = new Map<string, NftRule[]>();

  /**
   * @param enableIPv6 the `…V6RuleIfSupported` calls store nothing when false.
   * @param traceLogging a rule given a trace identifier gets a companion `log group` rule in front.
   */
  constructor(
    readonly enableIPv6: boolean,
    readonly traceLogging = false,
  ) {}

  private list(table: string): NftRule[] {
    let l = this.byTable.get(table);
    if (!l) this.byTable.set(table, (l = []));
    return l;
  }

  /**
   * The companion of a traced rule: its matches (the tokens before `counter`), then an NFLOG
   * `log` statement with the identifier as prefix. Undefined when the rule has no `counter`.
   */
  private companion(tokens: readonly string[], trace: string): string | undefined {
    const i = tokens.indexOf("counter");
    if (i < 0) return undefined;
    return [...tokens.slice(0, i), "log", "prefix", JSON.stringify(trace), "group", String(TRACE_NFLOG_GROUP), "snaplen", "20"].join(" ");
  }

  append(chain: string, table: string, tokens: readonly string[], trace?: string): this {
    const l = this.list(table);
    const c = trace && this.traceLogging ? this.companion(tokens, trace) : undefined;
    if (c !== undefined) l.push({ table, chain, text: c });
    l.push({ table, chain, text: tokens.join(" ") });
    return this;
  }

  insert(chain: string, table: string, index: number, tokens: readonly string[], trace?: string): this {
    const l = this.list(table);
    l.push({ table, chain, text: tokens.join(" "), index });
    // Inserted at the same index after the rule, the companion ends up in front of it.
    const c = trace && this.traceLogging ? this.companion(tokens, trace) : undefined;
    if (c !== undefined) l.push({ table, chain, text: c, index });
    return this;
  }

  appendV6(chain: string, table: string, tokens: readonly string[], trace?: string): this {
    return this.enableIPv6 ? this.append(chain, table, tokens, trace) : this;
  }

  insertV6(chain: string, table: string, index: number, tokens: readonly string[], trace?: string): this {
    return this.enableIPv6 ? this.insert(chain, table, index, tokens, trace) : this;
  }

  rules(table: string): readonly NftRule[] {
    return this.byTable.get(table) ?? [];
  }

  tables(): string[] {
    return [...this.byTable.keys()];
  }
}

/**
 * The `add rule` / `insert rule` lines of a table's rules in order. nft cannot insert into an
 * empty chain or at an index at or past its end, so such an insert becomes an append; either way
 * the chain's count grows by one.
 */
export function ruleLines(table: string, rules: readonly NftRule[]): string[] {
  const count = new Map<string, number>();
  const out: string[] = [];
  for (const r of rules) {
    const n = count.get(r.chain) ?? 0;
    if (r.index !== undefined && n > 0 && r.index < n) out.push(`insert rule ${NFT_FAMILY} ${table} ${r.chain} index ${r.index} ${r.text}`);
    else out.push(`add rule ${NFT_FAMILY} ${table} ${r.chain} ${r.text}`);
    count.set(r.chain, n + 1);
  }
  return out;
}

/** The lines of one of our tables: add, flush, the used chains in fixed order, the rules. Empty when it has no rules. */
export function tableLines(table: string, rules: readonly NftRule[]): string[] {
  if (rules.length === 0) return [];
  const used = new Set(rules.map((r) => r.chain));
  const specs = NFT_CHAINS[table] ?? [];
  const unknown = [...used].filter((c) => !specs.some((s) => s.name === c));
  if (unknown.length > 0) throw new Error(`nftables table ${table} has no chain ${unknown.join(", ")}`);
  return [
    `add table ${NFT_FAMILY} ${table}`,
    `flush table ${NFT_FAMILY} ${table}`,
    ...specs.filter((s) => used.has(s.name)).map((s) => chainDecl(table, s)),
    ...ruleLines(table, rules),
  ];
}

/** The whole transaction: our tables in fixed order, each line ending in `\n` ("" when there is nothing to do). */
export function renderProgram(rb: NftRuleBuilder): string {
  return NFT_TABLES.flatMap((t) => tableLines(t, rb.rules(t)))
    .map((l) => l + "\n")
    .join("");
}

/** The cleanup transaction: each of our tables added (so the delete cannot fail) and deleted. */
export function renderCleanupProgram(): string {
  return NFT_TABLES.flatMap((t) => [`add table ${NFT_FAMILY} ${t}`, `delete table ${NFT_FAMILY} ${t}`])
    .map((l) => l + "\n")
    .join("");
}
