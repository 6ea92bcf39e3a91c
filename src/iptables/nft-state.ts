import { errorMessage } from "../lib/errors.ts";
// A model of nftables state for the subset of nft commands our transactions use (add/flush/delete
// table, add chain, add/insert rule): applying a transaction to it gives the state nft should end
// up in, dumped the way knftables' Fake does (the nftables-builder goldens), or summarised per
// chain to compare with the ruleset read back from the kernel (`nft -j list ruleset`). Pure.

export class NftStateError extends Error {
  override name = "NftStateError";
}

interface ChainState {
  /** The `{ … }` declaration of a base chain ("" for a regular chain). */
  decl: string;
  rules: string[];
}

interface TableState {
  family: string;
  name: string;
  chains: Map<string, ChainState>;
}

/** Per table: chain -> base-chain hook description ("" for regular chains) and rule count. */
export type NftSummary = Record<string, Record<string, { base: string; rules: number }>>;

const BASE_DECL = /^\{ type (\S+) hook (\S+) priority (-?\d+) ; \}$/;

export class NftState {
  private readonly tables = new Map<string, TableState>();

  private table(family: string, name: string, line: string): TableState {
    const t = this.tables.get(`${family} ${name}`);
    if (!t) throw new NftStateError(`no table ${family} ${name}: ${line}`);
    return t;
  }

  /** Applies a transaction's lines in order; throws on the first line nft would reject. */
  apply(program: string): this {
    for (const line of program.split("\n")) {
      if (line.trim() === "") continue;
      const w = line.split(" ");
      const [verb, kind, family, tname] = w;
      if (!family || !tname) throw new NftStateError(`unsupported nft command: ${line}`);
      const key = `${family} ${tname}`;
      if (kind === "table") {
        if (verb === "add") {
          if (!this.tables.has(key)) this.tables.set(key, { family, name: tname, chains: new Map() });
        } else if (verb === "flush") {
          for (const c of this.table(family, tname, line).chains.values()) c.rules = [];
        } else if (verb === "delete") {
          this.table(family, tname, line);
          this.tables.delete(key);
        } else throw new NftStateError(`unsupported nft command: ${line}`);
        continue;
      }
      const t = this.table(family, tname, line);
      const chain = w[4];
      if (!chain) throw new NftStateError(`unsupported nft command: ${line}`);
      if (kind === "chain" && verb === "add") {
        const decl = w.slice(5).join(" ");
        if (decl !== "" && !BASE_DECL.test(decl)) throw new NftStateError(`unsupported chain declaration: ${line}`);
        if (!t.chains.has(chain)) t.chains.set(chain, { decl, rules: [] });
        continue;
      }
      if (kind !== "rule" || (verb !== "add" && verb !== "insert")) throw new NftStateError(`unsupported nft command: ${line}`);
      const c = t.chains.get(chain);
      if (!c) throw new NftStateError(`no chain ${chain} in table ${family} ${tname}: ${line}`);
      let rest = w.slice(5);
      let index: number | undefined;
      if (verb === "insert") {
        if (rest[0] !== "index" || !/^\d+$/.test(rest[1] ?? "")) throw new NftStateError(`insert without an index: ${line}`);
        index = Number(rest[1]);
        if (index >= c.rules.length) throw new NftStateError(`index ${index} is past the ${c.rules.length} rule(s) of chain ${chain}: ${line}`);
        rest = rest.slice(2);
      }
      for (let i = 0; i < rest.length - 1; i++) {
        if ((rest[i] === "jump" || rest[i] === "goto") && !t.chains.has(rest[i + 1]!))
          throw new NftStateError(`jump to chain ${rest[i + 1]}, which does not exist in table ${family} ${tname}: ${line}`);
      }
      const text = rest.join(" ");
      if (index === undefined) c.rules.push(text);
      else c.rules.splice(index, 0, text);
    }
    return this;
  }

