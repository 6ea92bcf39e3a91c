// Go's fmt.Sprint, fmt.Sprintln and fmt.Sprintf for the values the template engine carries.
// Covers the verbs templates use (%v %s %q %d %t %x %X %o %b %c %U %f %F %e %E %g %G %%), flags
// (- + # 0 space), width and precision (including *), and Go's error forms (%!d(string=x),
// %!v(MISSING), %!(EXTRA ...)).

import { goQuote } from "../../lib/strconv.ts";
import { formatGoFloat, formatValue, GoFloat, GoStringer, kindOf, typeName } from "./values.ts";

export function sprint(args: unknown[]): string {
  let out = "";
  args.forEach((a, i) => {
    if (i > 0 && typeof a !== "string" && typeof args[i - 1] !== "string") out += " ";
    out += formatValue(a, false);
  });
  return out;
}

export function sprintln(args: unknown[]): string {
  return args.map((a) => formatValue(a, false)).join(" ") + "\n";
}

interface Spec {
  minus: boolean;
  plus: boolean;
  sharp: boolean;
  zero: boolean;
  space: boolean;
  width?: number;
  prec?: number;
}

export function sprintf(format: string, args: unknown[]): string {
  let out = "";
  let argi = 0;
  let i = 0;
  while (i < format.length) {
    const pct = format.indexOf("%", i);
    if (pct < 0) {
      out += format.slice(i);
      break;
    }
    out += format.slice(i, pct);
    i = pct + 1;
    const spec: Spec = { minus: false, plus: false, sharp: false, zero: false, space: false };
    for (; i < format.length; i++) {
      const c = format[i];
      if (c === "-") spec.minus = true;
      else if (c === "+") spec.plus = true;
      else if (c === "#") spec.sharp = true;
      else if (c === "0") spec.zero = true;
      else if (c === " ") spec.space = true;
      else break;
    }
    const readNum = (): number | undefined => {
      if (format[i] === "*") {
        i++;
        const a = args[argi++];
        return typeof a === "number" ? a : undefined;
      }
      const m = /^\d+/.exec(format.slice(i));
      if (!m) return undefined;
      i += m[0].length;
      return Number(m[0]);
    };
    spec.width = readNum();
    if (spec.width !== undefined && spec.width < 0) {
      spec.minus = true;
      spec.width = -spec.width;
    }
    if (format[i] === ".") {
      i++;
      spec.prec = readNum() ?? 0;
    }
    const verb = format[i];
    if (verb === undefined) {
      out += "%!(NOVERB)";
      break;
    }
    i++;
    if (verb === "%") {
      out += "%";
      continue;
    }
    if (argi >= args.length) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    out += formatOne(verb, args[argi++], spec);
  }
  if (argi < args.length) {
    out +=
      "%!(EXTRA " +
      args
        .slice(argi)
        .map((a) => `${typeName(a)}=${formatValue(a, false)}`)
        .join(", ") +
      ")";
  }
  return out;
}

function pad(s: string, spec: Spec, numeric = false): string {
  const w = spec.width ?? 0;
  if (s.length >= w) return s;
  if (spec.minus) return s + " ".repeat(w - s.length);
  if (spec.zero && numeric) {
    const sign = /^[+-]/.test(s) ? s[0] : "";
    return sign + "0".repeat(w - s.length) + s.slice(sign.length);
  }
  return " ".repeat(w - s.length) + s;
}

function bad(verb: string, v: unknown): string {
  if (v === undefined || v === null) return `%!${verb}(<nil>)`;
  return `%!${verb}(${typeName(v)}=${formatValue(v, false)})`;
}

function signed(s: string, neg: boolean, spec: Spec): string {
  if (neg) return "-" + s;
  if (spec.plus) return "+" + s;
  if (spec.space) return " " + s;
  return s;
}

