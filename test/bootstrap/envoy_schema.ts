// Strict validation of Envoy bootstrap JSON against envoy.config.bootstrap.v3.Bootstrap, using the
// Envoy API protos vendored in @grpc/grpc-js-xds (test only). Every key must be a field of its
// message (proto name or JSON name), every value must have the field's type, at most one field of
// a oneof may be set, and google.protobuf.Any values are resolved by their @type and validated in
// turn. Well-known types (Duration, Struct, wrappers...) use their protobuf-JSON forms.

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import protobuf from "protobufjs";

const DEPS = join(import.meta.dir, "../../node_modules/@grpc/grpc-js-xds/deps");
const DIRS = ["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((d) => join(DEPS, d));
const PBJS_GOOGLE = join(import.meta.dir, "../../node_modules/protobufjs");

/**
 * Fields newer than the vendored Envoy API (grpc-js-xds ships an older snapshot), added with
 * their upstream types so Istio's current template validates: [message, field, type, number].
 */
const NEWER_FIELDS: [string, string, string, number][] = [["envoy.config.bootstrap.v3.Bootstrap", "stats_eviction_interval", "google.protobuf.Duration", 42]];

function walk(dir: string, out: string[]): void {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith(".proto")) out.push(p);
  }
}

export class EnvoySchema {
  private readonly root = new protobuf.Root();
  private readonly index = new Map<string, string>();

  constructor() {
    this.root.resolvePath = (_origin, target) => {
      if (target.startsWith("google/protobuf/")) {
        const p = join(PBJS_GOOGLE, target);
        return existsSync(p) ? p : target;
      }
      for (const d of DIRS) {
        const p = join(d, target);
        if (existsSync(p)) return p;
      }
      return target;
    };
    // Index top-level messages by full name so Any @types can be loaded on demand.
    const files: string[] = [];
    for (const d of DIRS.slice(0, 2)) walk(d, files);
    for (const f of files) {
      const text = readFileSync(f, "utf8");
      const pkg = /^package\s+([\w.]+);/m.exec(text)?.[1];
      if (!pkg) continue;
      for (const m of text.matchAll(/^message\s+(\w+)/gm)) this.index.set(`${pkg}.${m[1]}`, f);
    }
    this.load("envoy.config.bootstrap.v3.Bootstrap");
    for (const [msg, field, type, id] of NEWER_FIELDS) {
      const t = this.root.lookupType(msg);
      if (!t.fields[field]) t.add(new protobuf.Field(field, id, type));
    }
    this.root.resolveAll();
  }

  private load(fullName: string): protobuf.Type | undefined {
    try {
      return this.root.lookupType(fullName);
    } catch {
      const file = this.index.get(fullName);
      if (!file) return undefined;
      this.root.loadSync(file, { keepCase: true });
      this.root.resolveAll();
      return this.root.lookupType(fullName);
    }
  }

  /** Problems found (empty = valid). */
  validateBootstrap(json: unknown): string[] {
    const errors: string[] = [];
    this.message(this.load("envoy.config.bootstrap.v3.Bootstrap")!, json, "", errors);
    return errors;
  }

