// The rule builder: an ordered list of rules per IP family, and every rendering istio-iptables
// makes of it (iptables argument lists, iptables-restore payload, -C checks, cleanup, guardrails,
// and the parsed state of a save/restore text). Pure: no I/O.

export type Family = "v4" | "v6";

export interface Rule {
  chain: string;
  table: string;
  /** `-A <chain> …` or `-I <chain> <pos> …`. */
  params: string[];
}

/** Chains and targets that iptables has built in: never created, flushed or deleted. */
export const BUILTIN_CHAINS_AND_TARGETS: ReadonlySet<string> = new Set(["INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING", "ACCEPT", "RETURN", "DROP"]);

/** NFLOG group the trace companions log to, and that the tracer reads. */
export const TRACE_NFLOG_GROUP = 1337;

/** table -> chain -> rule lines */
export type TableState = Record<string, Record<string, string[]>>;

export class RuleBuilder {
  readonly v4: Rule[] = [];
  readonly v6: Rule[] = [];

  /**
   * @param enableIPv6 v6 rules are recorded only when true (Istio's builder drops them otherwise).
   * @param traceLogging add an NFLOG companion before each rule given a trace identifier.
   */
  constructor(
    readonly enableIPv6: boolean,
    readonly traceLogging = false,
  ) {}

  private list(f: Family): Rule[] | undefined {
    if (f === "v6" && !this.enableIPv6) return undefined;
    return f === "v4" ? this.v4 : this.v6;
  }

  private companion(params: readonly string[], trace: string): string[] {
    const j = params.indexOf("-j");
    return [...params.slice(0, j), "-j", "NFLOG", "--nflog-prefix", trace, "--nflog-group", String(TRACE_NFLOG_GROUP), "--nflog-size", "20"];
  }

  appendFamily(f: Family, chain: string, table: string, params: readonly string[], trace?: string): this {
    const list = this.list(f);
    if (!list) return this;
    if (trace && this.traceLogging && params.includes("-j")) list.push({ chain, table, params: ["-A", chain, ...this.companion(params, trace)] });
    list.push({ chain, table, params: ["-A", chain, ...params] });
    return this;
  }

  insertFamily(f: Family, chain: string, table: string, position: number, params: readonly string[], trace?: string): this {
    const list = this.list(f);
    if (!list) return this;
    list.push({ chain, table, params: ["-I", chain, String(position), ...params] });
    // Inserted after the rule at the same position, the companion ends up in front of it.
    if (trace && this.traceLogging && params.includes("-j"))
      list.push({ chain, table, params: ["-I", chain, String(position), ...this.companion(params, trace)] });
    return this;
  }

  append(chain: string, table: string, params: readonly string[], trace?: string): this {
    return this.appendFamily("v4", chain, table, params, trace).appendFamily("v6", chain, table, params, trace);
  }

  insert(chain: string, table: string, position: number, params: readonly string[], trace?: string): this {
    return this.insertFamily("v4", chain, table, position, params, trace).insertFamily("v6", chain, table, position, params, trace);
  }

  /** One rule per family with `ip` substituted by the family's value (Istio's AppendVersionedRule). */
  appendVersioned(ipv4: string, ipv6: string, chain: string, table: string, params: readonly string[], ip = IP_PLACEHOLDER): this {
    this.appendFamily(
      "v4",
      chain,
      table,
      params.map((p) => (p === ip ? ipv4 : p)),
    );
    return this.appendFamily(
      "v6",
      chain,
      table,
      params.map((p) => (p === ip ? ipv6 : p)),
    );
  }

  rules(f: Family): readonly Rule[] {
    return f === "v4" ? this.v4 : this.v6;
  }
}

export const IP_PLACEHOLDER = "PLACEHOLDER_IP_VERSION_SPECIFIC";

