// Strict protobuf-JSON (Envoy's YAML/JSON form) to protobufjs objects ready to encode, walking
// the reflection types of our own minimal schemas. Unlike protobufjs' fromObject it rejects what
// it does not know — unknown fields, unknown `@type`s, enum names, wrong value kinds, two members
// of one oneof — with the path of the offending value, so a typo in a hand-written file is one
// clear line instead of a silently dropped setting. Field names may be snake_case (Envoy's docs)
// or lowerCamelCase (proto-JSON). `google.protobuf.Any` is `{"@type": <url>, ...fields}` (or
// `{"@type", "value"}` for well-known types) and is encoded here to its bytes.

import protobuf from "protobufjs";

export class ProtoJsonError extends Error {
  override name = "ProtoJsonError";
  constructor(
    /** Where in the resource, e.g. `load_assignment.endpoints[0].lb_endpoints[0]`; empty = top. */
    readonly at: string,
    readonly reason: string,
  ) {
    super(at ? `${at}: ${reason}` : reason);
  }
}

const TYPE_PREFIX = "type.googleapis.com/";
const WRAPPERS = new Set(
  ["DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue", "StringValue", "BytesValue"].map(
    (n) => `google.protobuf.${n}`,
  ),
);

type Obj = Record<string, unknown>;

function fullName(t: protobuf.ReflectionObject): string {
  return t.fullName.replace(/^\./, "");
}

function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "an object";
  return `${typeof v} ${JSON.stringify(v)}`;
}

function join(at: string, key: string): string {
  return at ? `${at}.${key}` : key;
}

function toSnake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Edit distance, for "did you mean" hints on misspelt field names. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

function suggestion(key: string, type: protobuf.Type): string {
  const k = toSnake(key);
  let best: string | undefined;
  let bestD = Infinity;
  for (const name of Object.keys(type.fields)) {
    const d = distance(k, name);
    if (d < bestD) [best, bestD] = [name, d];
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(k.length / 4)) ? ` (did you mean "${best}"?)` : "";
}

/** Converts JSON values into encodable objects for the message types of one protobufjs Root. */
export class ProtoJson {
  constructor(private readonly root: protobuf.Root) {}

  /** Encode `json` as message `typeName` (full name without leading dot). */
  encode(typeName: string, json: unknown, at = ""): Uint8Array {
    const type = this.root.lookupType(typeName);
    return type.encode(this.message(type, json, at)).finish();
  }

  /** The type named by an Any type URL, or undefined when our schemas do not have it. */
  typeForUrl(url: string): protobuf.Type | undefined {
    if (!url.startsWith(TYPE_PREFIX)) return undefined;
    const found = this.root.lookup(url.slice(TYPE_PREFIX.length));
    return found instanceof protobuf.Type ? found : undefined;
  }

  message(type: protobuf.Type, json: unknown, at: string): Obj {
    const name = fullName(type);
    if (name.startsWith("google.protobuf.")) return this.wellKnown(type, json, at);
    if (json === null || typeof json !== "object" || Array.isArray(json)) {
      throw new ProtoJsonError(at, `want an object (${name}), got ${kindOf(json)}`);
    }
    const out: Obj = {};
    const oneofSeen = new Map<string, string>();
    for (const [key, value] of Object.entries(json as Obj)) {
      const field = type.fields[key] ?? type.fields[toSnake(key)];
      if (!field) throw new ProtoJsonError(at, `unknown field "${key}" in ${name}${suggestion(key, type)}`);
      if (value === null) continue; // proto-JSON: null = default
      const fat = join(at, field.name);
      if (field.partOf) {
        const other = oneofSeen.get(field.partOf.name);
        if (other) throw new ProtoJsonError(at, `"${other}" and "${field.name}" are alternatives (oneof ${field.partOf.name}); set only one`);
        oneofSeen.set(field.partOf.name, field.name);
      }
      field.resolve();
      if (field.map) {
        if (typeof value !== "object" || Array.isArray(value)) throw new ProtoJsonError(fat, `want an object (map), got ${kindOf(value)}`);
        const m: Obj = {};
        for (const [k, v] of Object.entries(value as Obj)) m[k] = this.value(field, v, `${fat}["${k}"]`);
        out[field.name] = m;
      } else if (field.repeated) {
        if (!Array.isArray(value)) throw new ProtoJsonError(fat, `want a list, got ${kindOf(value)}`);
        out[field.name] = value.map((v, i) => this.value(field, v, `${fat}[${i}]`));
      } else {
        const v = this.value(field, value, fat);
        // Canonical proto3: a singular scalar at its default is not written (oneof members are).
        if (field.partOf || !isDefaultScalar(v)) out[field.name] = v;
      }
    }
    return out;
  }