  private message(type: protobuf.Type, v: unknown, path: string, errors: string[]): void {
    const name = type.fullName.slice(1);
    if (name.startsWith("google.protobuf.")) return this.wellKnown(name, v, path, errors);
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      errors.push(`${path || "/"}: ${name} must be a JSON object`);
      return;
    }
    const oneofs = new Map<string, string>();
    for (const [key, val] of Object.entries(v)) {
      const field = Object.values(type.fields).find((f) => f.name === key || camel(f.name) === key || f.options?.json_name === key);
      if (!field) {
        errors.push(`${path}/${key}: unknown field in ${name}`);
        continue;
      }
      if (field.partOf) {
        const prev = oneofs.get(field.partOf.name);
        if (prev) errors.push(`${path}/${key}: oneof ${field.partOf.name} already set by ${prev}`);
        oneofs.set(field.partOf.name, key);
      }
      if (val === null) continue;
      this.field(field, val, `${path}/${key}`, errors);
    }
  }

  private field(field: protobuf.Field, v: unknown, path: string, errors: string[]): void {
    field.resolve();
    if (field instanceof protobuf.MapField) {
      if (typeof v !== "object" || v === null || Array.isArray(v)) return void errors.push(`${path}: map must be an object`);
      for (const [k, x] of Object.entries(v)) this.single(field, x, `${path}/${k}`, errors);
      return;
    }
    if (field.repeated) {
      if (!Array.isArray(v)) return void errors.push(`${path}: repeated field must be an array`);
      v.forEach((x, i) => this.single(field, x, `${path}/${i}`, errors));
      return;
    }
    this.single(field, v, path, errors);
  }

  private single(field: protobuf.Field, v: unknown, path: string, errors: string[]): void {
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type) return this.message(rt, v, path, errors);
    if (rt instanceof protobuf.Enum) {
      if (typeof v === "string" ? !(v in rt.values) : !Number.isInteger(v))
        errors.push(`${path}: ${JSON.stringify(v)} is not a value of ${rt.fullName.slice(1)}`);
      return;
    }
    scalar(field.type, v, path, errors);
  }

  private wellKnown(name: string, v: unknown, path: string, errors: string[]): void {
    const bad = (want: string) => errors.push(`${path}: ${name} must be ${want}, got ${JSON.stringify(v)}`);
    switch (name) {
      case "google.protobuf.Any": {
        if (typeof v !== "object" || v === null || Array.isArray(v)) return void bad("an object");
        const { "@type": typeUrl, ...rest } = v as Record<string, unknown>;
        if (typeof typeUrl !== "string") return void errors.push(`${path}: Any without @type`);
        const target = typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
        const t = this.load(target);
        if (!t) return void errors.push(`${path}: cannot resolve Any type ${typeUrl}`);
        if (target.startsWith("google.protobuf.")) return this.wellKnown(target, rest.value, `${path}/value`, errors);
        return this.message(t, rest, path, errors);
      }
      case "google.protobuf.Struct":
        if (typeof v !== "object" || v === null || Array.isArray(v)) bad("an object");
        return;
      case "google.protobuf.ListValue":
        if (!Array.isArray(v)) bad("an array");
        return;
      case "google.protobuf.Value":
        return;
      case "google.protobuf.Duration":
        if (typeof v !== "string" || !/^-?\d+(\.\d{1,9})?s$/.test(v)) bad(`a duration string like "1.5s"`);
        return;
      case "google.protobuf.Timestamp":
      case "google.protobuf.FieldMask":
        if (typeof v !== "string") bad("a string");
        return;
      case "google.protobuf.Empty":
        if (typeof v !== "object" || v === null || Object.keys(v).length > 0) bad("{}");
        return;
    }
    const wrapped: Record<string, string> = {
      "google.protobuf.DoubleValue": "double",
      "google.protobuf.FloatValue": "float",
      "google.protobuf.Int64Value": "int64",
      "google.protobuf.UInt64Value": "uint64",
      "google.protobuf.Int32Value": "int32",
      "google.protobuf.UInt32Value": "uint32",
      "google.protobuf.BoolValue": "bool",
      "google.protobuf.StringValue": "string",
      "google.protobuf.BytesValue": "bytes",
    };
    if (wrapped[name]) return scalar(wrapped[name]!, v, path, errors);
    errors.push(`${path}: unsupported well-known type ${name}`);
  }
}

function camel(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

const INT_RANGES: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
  int64: [-(2 ** 63), 2 ** 63],
  sint64: [-(2 ** 63), 2 ** 63],
  sfixed64: [-(2 ** 63), 2 ** 63],
  uint64: [0, 2 ** 64],
  fixed64: [0, 2 ** 64],
};

function scalar(type: string, v: unknown, path: string, errors: string[]): void {
  const bad = () => errors.push(`${path}: expected ${type}, got ${JSON.stringify(v)}`);
  if (type in INT_RANGES) {
    const n = typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : v;
    const [lo, hi] = INT_RANGES[type]!;
    if (typeof n !== "number" || !Number.isInteger(n) || n < lo || n > hi) bad();
    return;
  }
  switch (type) {
    case "double":
    case "float":
      if (typeof v !== "number" && !(typeof v === "string" && /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|NaN|-?Infinity)$/.test(v))) bad();
      return;
    case "bool":
      if (typeof v !== "boolean") bad();
      return;
    case "string":
      if (typeof v !== "string") bad();
      return;
    case "bytes":
      if (typeof v !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) bad();
      return;
  }
  errors.push(`${path}: unknown scalar type ${type}`);
}
