// A flag parser with Go pflag's syntax, so the command lines Istio's injector, istio-start.sh and
// users' scripts pass to pilot-agent and istio-iptables parse the same way here:
//   --flag=value   --flag value   -x value   -xvalue   -x=value   -abc (bool shorts)
//   --bool  --bool=false  (a bare bool never consumes the next argument)
//   repeated string arrays (--log_target a --log_target b)
//   `--` ends flag parsing.
// Unknown flags are either an error or collected (cobra's FParseErrWhitelist.UnknownFlags); like
// pflag, an unknown `--flag value` swallows the next argument when it does not start with `-`.

import { formatGoDuration, parseGoDuration } from "./duration.ts";
import { errorMessage } from "./errors.ts";

export type FlagType = "string" | "bool" | "int" | "stringArray" | "duration";

export interface FlagSpec {
  name: string;
  short?: string;
  type: FlagType;
  /** Default value (`duration` in milliseconds). */
  default: string | boolean | number | string[];
  usage: string;
  /** Environment variable bound to this flag (shown in help; applied by the command). */
  env?: string;
  hidden?: boolean;
}

export type FlagValue = string | boolean | number | string[];

export class FlagError extends Error {
  override name = "FlagError";
}

export interface ParsedFlags {
  values: Record<string, FlagValue>;
  /** Names of flags set explicitly on the command line. */
  set: Set<string>;
  positionals: string[];
  unknown: string[];
}

export function parseFlags(argv: readonly string[], specs: readonly FlagSpec[], opts: { allowUnknown?: boolean } = {}): ParsedFlags {
  const byName = new Map<string, FlagSpec>();
  const byShort = new Map<string, FlagSpec>();
  for (const s of specs) {
    byName.set(s.name, s);
    if (s.short) byShort.set(s.short, s);
  }
  const values: Record<string, FlagValue> = {};
  for (const s of specs) values[s.name] = Array.isArray(s.default) ? [...s.default] : s.default;
  const set = new Set<string>();
  const positionals: string[] = [];
  const unknown: string[] = [];

  const assign = (spec: FlagSpec, raw: string, display: string) => {
    const arrayFresh = !set.has(spec.name);
    set.add(spec.name);
    values[spec.name] = convert(spec, raw, display, arrayFresh ? [] : (values[spec.name] as string[]));
  };

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (arg.startsWith("--") && arg.length > 2) {
      const body = arg.slice(2);
      const eq = body.indexOf("=");
      const name = eq >= 0 ? body.slice(0, eq) : body;
      const spec = byName.get(name);
      if (!spec) {
        if (!opts.allowUnknown) throw new FlagError(`unknown flag: --${name}`);
        unknown.push(arg);
        if (eq < 0 && i + 1 < argv.length && !argv[i + 1]!.startsWith("-")) unknown.push(argv[++i]!);
        continue;
      }
      if (eq >= 0) assign(spec, body.slice(eq + 1), `--${name}`);
      else if (spec.type === "bool") assign(spec, "true", `--${name}`);
      else if (i + 1 < argv.length) assign(spec, argv[++i]!, `--${name}`);
      else throw new FlagError(`flag needs an argument: --${name}`);
      continue;
    }
    if (arg.startsWith("-") && arg.length > 1) {
      // Short flags, possibly combined: -abc, -p15001, -p=15001, -p 15001
      let j = 1;
      while (j < arg.length) {
        const c = arg[j]!;
        const spec = byShort.get(c);
        if (!spec) {
          if (!opts.allowUnknown) throw new FlagError(`unknown shorthand flag: '${c}' in ${arg}`);
          unknown.push(arg);
          break;
        }
        const rest = arg.slice(j + 1);
        if (spec.type === "bool") {
          if (rest.startsWith("=")) {
            assign(spec, rest.slice(1), `-${c}`);
            break;
          }
          assign(spec, "true", `-${c}`);
          j++;
          continue;
        }
        if (rest.length > 0) assign(spec, rest.startsWith("=") ? rest.slice(1) : rest, `-${c}`);
        else if (i + 1 < argv.length) assign(spec, argv[++i]!, `-${c}`);
        else throw new FlagError(`flag needs an argument: '${c}' in -${c}`);
        break;
      }
      continue;
    }
    positionals.push(arg);
  }
  return { values, set, positionals, unknown };
}

