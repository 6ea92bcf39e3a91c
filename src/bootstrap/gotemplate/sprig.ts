// The Sprig functions (github.com/Masterminds/sprig/v3 GenericFuncMap) that make sense over the
// bootstrap template parameters (strings, numbers, lists, maps, JSON), plus Istio's own toJSON.
// `env`/`expandenv` read the injected environment map, never process.env. Functions that need a
// clock, randomness, the network or crypto keys (now, date, uuidv4, randAlpha, genCA...) are not
// provided: a template using them fails to parse with `function "x" not defined`.

import { createHash } from "node:crypto";
import { ExecFault } from "./errors.ts";
import { fn, goEq, type FuncMap } from "./builtins.ts";
import { sprintf } from "./fmt.ts";
import { goJsonIndent, goJsonMarshal } from "./json.ts";
import { formatValue, GoFloat, GoStringer, GoStruct, isTrue, kindOf, mapEntries, mapGet, numberValue, typeName } from "./values.ts";
import { errorMessage } from "../../lib/errors.ts";

/** sprig's strval: strings as is, everything else through %v. */
function strval(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === undefined || v === null) return "<nil>";
  if (v instanceof GoStringer) return v.text;
  return formatValue(v, false);
}

function toInt(v: unknown): number {
  switch (kindOf(v)) {
    case "int":
    case "float":
      return Math.trunc(numberValue(v));
    case "string": {
      const s = (v as string).trim();
      if (/^[+-]?\d+$/.test(s)) return Number(s);
      const f = Number(s);
      return Number.isFinite(f) && s !== "" ? Math.trunc(f) : 0;
    }
    case "bool":
      return v ? 1 : 0;
    default:
      return 0;
  }
}

function toFloat(v: unknown): GoFloat {
  switch (kindOf(v)) {
    case "int":
    case "float":
      return new GoFloat(numberValue(v));
    case "string": {
      const f = Number((v as string).trim());
      return new GoFloat(Number.isFinite(f) ? f : 0);
    }
    case "bool":
      return new GoFloat(v ? 1 : 0);
    default:
      return new GoFloat(0);
  }
}

function list(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  if (v === undefined || v === null) return [];
  throw new ExecFault(`cannot find first on type ${typeName(v)}`);
}

function dictOf(v: unknown): Record<string, unknown> {
  if (kindOf(v) !== "map") throw new ExecFault(`expected a dict, got ${typeName(v)}`);
  return v instanceof Map ? Object.fromEntries(v) : (v as Record<string, unknown>);
}

function fromJsonValue(x: unknown): unknown {
  if (typeof x === "number") return new GoFloat(x);
  if (Array.isArray(x)) return x.map(fromJsonValue);
  if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, fromJsonValue(v)]));
  return x;
}

function goTypeOf(v: unknown): string {
  return v === undefined || v === null ? "<nil>" : typeName(v);
}

function goKindOf(v: unknown): string {
  const k = kindOf(v);
  if (k === "nil") return "invalid";
  if (k === "float") return "float64";
  if (k === "struct") return v instanceof GoStruct && v.pointer ? "ptr" : "struct";
  return v instanceof GoStringer ? "int64" : k;
}

function regex(pattern: unknown): RegExp {
  try {
    return new RegExp(String(pattern), "g");
  } catch (e) {
    throw new ExecFault(`error parsing regexp: ${errorMessage(e)}`, { cause: e });
  }
}

function indent(n: number, s: string): string {
  const pad = " ".repeat(Math.max(0, n));
  return pad + s.replace(/\n/g, "\n" + pad);
}

