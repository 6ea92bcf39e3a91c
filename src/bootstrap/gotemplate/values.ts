// How JavaScript values stand for Go values inside the template engine, and the Go rules that
// depend on the kind of a value: truthiness, printing (fmt's %v), ordering of map keys.
//
//   undefined            an invalid reflect.Value (a missing map key): prints "<no value>"
//   null                 a nil interface/pointer: prints "<nil>"
//   boolean, string      bool, string
//   number               an int when integral, else a float64 (wrap in GoFloat to force float64)
//   bigint               an int64 beyond 2^53
//   GoFloat              an explicit float64 (e.g. the literal 1.0, or numbers decoded from JSON)
//   GoStringer           a value with a String() method, such as time.Duration (kind int)
//   Array                a slice
//   Map / plain object   a map (keys printed and ranged in sorted order)
//   GoStruct             a struct or pointer to struct (field order kept; missing field = error)

import { ExecFault } from "./errors.ts";

export class GoFloat {
  constructor(readonly value: number) {}
}

/** An integer-kinded value printed through a String() method (time.Duration and friends). */
export class GoStringer {
  constructor(
    readonly value: number,
    readonly text: string,
  ) {}
  toString(): string {
    return this.text;
  }
}

export class GoStruct {
  /**
   * @param typeName Go type for messages (`*v1alpha1.ProxyConfig`)
   * @param fields Go field name -> value, in declaration order
   * @param zeroFields fields that exist on the Go type but are unset here, with their zero value
   * @param pointer prints as `&{...}` like a pointer to struct
   * @param json JSON form for json.Marshal (key order kept); defaults to the fields
   */
  constructor(
    readonly typeName: string,
    readonly fields: Record<string, unknown>,
    readonly zeroFields: Record<string, unknown> = {},
    readonly pointer = false,
    readonly json?: unknown,
  ) {}
  has(name: string): boolean {
    return Object.hasOwn(this.fields, name) || Object.hasOwn(this.zeroFields, name);
  }
  get(name: string): unknown {
    if (Object.hasOwn(this.fields, name)) return this.fields[name];
    return this.zeroFields[name];
  }
}

export type Kind = "invalid" | "nil" | "bool" | "int" | "float" | "string" | "slice" | "map" | "struct";

export function kindOf(v: unknown): Kind {
  if (v === undefined) return "invalid";
  if (v === null) return "nil";
  switch (typeof v) {
    case "boolean":
      return "bool";
    case "string":
      return "string";
    case "number":
      return Number.isInteger(v) ? "int" : "float";
    case "bigint":
      return "int";
  }
  if (v instanceof GoFloat) return "float";
  if (v instanceof GoStringer) return "int";
  if (Array.isArray(v) || v instanceof Uint8Array) return "slice";
  if (v instanceof GoStruct) return "struct";
  if (v instanceof Map || isPlainObject(v)) return "map";
  return "struct";
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Go type name used in error messages. */
export function typeName(v: unknown): string {
  switch (kindOf(v)) {
    case "invalid":
      return "<nil>";
    case "nil":
      return "interface {}";
    case "bool":
      return "bool";
    case "string":
      return "string";
    case "int":
      return v instanceof GoStringer ? "time.Duration" : "int";
    case "float":
      return "float64";
    case "slice":
      return "[]interface {}";
    case "map":
      return "map[string]interface {}";
    case "struct":
      return v instanceof GoStruct ? v.typeName : "struct";
  }
}

export function numberValue(v: unknown): number {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  if (v instanceof GoFloat || v instanceof GoStringer) return v.value;
  throw new ExecFault(`expected a number, got ${typeName(v)}`);
}

/** Map entries in Go's order (fmt and range sort keys: numbers numerically, strings bytewise). */
export function mapEntries(m: unknown): [unknown, unknown][] {
  const entries: [unknown, unknown][] = m instanceof Map ? [...m.entries()] : Object.entries(m as object);
  return entries.sort(([a], [b]) => compareKeys(a, b));
}

function compareKeys(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return compareStrings(String(a), String(b));
}

/** Byte-wise (UTF-8) string comparison, which equals code point order. */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

export function mapSize(m: unknown): number {
  return m instanceof Map ? m.size : Object.keys(m as object).length;
}

export function mapGet(m: unknown, key: unknown): unknown {
  if (m instanceof Map) return m.get(key);
  return Object.hasOwn(m as object, String(key)) ? (m as Record<string, unknown>)[String(key)] : undefined;
}

/** text/template's IsTrue: the empty values of each kind are false; structs are always true. */
export function isTrue(v: unknown): boolean {
  switch (kindOf(v)) {
    case "invalid":
    case "nil":
      return false;
    case "bool":
      return v as boolean;
    case "string":
      return (v as string).length > 0;
    case "int":
    case "float":
      return numberValue(v) !== 0;
    case "slice":
      return (v as unknown[]).length > 0;
    case "map":
      return mapSize(v) > 0;
    case "struct":
      return true;
  }
}

/** strconv.FormatFloat(f, 'g', -1, 64), which is what fmt's %v prints for a float64. */
export function formatGoFloat(f: number): string {
  if (Number.isNaN(f)) return "NaN";
  if (f === Infinity) return "+Inf";
  if (f === -Infinity) return "-Inf";
  if (f === 0) return Object.is(f, -0) ? "-0" : "0";
  const [mant, expText] = f.toExponential().split("e") as [string, string];
  const exp = Number(expText);
  if (exp < -4 || exp >= 6) return `${mant}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  return String(f);
}

/** fmt's %v for one value; `top` is true for the value of an action (invalid -> "<no value>"). */
export function formatValue(v: unknown, top = true): string {
  switch (kindOf(v)) {
    case "invalid":
      return top ? "<no value>" : "<nil>";
    case "nil":
      return "<nil>";
    case "bool":
    case "string":
      return String(v);
    case "int":
      return v instanceof GoStringer ? v.text : String(v);
    case "float":
      return formatGoFloat(numberValue(v));
    case "slice":
      if (v instanceof Uint8Array) return `[${[...v].join(" ")}]`;
      return `[${(v as unknown[]).map((x) => formatValue(x, false)).join(" ")}]`;
    case "map":
      return `map[${mapEntries(v)
        .map(([k, x]) => `${formatValue(k, false)}:${formatValue(x, false)}`)
        .join(" ")}]`;
    case "struct": {
      if (!(v instanceof GoStruct)) return String(v);
      const inner = Object.keys({ ...v.zeroFields, ...v.fields }).map((k) => formatValue(v.get(k), false));
      return `${v.pointer ? "&" : ""}{${inner.join(" ")}}`;
    }
  }
}