/** BuildV4/BuildV6: `-t T -N C` for each non-built-in chain (first use), then `-t T <params>` per rule. */
export function buildCommands(rules: readonly Rule[]): string[][] {
  const out: string[][] = [];
  const seen = new Set<string>();
  for (const r of rules) {
    const key = `${r.chain}:${r.table}`;
    if (!seen.has(key) && !BUILTIN_CHAINS_AND_TARGETS.has(r.chain)) {
      out.push(["-t", r.table, "-N", r.chain]);
      seen.add(key);
    }
  }
  for (const r of rules) out.push(["-t", r.table, ...r.params]);
  return out;
}

/** The iptables-restore payload: tables sorted, `-N` lines (chains, then bare jump targets), rules, COMMIT. */
export function buildRestore(rules: readonly Rule[]): string {
  const tables = new Map<string, string[]>([
    ["filter", []],
    ["nat", []],
    ["mangle", []],
  ]);
  const lines = (t: string) => {
    let l = tables.get(t);
    if (!l) tables.set(t, (l = []));
    return l;
  };
  const seen = new Set<string>();
  const declare = (chain: string, table: string) => {
    const key = `${chain}:${table}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (!BUILTIN_CHAINS_AND_TARGETS.has(chain)) lines(table).push(`-N ${chain}`);
  };
  for (const r of rules) declare(r.chain, r.table);
  for (const r of rules) {
    const n = r.params.length;
    if (n >= 2 && r.params[n - 2] === "-j") declare(r.params[n - 1]!, r.table);
  }
  for (const r of rules) lines(r.table).push(r.params.join(" "));
  let out = "";
  for (const t of [...tables.keys()].sort()) {
    const l = tables.get(t)!;
    if (l.length === 0) continue;
    out += `* ${t}\n${l.join("\n")}\nCOMMIT\n`;
  }
  return out;
}

/** Rewrite -A/-I (dropping the insert position) to `op`; Istio's CheckRules/UndoRules core. */
function rewrite(params: readonly string[], op: string): string[] {
  const out: string[] = [];
  let insertAt = -1;
  params.forEach((p, i) => {
    if (insertAt >= 0 && i === insertAt + 2) return;
    if (p === "-A" || p === "--append") out.push(op);
    else if (p === "-I" || p === "--insert") {
      insertAt = i;
      out.push(op);
    } else out.push(p);
  });
  return out;
}

/** BuildCheckV4/V6: every rule as `iptables -C`. */
export function buildCheck(rules: readonly Rule[]): string[][] {
  return rules.map((r) => ["-t", r.table, ...rewrite(r.params, "-C")]);
}

/** Istio's UndoRules: -D for each rule, skipping non-jump rules inside ISTIO_ chains (flushed anyway). */
export function undoRules(rules: readonly Rule[]): Rule[] {
  const out: Rule[] = [];
  for (const r of rules) {
    let skip = false;
    r.params.forEach((p, i) => {
      const next = r.params[i + 1];
      if ((p === "-A" || p === "--append" || p === "-I" || p === "--insert") && next?.startsWith("ISTIO_")) skip = true;
      else if ((p === "-j" || p === "--jump") && next?.startsWith("ISTIO_")) skip = false;
    });
    if (!skip) out.push({ chain: r.chain, table: r.table, params: rewrite(r.params, "-D") });
  }
  return out;
}

/** BuildCleanupV4/V6: undo in reverse order, then -F/-X per non-built-in chain (reverse first use). */
export function buildCleanup(rules: readonly Rule[]): string[][] {
  const reversed = [...rules].reverse();
  const out = undoRules(reversed).map((r) => ["-t", r.table, ...r.params]);
  const seen = new Set<string>();
  for (const r of reversed) {
    const key = `${r.chain}:${r.table}`;
    if (seen.has(key) || BUILTIN_CHAINS_AND_TARGETS.has(r.chain)) continue;
    seen.add(key);
    out.push(["-t", r.table, "-F", r.chain], ["-t", r.table, "-X", r.chain]);
  }
  return out;
}

function guardrailRules(): Rule[] {
  const out: Rule[] = [];
  for (const chain of ["INPUT", "FORWARD", "OUTPUT"]) {
    for (const proto of ["tcp", "udp"]) out.push({ chain, table: "filter", params: ["-I", chain, "1", "-p", proto, "-j", "DROP"] });
  }
  return out;
}

/** Temporary DROP rules installed while reconciling. */
export function buildGuardrails(): string[][] {
  return guardrailRules().map((r) => ["-t", r.table, ...r.params]);
}

export function buildCleanupGuardrails(): string[][] {
  return undoRules(guardrailRules()).map((r) => ["-t", r.table, ...r.params]);
}

/** Istio's GetStateFromSave: filter/nat/mangle/raw -> chain -> -A/-I lines (ISTIO chains kept even when empty). */
export function stateFromSave(data: string): TableState {
  const result: TableState = { filter: {}, nat: {}, mangle: {}, raw: {} };
  let table = "";
  for (const line of data.split("\n")) {
    if (line.trim() === "" || line.startsWith("#") || line === "COMMIT") continue;
    if (line.startsWith("*")) {
      table = line.slice(1).trim();
      continue;
    }
    const chains = result[table];
    if (!chains) continue;
    if (line.startsWith(":")) {
      if (!line.startsWith(":ISTIO")) continue;
      const chain = line.split(" ")[0]!.slice(1);
      chains[chain] ??= [];
      continue;
    }
    const items = line.split(" ");
    let chain = "";
    let add = false;
    items.forEach((item, i) => {
      if (i + 1 >= items.length) return;
      if (item === "--append" || item === "-A" || item === "--insert" || item === "-I") {
        add = true;
        chain = items[i + 1]!.replace(/^['"]+|['"]+$/g, "");
      } else if (item === "--new" || item === "-N") {
        const target = items[i + 1]!.replace(/^['"]+|['"]+$/g, "");
        if (target.startsWith("ISTIO")) chain = target;
      }
    });
    if (chain === "") continue;
    chains[chain] ??= [];
    if (add) chains[chain]!.push(line);
  }
  return result;
}

/** Istio's HasIstioLeftovers: per table, the ISTIO_ chains and the rules jumping to ISTIO_ chains. */
export function istioLeftovers(state: TableState): Record<string, { chains: string[]; rules: string[] }> {
  const out: Record<string, { chains: string[]; rules: string[] }> = {};
  for (const [table, chains] of Object.entries(state)) {
    const ch: string[] = [];
    const jumps: string[] = [];
    for (const [chain, rules] of Object.entries(chains)) {
      if (chain.startsWith("ISTIO_")) ch.push(chain);
      for (const rule of rules) {
        const fields = rule.split(/\s+/).filter(Boolean);
        const j = fields.findIndex((x) => x === "-j" || x === "--jump");
        if (j >= 0 && fields[j + 1]?.replace(/^['"]+|['"]+$/g, "").startsWith("ISTIO_")) jumps.push(rule);
      }
    }
    if (ch.length || jumps.length) out[table] = { chains: ch, rules: jumps };
  }
  return out;
}

/**
 * Commands removing leftovers found in a live state (Istio's BuildCleanupFromState), ordered so
 * that it always succeeds: delete jumps, then flush every ISTIO_ chain, then delete them.
 */
export function buildCleanupFromState(leftovers: Record<string, { chains: string[]; rules: string[] }>): string[][] {
  const out: string[][] = [];
  const tables = Object.keys(leftovers).sort();
  for (const table of tables) {
    const rules = leftovers[table]!.rules.map((line) => {
      const params = line.split(/\s+/).filter(Boolean);
      const i = params.findIndex((p) => p === "-A" || p === "--append" || p === "-I" || p === "--insert");
      return { chain: i >= 0 ? params[i + 1]! : "", table, params };
    });
    for (const r of undoRules(rules)) out.push(["-t", table, ...r.params]);
  }
  for (const table of tables) for (const c of leftovers[table]!.chains) out.push(["-t", table, "-F", c]);
  for (const table of tables) for (const c of leftovers[table]!.chains) out.push(["-t", table, "-X", c]);
  return out;
}
