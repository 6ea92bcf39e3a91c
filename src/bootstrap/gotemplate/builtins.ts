// text/template's predefined functions with Go's semantics and error messages: and, or (short-
// circuit, handled by the executor), not, eq/ne/lt/le/gt/ge, len, index, slice, print, printf,
// println, js, html, urlquery, call.

import { ExecFault } from "./errors.ts";
import { sprint, sprintf, sprintln } from "./fmt.ts";
import { isGoPrintable } from "../../lib/strconv.ts";
import { isTrue, kindOf, mapGet, mapSize, numberValue, typeName, type Kind } from "./values.ts";

export interface TemplateFunc {
  min: number;
  max: number;
  call: (args: unknown[]) => unknown;
}

export type FuncMap = Record<string, TemplateFunc>;

export function fn(min: number, max: number, call: (args: unknown[]) => unknown): TemplateFunc {
  return { min, max, call };
}

type BasicKind = "bool" | "int" | "float" | "string" | "other";
function basicKind(v: unknown): BasicKind {
  const k: Kind = kindOf(v);
  return k === "bool" || k === "int" || k === "float" || k === "string" ? k : "other";
}
const isNilish = (v: unknown) => v === undefined || v === null;

function scalar(v: unknown): unknown {
  return kindOf(v) === "int" || kindOf(v) === "float" ? numberValue(v) : v;
}

export function goEq(a: unknown, ...bs: unknown[]): boolean {
  if (bs.length === 0) throw new ExecFault("missing argument for comparison");
  const k1 = basicKind(a);
  for (const b of bs) {
    const k2 = basicKind(b);
    let truth = false;
    if (k1 !== k2) {
      if (!isNilish(a) && !isNilish(b)) throw new ExecFault("incompatible types for comparison");
    } else if (k1 !== "other") {
      truth = scalar(a) === scalar(b);
    } else if (isNilish(a) || isNilish(b)) {
      truth = isNilish(a) === isNilish(b);
    } else if (kindOf(a) === "slice" || kindOf(a) === "map" || kindOf(b) === "slice" || kindOf(b) === "map") {
      throw new ExecFault(`non-comparable types ${typeName(a)}: ${typeName(b)}`);
    } else {
      truth = a === b;
    }
    if (truth) return true;
  }
  return false;
}

export function goLt(a: unknown, b: unknown): boolean {
  const k1 = basicKind(a);
  const k2 = basicKind(b);
  if (k1 === "other" || k1 === "bool" || k2 === "other" || k2 === "bool") throw new ExecFault("invalid type for comparison");
  if (k1 !== k2) throw new ExecFault("incompatible types for comparison");
  if (k1 === "string") return (a as string) < (b as string);
  return numberValue(a) < numberValue(b);
}

function utf8Len(s: string): number {
  return new TextEncoder().encode(s).length;
}

export function goLen(v: unknown): number {
  switch (kindOf(v)) {
    case "string":
      return utf8Len(v as string);
    case "slice":
      return (v as unknown[]).length;
    case "map":
      return mapSize(v);
    case "invalid":
    case "nil":
      throw new ExecFault("len of nil pointer");
    default:
      throw new ExecFault(`len of type ${typeName(v)}`);
  }
}

function indexArg(i: unknown, cap: number): number {
  if (kindOf(i) !== "int") throw new ExecFault(`cannot index slice/array with type ${typeName(i)}`);
  const n = numberValue(i);
  if (n < 0 || n >= cap) throw new ExecFault(`index out of range: ${n}`);
  return n;
}

export function goIndex(item: unknown, ...indexes: unknown[]): unknown {
  let v = item;
  for (const i of indexes) {
    switch (kindOf(v)) {
      case "invalid":
      case "nil":
        throw new ExecFault("index of untyped nil");
      case "slice":
        v = (v as unknown[])[indexArg(i, (v as unknown[]).length)];
        break;
      case "string": {
        const bytes = new TextEncoder().encode(v as string);
        v = bytes[indexArg(i, bytes.length)];
        break;
      }
      case "map": {
        if (v instanceof Map) v = v.has(i) ? v.get(i) : null;
        else {
          if (kindOf(i) !== "string") throw new ExecFault(`value has type ${typeName(i)}; should be string`);
          const got = mapGet(v, i);
          v = got === undefined ? null : got;
        }
        break;
      }
      default:
        throw new ExecFault(`can't index item of type ${typeName(v)}`);
    }
  }
  return v;
}