export function sprigFuncs(env: Readonly<Record<string, string | undefined>>): FuncMap {
  const num2 = (op: (a: number, b: number) => number) => fn(2, 2, ([a, b]) => op(toInt(a), toInt(b)));
  const toJson = fn(1, 1, ([v]) => {
    try {
      return goJsonMarshal(v);
    } catch {
      return "";
    }
  });
  return {
    // Istio's own (pkg/bootstrap/instance.go): nil becomes {}.
    toJSON: fn(1, 1, ([v]) => {
      if (v === undefined || v === null) return "{}";
      try {
        return goJsonMarshal(v);
      } catch {
        return "{}";
      }
    }),
    toJson,
    mustToJson: toJson,
    toRawJson: fn(1, 1, ([v]) =>
      goJsonMarshal(v)
        .replace(/\\u003c/g, "<")
        .replace(/\\u003e/g, ">")
        .replace(/\\u0026/g, "&"),
    ),
    toPrettyJson: fn(1, 1, ([v]) => goJsonIndent(goJsonMarshal(v))),
    fromJson: fn(1, 1, ([s]) => {
      try {
        return fromJsonValue(JSON.parse(String(s)));
      } catch {
        return {};
      }
    }),
    default: fn(1, 2, (a) => (a.length < 2 || !isTrue(a[1]) ? a[0] : a[1])),
    empty: fn(1, 1, ([v]) => !isTrue(v) && !(v instanceof GoStruct)),
    coalesce: fn(0, Infinity, (a) => a.find((v) => isTrue(v)) ?? null),
    ternary: fn(3, 3, ([t, f, c]) => (isTrue(c) ? t : f)),
    all: fn(0, Infinity, (a) => a.every((v) => isTrue(v))),
    any: fn(0, Infinity, (a) => a.some((v) => isTrue(v))),
    // strings
    toString: fn(1, 1, ([v]) => strval(v)),
    toStrings: fn(1, 1, ([v]) => list(v).map(strval)),
    upper: fn(1, 1, ([s]) => strval(s).toUpperCase()),
    lower: fn(1, 1, ([s]) => strval(s).toLowerCase()),
    title: fn(1, 1, ([s]) => strval(s).replace(/(^|[^\p{L}\p{N}_'])(\p{L})/gu, (_m, p, c) => p + c.toUpperCase())),
    trim: fn(1, 1, ([s]) => strval(s).trim()),
    trimAll: fn(2, 2, ([c, s]) => trimChars(strval(s), strval(c))),
    trimPrefix: fn(2, 2, ([p, s]) => (strval(s).startsWith(strval(p)) ? strval(s).slice(strval(p).length) : strval(s))),
    trimSuffix: fn(2, 2, ([p, s]) => (strval(p) !== "" && strval(s).endsWith(strval(p)) ? strval(s).slice(0, -strval(p).length) : strval(s))),
    contains: fn(2, 2, ([sub, s]) => strval(s).includes(strval(sub))),
    hasPrefix: fn(2, 2, ([p, s]) => strval(s).startsWith(strval(p))),
    hasSuffix: fn(2, 2, ([p, s]) => strval(s).endsWith(strval(p))),
    replace: fn(3, 3, ([o, n, s]) => strval(s).split(strval(o)).join(strval(n))),
    repeat: fn(2, 2, ([n, s]) => strval(s).repeat(Math.max(0, toInt(n)))),
    substr: fn(3, 3, ([a, b, s]) => {
      const str = strval(s);
      const start = toInt(a);
      const end = toInt(b);
      if (start < 0) return str.slice(0, end);
      if (end < 0 || end > str.length) return str.slice(start);
      return str.slice(start, end);
    }),
    trunc: fn(2, 2, ([n, s]) => {
      const c = toInt(n);
      const str = strval(s);
      return c < 0 ? str.slice(Math.max(0, str.length + c)) : str.slice(0, c);
    }),
    nospace: fn(1, 1, ([s]) => strval(s).replace(/\s+/g, "")),
    quote: fn(0, Infinity, (a) =>
      a
        .filter((v) => v !== undefined && v !== null)
        .map((v) => sprintf("%q", [strval(v)]))
        .join(" "),
    ),
    squote: fn(0, Infinity, (a) =>
      a
        .filter((v) => v !== undefined && v !== null)
        .map((v) => `'${strval(v)}'`)
        .join(" "),
    ),
    cat: fn(0, Infinity, (a) =>
      a
        .filter((v) => v !== undefined && v !== null)
        .map(strval)
        .join(" "),
    ),
    indent: fn(2, 2, ([n, s]) => indent(toInt(n), strval(s))),
    nindent: fn(2, 2, ([n, s]) => "\n" + indent(toInt(n), strval(s))),
    join: fn(2, 2, ([sep, l]) => (Array.isArray(l) ? l.filter((v) => v !== null && v !== undefined).map(strval) : [strval(l)]).join(strval(sep))),
    split: fn(2, 2, ([sep, s]) =>
      Object.fromEntries(
        strval(s)
          .split(strval(sep))
          .map((p, i) => [`_${i}`, p]),
      ),
    ),
    splitList: fn(2, 2, ([sep, s]) => strval(s).split(strval(sep))),
    // conversions and math
    atoi: fn(1, 1, ([s]) => (/^[+-]?\d+$/.test(strval(s)) ? Number(strval(s)) : 0)),
    int: fn(1, 1, ([v]) => toInt(v)),
    int64: fn(1, 1, ([v]) => toInt(v)),
    float64: fn(1, 1, ([v]) => toFloat(v)),
    add: fn(0, Infinity, (a) => a.reduce<number>((s, v) => s + toInt(v), 0)),
    add1: fn(1, 1, ([v]) => toInt(v) + 1),
    sub: num2((a, b) => a - b),
    mul: fn(0, Infinity, (a) => a.reduce<number>((s, v) => s * toInt(v), 1)),
    div: num2((a, b) => {
      if (b === 0) throw new ExecFault("runtime error: integer divide by zero");
      return Math.trunc(a / b);
    }),
    mod: num2((a, b) => {
      if (b === 0) throw new ExecFault("runtime error: integer divide by zero");
      return a % b;
    }),
    max: fn(1, Infinity, (a) => Math.max(...a.map(toInt))),
    min: fn(1, Infinity, (a) => Math.min(...a.map(toInt))),
    // lists
    list: fn(0, Infinity, (a) => [...a]),
    first: fn(1, 1, ([l]) => list(l)[0] ?? null),
    last: fn(1, 1, ([l]) => list(l).at(-1) ?? null),
    rest: fn(1, 1, ([l]) => list(l).slice(1)),
    initial: fn(1, 1, ([l]) => list(l).slice(0, -1)),
    append: fn(2, 2, ([l, v]) => [...list(l), v]),
    prepend: fn(2, 2, ([l, v]) => [v, ...list(l)]),
    concat: fn(0, Infinity, (a) => a.flatMap((l) => list(l))),
    reverse: fn(1, 1, ([l]) => [...list(l)].reverse()),
    uniq: fn(1, 1, ([l]) => list(l).filter((v, i, arr) => arr.findIndex((w) => safeEq(v, w)) === i)),
    without: fn(1, Infinity, ([l, ...out]) => list(l).filter((v) => !out.some((o) => safeEq(v, o)))),
    has: fn(2, 2, ([needle, l]) => list(l).some((v) => safeEq(v, needle))),
    compact: fn(1, 1, ([l]) => list(l).filter((v) => isTrue(v))),
    sortAlpha: fn(1, 1, ([l]) => list(l).map(strval).sort()),
    // dicts
    dict: fn(0, Infinity, (a) => {
      const out: Record<string, unknown> = {};
      for (let i = 0; i < a.length; i += 2) out[strval(a[i])] = i + 1 < a.length ? a[i + 1] : "";
      return out;
    }),
    get: fn(2, 2, ([d, k]) => mapGet(dictOf(d), strval(k)) ?? ""),
    set: fn(3, 3, ([d, k, v]) => {
      dictOf(d)[strval(k)] = v;
      return d;
    }),
    unset: fn(2, 2, ([d, k]) => {
      delete dictOf(d)[strval(k)];
      return d;
    }),
    hasKey: fn(2, 2, ([d, k]) => Object.hasOwn(dictOf(d), strval(k))),
    keys: fn(0, Infinity, (a) => a.flatMap((d) => mapEntries(dictOf(d)).map(([k]) => k))),
    values: fn(1, 1, ([d]) => mapEntries(dictOf(d)).map(([, v]) => v)),
    pick: fn(1, Infinity, ([d, ...ks]) =>
      Object.fromEntries(
        ks
          .map(strval)
          .filter((k) => Object.hasOwn(dictOf(d), k))
          .map((k) => [k, dictOf(d)[k]]),
      ),
    ),
    omit: fn(1, Infinity, ([d, ...ks]) => Object.fromEntries(Object.entries(dictOf(d)).filter(([k]) => !ks.map(strval).includes(k)))),
    // encodings, regex, types, env
    b64enc: fn(1, 1, ([s]) => Buffer.from(strval(s)).toString("base64")),
    b64dec: fn(1, 1, ([s]) => Buffer.from(strval(s), "base64").toString()),
    sha256sum: fn(1, 1, ([s]) => createHash("sha256").update(strval(s)).digest("hex")),
    regexMatch: fn(2, 2, ([r, s]) => regex(r).test(strval(s))),
    regexFind: fn(2, 2, ([r, s]) => strval(s).match(regex(r))?.[0] ?? ""),
    regexFindAll: fn(3, 3, ([r, s, n]) => {
      const all = strval(s).match(regex(r)) ?? [];
      return toInt(n) < 0 ? all : all.slice(0, toInt(n));
    }),
    regexReplaceAll: fn(3, 3, ([r, s, repl]) =>
      strval(s).replace(
        regex(r),
        strval(repl)
          .replace(/\$\{?(\w+)\}?/g, "$$<$1>")
          .replace(/\$<(\d+)>/g, "$$$1"),
      ),
    ),
    regexReplaceAllLiteral: fn(3, 3, ([r, s, repl]) => strval(s).replace(regex(r), () => strval(repl))),
    regexSplit: fn(3, 3, ([r, s, n]) => {
      const parts = strval(s).split(regex(r));
      return toInt(n) < 0 ? parts : parts.slice(0, toInt(n));
    }),
    typeOf: fn(1, 1, ([v]) => goTypeOf(v)),
    typeIs: fn(2, 2, ([t, v]) => goTypeOf(v) === strval(t)),
    kindOf: fn(1, 1, ([v]) => goKindOf(v)),
    kindIs: fn(2, 2, ([k, v]) => goKindOf(v) === strval(k)),
    deepEqual: fn(2, 2, ([a, b]) => goJsonMarshal(a) === goJsonMarshal(b)),
    env: fn(1, 1, ([k]) => env[strval(k)] ?? ""),
    expandenv: fn(1, 1, ([s]) => strval(s).replace(/\$\{(\w+)\}|\$(\w+)/g, (_m, a, b) => env[a ?? b] ?? "")),
  };
}

function trimChars(s: string, cutset: string): string {
  const set = new Set(cutset);
  const chars = [...s];
  let i = 0;
  let j = chars.length;
  while (i < j && set.has(chars[i]!)) i++;
  while (j > i && set.has(chars[j - 1]!)) j--;
  return chars.slice(i, j).join("");
}

function safeEq(a: unknown, b: unknown): boolean {
  try {
    return goEq(a, b);
  } catch {
    return false;
  }
}