  /** knftables Fake.Dump(): tables by family and name, chains by name, then each chain's rules. */
  dump(): string {
    const out: string[] = [];
    const tables = [...this.tables.values()].sort((a, b) => cmp(a.family, b.family) || cmp(a.name, b.name));
    for (const t of tables) {
      const chains = [...t.chains.entries()].sort(([a], [b]) => cmp(a, b));
      out.push(`add table ${t.family} ${t.name}`);
      for (const [name, c] of chains) out.push(`add chain ${t.family} ${t.name} ${name}${c.decl ? ` ${c.decl}` : ""}`);
      for (const [name, c] of chains) for (const r of c.rules) out.push(`add rule ${t.family} ${t.name} ${name} ${r}`);
    }
    return out.map((l) => l + "\n").join("");
  }

  /** Chains and rule counts of the named tables of a family (absent tables are left out). */
  summary(family: string, names: readonly string[]): NftSummary {
    const out: NftSummary = {};
    for (const n of names) {
      const t = this.tables.get(`${family} ${n}`);
      if (!t) continue;
      out[n] = {};
      for (const [name, c] of t.chains) {
        const m = BASE_DECL.exec(c.decl);
        out[n][name] = { base: m ? `${m[1]} ${m[2]} ${m[3]}` : "", rules: c.rules.length };
      }
    }
    return out;
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

interface NftJsonObject {
  table?: { family: string; name: string };
  chain?: { family: string; table: string; name: string; type?: string; hook?: string; prio?: number };
  rule?: { family: string; table: string; chain: string };
}

/** The same summary from `nft -j list ruleset` output (other families and tables are ignored). */
export function summaryFromJson(json: string, family: string, names: readonly string[]): NftSummary {
  let doc: { nftables?: NftJsonObject[] };
  try {
    doc = JSON.parse(json) as { nftables?: NftJsonObject[] };
  } catch (e) {
    throw new NftStateError(`nft -j list ruleset: output is not JSON: ${errorMessage(e)}`, { cause: e });
  }
  if (!Array.isArray(doc.nftables)) throw new NftStateError("nft -j list ruleset: output has no nftables array");
  const wanted = new Set(names);
  const out: NftSummary = {};
  const ours = (f: string, t: string) => f === family && wanted.has(t);
  for (const o of doc.nftables) {
    if (o.table && ours(o.table.family, o.table.name)) out[o.table.name] ??= {};
    if (o.chain && ours(o.chain.family, o.chain.table)) {
      const c = o.chain;
      (out[c.table] ??= {})[c.name] = { base: c.type !== undefined ? `${c.type} ${c.hook} ${c.prio}` : "", rules: out[c.table]?.[c.name]?.rules ?? 0 };
    }
    if (o.rule && ours(o.rule.family, o.rule.table)) {
      const r = o.rule;
      const chains = (out[r.table] ??= {});
      const c = (chains[r.chain] ??= { base: "", rules: 0 });
      c.rules++;
    }
  }
  return out;
}

/** Differences between two summaries, one line each ([] when equal); extra empty chains are not differences. */
export function diffSummaries(want: NftSummary, got: NftSummary): string[] {
  const out: string[] = [];
  for (const t of new Set([...Object.keys(want), ...Object.keys(got)])) {
    const w = want[t];
    const g = got[t];
    if (!w || !g) {
      out.push(`table ${t}: ${w ? "missing" : "unexpected"}`);
      continue;
    }
    for (const c of new Set([...Object.keys(w), ...Object.keys(g)])) {
      const wc = w[c];
      const gc = g[c];
      // `flush table` keeps the chains of an earlier run; left empty they do nothing.
      if (!wc && gc && gc.rules === 0) continue;
      if (!wc || !gc) out.push(`table ${t} chain ${c}: ${wc ? "missing" : "unexpected"}`);
      else if (wc.base !== gc.base) out.push(`table ${t} chain ${c}: hook "${gc.base}", want "${wc.base}"`);
      else if (wc.rules !== gc.rules) out.push(`table ${t} chain ${c}: ${gc.rules} rule(s), want ${wc.rules}`);
    }
  }
  return out;
}