export function goSlice(item: unknown, ...indexes: unknown[]): unknown {
  const k = kindOf(item);
  if (k !== "string" && k !== "slice") {
    if (k === "invalid" || k === "nil") throw new ExecFault("slice of untyped nil");
    throw new ExecFault(`can't slice item of type ${typeName(item)}`);
  }
  if (indexes.length > 3) throw new ExecFault(`too many slice indexes: ${indexes.length}`);
  if (k === "string" && indexes.length === 3) throw new ExecFault("cannot 3-index slice a string");
  const seq = k === "string" ? new TextEncoder().encode(item as string) : (item as unknown[]);
  const idx = indexes.map((i) => {
    if (kindOf(i) !== "int") throw new ExecFault(`cannot index slice/array with type ${typeName(i)}`);
    return numberValue(i);
  });
  const lo = idx[0] ?? 0;
  const hi = idx[1] ?? seq.length;
  if (lo < 0 || hi > seq.length || lo > hi) throw new ExecFault(`invalid slice index: ${lo} > ${hi}`);
  if (k === "string") return new TextDecoder().decode((seq as Uint8Array).slice(lo, hi));
  return (seq as unknown[]).slice(lo, hi);
}

/** Arguments of js/html/urlquery: one string as is, else fmt.Sprint of all. */
function evalArgs(args: unknown[]): string {
  if (args.length === 1 && typeof args[0] === "string") return args[0];
  return sprint(args.map((a) => (a === undefined ? null : a)));
}

export function jsEscape(s: string): string {
  let out = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case "\\":
        out += "\\\\";
        continue;
      case "'":
        out += "\\'";
        continue;
      case '"':
        out += '\\"';
        continue;
      case "<":
        out += "\\u003C";
        continue;
      case ">":
        out += "\\u003E";
        continue;
      case "&":
        out += "\\u0026";
        continue;
      case "=":
        out += "\\u003D";
        continue;
    }
    if (cp < 0x20) out += "\\u00" + cp.toString(16).toUpperCase().padStart(2, "0");
    else if (cp < 0x80 || isGoPrintable(cp)) out += ch;
    else out += "\\u" + cp.toString(16).toUpperCase().padStart(4, "0");
  }
  return out;
}

export function htmlEscape(s: string): string {
  return s.replace(/[&<>"'\0]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;", "\0": "\uFFFD" })[c]!);
}

export function queryEscape(s: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(s)) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9\-_.~]/.test(c)) out += c;
    else if (c === " ") out += "+";
    else out += "%" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

export function builtinFuncs(): FuncMap {
  return {
    // and/or are evaluated lazily by the executor; these entries only declare them.
    and: fn(1, Infinity, (a) => a.find((x) => !isTrue(x)) ?? a[a.length - 1]),
    or: fn(1, Infinity, (a) => a.find((x) => isTrue(x)) ?? a[a.length - 1]),
    not: fn(1, 1, ([x]) => !isTrue(x)),
    eq: fn(1, Infinity, ([a, ...b]) => goEq(a, ...b)),
    ne: fn(2, 2, ([a, b]) => !goEq(a, b)),
    lt: fn(2, 2, ([a, b]) => goLt(a, b)),
    le: fn(2, 2, ([a, b]) => goLt(a, b) || goEq(a, b)),
    gt: fn(2, 2, ([a, b]) => !goLt(a, b) && !goEq(a, b)),
    ge: fn(2, 2, ([a, b]) => !goLt(a, b)),
    len: fn(1, 1, ([x]) => goLen(x)),
    index: fn(1, Infinity, ([x, ...i]) => goIndex(x, ...i)),
    slice: fn(1, Infinity, ([x, ...i]) => goSlice(x, ...i)),
    print: fn(0, Infinity, (a) => sprint(a.map((x) => (x === undefined ? null : x)))),
    println: fn(0, Infinity, (a) => sprintln(a.map((x) => (x === undefined ? null : x)))),
    printf: fn(1, Infinity, ([f, ...a]) => {
      if (typeof f !== "string") throw new ExecFault(`wrong type for value; expected string; got ${typeName(f)}`);
      return sprintf(
        f,
        a.map((x) => (x === undefined ? null : x)),
      );
    }),
    js: fn(0, Infinity, (a) => jsEscape(evalArgs(a))),
    html: fn(0, Infinity, (a) => htmlEscape(evalArgs(a))),
    urlquery: fn(0, Infinity, (a) => queryEscape(evalArgs(a))),
    call: fn(1, Infinity, ([f, ...a]) => {
      if (typeof f !== "function") throw new ExecFault(`non-function of type ${typeName(f)}`);
      return (f as (...x: unknown[]) => unknown)(...a);
    }),
  };
}
