// The machinery behind the environment-variable table: a declaration type, typed parsing from an
// injected env map (never process.env), and the rendering used by `--help` and the README.
// Parsing follows Istio's pkg/env: a value that does not parse is reported (by name and value) and
// the default is used, so one bad variable does not take the proxy down.

import { formatGoDuration, parseGoDuration } from "../lib/duration.ts";
import { parseGoBool } from "../lib/flags.ts";

export type EnvType = "string" | "bool" | "int" | "float" | "duration" | "optbool";

export interface EnvDecl<T extends EnvType = EnvType> {
  name: string;
  type: T;
  default: EnvValueOf<T>;
  doc: string;
  /** Which part of the agent reads it; groups the help and README tables. */
  group: string;
  /** Values never logged. */
  secret?: boolean;
  /** Another name read when this one is unset (Istio's aliases, e.g. INVALID_DROP). */
  alias?: string;
  /** Valid values of a number or duration (ms), inclusive; outside it the default is used, reported by name. */
  range?: EnvRange;
}

export interface EnvRange {
  min?: number;
  max?: number;
}

export type EnvValueOf<T extends EnvType> = T extends "string"
  ? string
  : T extends "bool"
    ? boolean
    : T extends "int" | "float" | "duration"
      ? number
      : T extends "optbool"
        ? boolean | undefined
        : never;

export type EnvMap = Readonly<Record<string, string | undefined>>;

export class EnvError extends Error {
  override name = "EnvError";
}

export interface EnvProblem {
  name: string;
  value: string;
  message: string;
}

export function declare<T extends EnvType>(
  name: string,
  type: T,
  def: EnvValueOf<T>,
  group: string,
  doc: string,
  extra: Partial<Pick<EnvDecl, "secret" | "alias" | "range">> = {},
): EnvDecl<T> {
  return { name, type, default: def, group, doc, ...extra };
}

/** Parse one declared variable; a bad value yields the default plus a problem naming it. */
export function readOne<T extends EnvType>(env: EnvMap, d: EnvDecl<T>, problems?: EnvProblem[]): EnvValueOf<T> {
  // As Istio's pkg/env (os.LookupEnv): only an unset variable takes the default. A string set to
  // "" stays "" (GRPC_XDS_BOOTSTRAP="" turns the gRPC bootstrap off); an empty bool, number or
  // duration does not parse, so it is reported and the default used, as Istio warns and defaults.
  let raw = env[d.name];
  if (raw === undefined && d.alias) raw = env[d.alias];
  if (raw === undefined) return d.default;
  const fail = (message: string): EnvValueOf<T> => {
    problems?.push({ name: d.name, value: d.secret ? "<redacted>" : raw!, message });
    return d.default;
  };
  switch (d.type) {
    case "string":
      return raw as EnvValueOf<T>;
    case "bool": {
      const b = parseGoBool(raw);
      return b === undefined ? fail(`expecting true/false`) : (b as EnvValueOf<T>);
    }
    case "optbool": {
      // Set at all means set (Istio's Lookup reports it found): a bad value counts as false.
      const b = parseGoBool(raw);
      if (b === undefined) fail(`expecting true/false; using false`);
      return (b ?? false) as EnvValueOf<T>;
    }
    case "int": {
      const n = Number(raw);
      if (!Number.isSafeInteger(n) || !/^[-+]?\d+$/.test(raw.trim())) return fail(`expecting an integer`);
      return outOfRange(n, d) ? fail(rangeText(d)) : (n as EnvValueOf<T>);
    }
    case "float": {
      const n = Number(raw);
      if (!Number.isFinite(n) || raw.trim() === "") return fail(`expecting a number`);
      return outOfRange(n, d) ? fail(rangeText(d)) : (n as EnvValueOf<T>);
    }
    case "duration": {
      let ms: number;
      try {
        ms = parseGoDuration(raw);
      } catch {
        return fail(`expecting a duration like 5s or 1m30s`);
      }
      return outOfRange(ms, d) ? fail(rangeText(d)) : (ms as EnvValueOf<T>);
    }
  }
  return d.default;
}

function outOfRange(n: number, d: EnvDecl): boolean {
  return (d.range?.min !== undefined && n < d.range.min) || (d.range?.max !== undefined && n > d.range.max);
}

function rangeBound(n: number, d: EnvDecl): string {
  return d.type === "duration" ? formatGoDuration(n) : String(n);
}

/** "out of range: want 1..65535" (durations in Go's notation). */
export function rangeText(d: EnvDecl): string {
  const { min, max } = d.range ?? {};
  if (min !== undefined && max !== undefined) return `out of range: want ${rangeBound(min, d)} to ${rangeBound(max, d)}`;
  if (min !== undefined) return `out of range: want at least ${rangeBound(min, d)}`;
  return `out of range: want at most ${rangeBound(max!, d)}`;
}

/** Parse a whole table of declarations into a typed record. */
export function readAll<D extends Record<string, EnvDecl>>(
  env: EnvMap,
  decls: D,
): { values: { [K in keyof D]: EnvValueOf<D[K]["type"]> }; problems: EnvProblem[] } {
  const problems: EnvProblem[] = [];
  const values = {} as { [K in keyof D]: EnvValueOf<D[K]["type"]> };
  for (const key of Object.keys(decls) as (keyof D)[]) {
    values[key] = readOne(env, decls[key]!, problems) as never;
  }
  return { values, problems };
}

/** Every `<prefix><K>=v` pair, keyed by `<K>` (XDS_HEADER_*, CA_HEADER_*, ISTIO_META_*). */
export function withPrefix(env: EnvMap, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith(prefix) && k.length > prefix.length && v !== undefined) out[k.slice(prefix.length)] = v;
  }
  return out;
}

export function defaultText(d: EnvDecl): string {
  switch (d.type) {
    case "duration":
      return formatGoDuration(d.default as number);
    case "optbool":
      return d.default === undefined ? "(unset)" : String(d.default);
    case "string":
      return d.default === "" ? '""' : String(d.default);
    default:
      return String(d.default);
  }
}

/** Plain-text listing for `--help`. */
export function formatEnvHelp(decls: readonly EnvDecl[]): string {
  const width = Math.max(...decls.map((d) => d.name.length));
  return decls.map((d) => `  ${d.name.padEnd(width)}  ${d.type.padEnd(8)} ${defaultText(d).padEnd(12)} ${d.doc}`).join("\n");
}

/** Markdown table for the README, grouped. */
export function formatEnvMarkdown(decls: readonly EnvDecl[]): string {
  const lines = ["| Variable | Type | Default | Group | Meaning |", "|---|---|---|---|---|"];
  for (const d of decls) {
    const def = defaultText(d).replace(/\|/g, "\\|");
    lines.push(`| \`${d.name}\` | ${d.type} | \`${def}\` | ${d.group} | ${d.doc.replace(/\|/g, "\\|")} |`);
  }
  return lines.join("\n");
}