function convert(spec: FlagSpec, raw: string, display: string, prev: string[]): FlagValue {
  switch (spec.type) {
    case "string":
      return raw;
    case "stringArray":
      return [...prev, raw];
    case "bool": {
      const b = parseGoBool(raw);
      if (b === undefined) throw new FlagError(`invalid argument "${raw}" for "${display}" flag: strconv.ParseBool: parsing "${raw}": invalid syntax`);
      return b;
    }
    case "int": {
      const n = parseGoInt(raw);
      if (n === undefined) throw new FlagError(`invalid argument "${raw}" for "${display}" flag: strconv.ParseInt: parsing "${raw}": invalid syntax`);
      return n;
    }
    case "duration":
      try {
        return parseGoDuration(raw);
      } catch (e) {
        throw new FlagError(`invalid argument "${raw}" for "${display}" flag: ${errorMessage(e)}`, { cause: e });
      }
  }
}

/** Go's strconv.ParseBool. */
export function parseGoBool(raw: string): boolean | undefined {
  switch (raw) {
    case "1":
    case "t":
    case "T":
    case "true":
    case "TRUE":
    case "True":
      return true;
    case "0":
    case "f":
    case "F":
    case "false":
    case "FALSE":
    case "False":
      return false;
  }
  return undefined;
}

/** Go's strconv.ParseInt(s, 0, 64) restricted to safe integers. */
export function parseGoInt(raw: string): number | undefined {
  const m = /^([+-])?(0[xX][0-9a-fA-F_]+|0[oO]?[0-7_]*|0[bB][01_]+|[1-9][0-9_]*|0)$/.exec(raw);
  if (!m) return undefined;
  let body = m[2]!.replace(/_/g, "");
  let n: number;
  if (/^0[xX]/.test(body)) n = parseInt(body.slice(2), 16);
  else if (/^0[bB]/.test(body)) n = parseInt(body.slice(2), 2);
  else if (/^0[oO]/.test(body)) n = parseInt(body.slice(2), 8);
  else if (body.length > 1 && body.startsWith("0")) n = parseInt(body.slice(1), 8);
  else n = parseInt(body, 10);
  if (!Number.isSafeInteger(n)) return undefined;
  return m[1] === "-" ? -n : n;
}

/** Render flags the way cobra's usage does: `  -x, --name type   usage (default ...)`. */
export function formatFlagHelp(specs: readonly FlagSpec[]): string {
  const rows: [string, string][] = [];
  for (const s of specs) {
    if (s.hidden) continue;
    const typeName =
      s.type === "bool" ? "" : s.type === "stringArray" ? " stringArray" : s.type === "int" ? " int" : s.type === "duration" ? " duration" : " string";
    const left = `${s.short ? `-${s.short}, ` : "    "}--${s.name}${typeName}`;
    let usage = s.usage;
    const d = defaultText(s);
    if (d !== undefined) usage += ` (default ${d})`;
    if (s.env) usage += ` [env ${s.env}]`;
    rows.push([left, usage]);
  }
  const width = Math.max(0, ...rows.map(([l]) => l.length));
  return rows.map(([l, u]) => `  ${l.padEnd(width)}   ${u}`).join("\n");
}

function defaultText(s: FlagSpec): string | undefined {
  const d = s.default;
  if (s.type === "bool") return d === true ? "true" : undefined;
  if (s.type === "stringArray") return (d as string[]).length ? `[${(d as string[]).join(",")}]` : "[]";
  if (s.type === "int") return d === 0 ? undefined : String(d);
  if (s.type === "duration") return formatGoDuration(d as number);
  return d === "" ? undefined : `"${d}"`;
}