  private value(field: protobuf.Field, v: unknown, at: string): unknown {
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type) return this.message(rt, v, at);
    if (rt instanceof protobuf.Enum) return enumValue(rt, v, at);
    return scalar(field.type, v, at);
  }

  private any(json: unknown, at: string): Obj {
    if (json === null || typeof json !== "object" || Array.isArray(json)) throw new ProtoJsonError(at, `want an object with "@type", got ${kindOf(json)}`);
    const { "@type": url, ...rest } = json as Obj;
    if (typeof url !== "string" || !url) throw new ProtoJsonError(at, `missing "@type" (e.g. "${TYPE_PREFIX}envoy.extensions.filters.http.router.v3.Router")`);
    const t = this.typeForUrl(url);
    if (!t) throw new ProtoJsonError(at, `unknown @type "${url}" (local mode encodes only the Envoy types listed in docs/local-mode.md)`);
    const inner = fullName(t).startsWith("google.protobuf.") ? (rest as Obj).value : rest;
    return { type_url: url, value: t.encode(this.message(t, inner, at)).finish() };
  }

  private wellKnown(type: protobuf.Type, json: unknown, at: string): Obj {
    const name = fullName(type);
    if (name === "google.protobuf.Any") return this.any(json, at);
    if (name === "google.protobuf.Duration") {
      if (typeof json !== "string") throw new ProtoJsonError(at, `want a duration string like "1s" or "0.250s", got ${kindOf(json)}`);
      const d = parseProtoDuration(json);
      if (!d) throw new ProtoJsonError(at, `invalid duration "${json}" (want seconds with an "s" suffix, e.g. "5s", "0.25s")`);
      return Object.fromEntries(Object.entries(d).filter(([, n]) => n !== 0));
    }
    if (WRAPPERS.has(name)) {
      const v = this.value(type.fields.value!, json, at);
      return isDefaultScalar(v) ? {} : { value: v };
    }
    if (name === "google.protobuf.Struct") {
      if (json === null || typeof json !== "object" || Array.isArray(json)) throw new ProtoJsonError(at, `want an object (Struct), got ${kindOf(json)}`);
      const fields: Obj = {};
      for (const [k, v] of Object.entries(json as Obj)) fields[k] = structValue(v);
      return { fields };
    }
    if (name === "google.protobuf.Value") return structValue(json);
    if (name === "google.protobuf.Empty") {
      if (json === null || typeof json !== "object" || Array.isArray(json) || Object.keys(json as Obj).length)
        throw new ProtoJsonError(at, "want {} (google.protobuf.Empty)");
      return {};
    }
    throw new ProtoJsonError(at, `${name} is not supported in local mode files`);
  }
}

/** A proto-JSON duration ("5s", "0.250s", "-1.5s") as Duration's seconds and nanos, exactly. */
export function parseProtoDuration(text: string): { seconds: number; nanos: number } | undefined {
  const m = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(text);
  if (!m) return undefined;
  const seconds = Number(m[2]);
  const nanos = m[3] ? Number(m[3].padEnd(9, "0")) : 0;
  if (!Number.isSafeInteger(seconds) || seconds > 315_576_000_000) return undefined;
  return m[1] ? { seconds: -seconds, nanos: -nanos } : { seconds, nanos };
}

function isDefaultScalar(v: unknown): boolean {
  return v === 0 || v === "" || v === false || (v instanceof Uint8Array && v.length === 0);
}

function structValue(v: unknown): Obj {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(structValue) } };
  const fields: Obj = {};
  for (const [k, x] of Object.entries(v as Obj)) fields[k] = structValue(x);
  return { structValue: { fields } };
}

function enumValue(e: protobuf.Enum, v: unknown, at: string): number {
  if (typeof v === "string" && v in e.values) return e.values[v]!;
  if (typeof v === "number" && Object.values(e.values).includes(v)) return v;
  throw new ProtoJsonError(at, `invalid value ${JSON.stringify(v)} for enum ${fullName(e)} (want one of ${Object.keys(e.values).join(", ")})`);
}

const INT_RANGES: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sint64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sfixed64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
  fixed64: [0, Number.MAX_SAFE_INTEGER],
};

function scalar(type: string, v: unknown, at: string): unknown {
  switch (type) {
    case "string":
      if (typeof v !== "string") throw new ProtoJsonError(at, `want a string, got ${kindOf(v)}`);
      return v;
    case "bool":
      if (typeof v !== "boolean") throw new ProtoJsonError(at, `want true or false, got ${kindOf(v)}`);
      return v;
    case "bytes":
      if (typeof v !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) throw new ProtoJsonError(at, `want base64 bytes, got ${kindOf(v)}`);
      return Buffer.from(v, "base64");
    case "double":
    case "float":
      if (typeof v === "number") return v;
      if (v === "NaN" || v === "Infinity" || v === "-Infinity") return Number(v);
      throw new ProtoJsonError(at, `want a number, got ${kindOf(v)}`);
  }
  const range = INT_RANGES[type];
  if (!range) throw new ProtoJsonError(at, `unsupported field type ${type}`);
  const n = typeof v === "number" ? v : typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n)) throw new ProtoJsonError(at, `want an integer (${type}), got ${kindOf(v)}`);
  if (n < range[0] || n > range[1]) throw new ProtoJsonError(at, `${n} is out of range for ${type}`);
  return n;
}