function formatOne(verb: string, v: unknown, spec: Spec): string {
  const kind = kindOf(v);
  const asInt = (): bigint => (typeof v === "bigint" ? v : BigInt(Math.trunc(v instanceof GoStringer ? v.value : (v as number))));
  switch (verb) {
    case "v":
      if (kind === "float") return pad(floatFmt("g", num(v), spec), spec, true);
      return pad(formatValue(v, false), spec);
    case "s":
      if (kind === "string") return pad(spec.prec !== undefined ? [...(v as string)].slice(0, spec.prec).join("") : (v as string), spec);
      if (v instanceof GoStringer) return pad(v.text, spec);
      if (kind === "slice" || kind === "map") return pad(formatValue(v, false), spec);
      return bad(verb, v);
    case "q":
      if (kind === "string") return pad(spec.sharp && !(v as string).includes("`") ? "`" + v + "`" : goQuote(v as string), spec);
      if (kind === "int") return pad(quoteRune(Number(asInt())), spec);
      return bad(verb, v);
    case "t":
      return kind === "bool" ? pad(String(v), spec) : bad(verb, v);
    case "d":
    case "b":
    case "o":
    case "O":
    case "c":
    case "U":
      if (kind !== "int") return bad(verb, v);
      return intFmt(verb, asInt(), spec);
    case "x":
    case "X":
      if (kind === "int") return intFmt(verb, asInt(), spec);
      if (kind === "string") {
        const hex = [...new TextEncoder().encode(v as string)].map((b) => b.toString(16).padStart(2, "0")).join("");
        return pad(verb === "X" ? hex.toUpperCase() : hex, spec);
      }
      return bad(verb, v);
    case "e":
    case "E":
    case "f":
    case "F":
    case "g":
    case "G":
      if (kind !== "float") return bad(verb, v);
      return pad(floatFmt(verb, num(v), spec), spec, true);
  }
  return bad(verb, v);
}

function num(v: unknown): number {
  return v instanceof GoFloat ? v.value : (v as number);
}

function intFmt(verb: string, n: bigint, spec: Spec): string {
  const neg = n < 0n;
  const a = neg ? -n : n;
  let s: string;
  switch (verb) {
    case "b":
      s = a.toString(2);
      break;
    case "o":
      s = (spec.sharp ? "0" : "") + a.toString(8);
      break;
    case "O":
      s = "0o" + a.toString(8);
      break;
    case "x":
      s = (spec.sharp ? "0x" : "") + a.toString(16);
      break;
    case "X":
      s = (spec.sharp ? "0X" : "") + a.toString(16).toUpperCase();
      break;
    case "c":
      return pad(String.fromCodePoint(Number(n)), spec);
    case "U":
      return pad("U+" + a.toString(16).toUpperCase().padStart(4, "0"), spec);
    default:
      s = a.toString(10);
  }
  if (spec.prec !== undefined) s = s.padStart(spec.prec, "0");
  return pad(signed(s, neg, spec), spec, spec.prec === undefined);
}

function floatFmt(verb: string, f: number, spec: Spec): string {
  if (!Number.isFinite(f)) {
    const s = Number.isNaN(f) ? "NaN" : f > 0 ? (spec.plus ? "+Inf" : "+Inf") : "-Inf";
    return s;
  }
  const neg = f < 0 || Object.is(f, -0);
  const a = Math.abs(f);
  let s: string;
  switch (verb) {
    case "f":
    case "F":
      s = a.toFixed(spec.prec ?? 6);
      break;
    case "e":
    case "E":
      s = expFix(a.toExponential(spec.prec ?? 6));
      break;
    default:
      if (spec.prec === undefined) s = formatGoFloat(a);
      else {
        const p = spec.prec === 0 ? 1 : spec.prec;
        const [, expText] = a.toExponential(p - 1).split("e") as [string, string];
        const exp = Number(expText);
        s = exp < -4 || exp >= p ? expFix(a.toExponential(p - 1)) : a.toFixed(Math.max(0, p - 1 - exp));
        if (!spec.sharp && s.includes(".") && !s.includes("e")) s = s.replace(/\.?0+$/, "");
        if (!spec.sharp && s.includes("e")) s = s.replace(/\.?0+e/, "e");
      }
  }
  if (verb === "E" || verb === "G") s = s.toUpperCase();
  return signed(s, neg, spec);
}

/** JS writes e+5, Go writes e+05. */
function expFix(s: string): string {
  return s.replace(/e([+-])(\d)$/, "e$10$2");
}

function quoteRune(cp: number): string {
  const ch = String.fromCodePoint(cp);
  if (ch === "'") return "'\\''";
  const q = goQuote(ch);
  return "'" + q.slice(1, -1).replace(/\\"/g, '"') + "'";
}
