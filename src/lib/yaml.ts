// YAML off the start path. The `yaml` package is loaded on first use (a synchronous require, so
// callers stay synchronous): the injector's PROXY_CONFIG is JSON, and the effective ProxyConfig
// usually prints with the small emitter below, so a typical start never evaluates the package.
//
//   parseYamlOrJson: JSON.parse when the text is a JSON object without repeated keys (then YAML
//     would give the very same value), else the YAML parser (errors and all).
//   stringifySimpleYaml: yaml's `stringify(v, { sortMapEntries: true })` output for plain data
//     (nested maps, lists of scalars, safe-integer numbers, booleans, strings that need no
//     quoting); undefined for anything else, which the caller then gives to yaml itself.
//     test/lib/yaml.test.ts holds it to yaml's output.

import type * as Yaml from "yaml";

export function yamlLib(): typeof Yaml {
  return require("yaml") as typeof Yaml;
}

/**
 * YAML 1.2 parse (`yaml.parse(text, options)`), with a JSON fast path giving the same value. With
 * `warnings`, the parser's warnings (an unresolved tag, an ambiguous alias...) are added to it, each
 * its first line, instead of going to `process.emitWarning` (stderr, outside the agent's log format).
 */
export function parseYamlOrJson(
  text: string,
  options?: Yaml.ParseOptions & Yaml.DocumentOptions & Yaml.SchemaOptions & Yaml.ToJSOptions,
  warnings?: string[],
): unknown {
  const t = text.trimStart();
  if (t.startsWith("{")) {
    let v: unknown;
    try {
      v = JSON.parse(t);
    } catch {
      v = undefined;
    }
    if (v !== null && typeof v === "object" && !Array.isArray(v) && memberCount(t) === keyCount(v)) return v;
  }
  if (!warnings) return yamlLib().parse(text, options);
  // yaml.parse() is parseDocument(), its warnings emitted, its first error thrown, then toJS().
  const doc = yamlLib().parseDocument(text, options);
  if (doc.errors.length > 0) throw doc.errors[0];
  for (const w of doc.warnings) warnings.push(w.message.split("\n")[0]!.replace(/:$/, ""));
  return doc.toJS(options);
}

/** Object members in JSON text: colons outside string literals (arrays have none). */
function memberCount(json: string): number {
  let n = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (i++; i < json.length && json.charCodeAt(i) !== 0x22; i++) if (json.charCodeAt(i) === 0x5c /* \ */) i++;
    } else if (c === 0x3a /* : */) n++;
  }
  return n;
}

/** Keys of every object in a parsed JSON value (fewer than members when a key was repeated). */
function keyCount(v: unknown): number {
  if (Array.isArray(v)) return v.reduce((s: number, x) => s + keyCount(x), 0);
  if (v === null || typeof v !== "object") return 0;
  let n = 0;
  for (const x of Object.values(v)) n += 1 + keyCount(x);
  return n;
}

// Strings yaml prints plain: no spaces, quotes or indicators, not starting with a character that
// means something at the start of a scalar, not ending in ':', and not resolvable as another type
// (YAML 1.2 core or 1.1 numbers, booleans, null).
const SAFE_STRING = /^(?:\.{1,2}\/|[A-Za-z0-9_/])[A-Za-z0-9_./:@%+=-]*$/;
const NOT_STRING =
  /^(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|0[xob][0-9a-fA-F_]+|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|null|Null|NULL)$/;
const SAFE_KEY = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

function scalar(v: unknown): string | undefined {
  if (typeof v === "boolean") return String(v);
  if (typeof v === "number") return Number.isSafeInteger(v) && !Object.is(v, -0) ? String(v) : undefined;
  if (typeof v === "string") return SAFE_STRING.test(v) && !v.endsWith(":") && !NOT_STRING.test(v) && v.length <= 60 ? v : undefined;
  return undefined;
}

function lines(map: Record<string, unknown>, indent: string, out: string[]): boolean {
  const keys = Object.keys(map).filter((k) => map[k] !== undefined);
  keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const k of keys) {
    if (!SAFE_KEY.test(k) || NOT_STRING.test(k)) return false;
    const v = map[k];
    if (Array.isArray(v)) {
      if (v.length === 0) return false;
      out.push(`${indent}${k}:`);
      for (const x of v) {
        const s = scalar(x);
        if (s === undefined) return false;
        out.push(`${indent}  - ${s}`);
      }
    } else if (v !== null && typeof v === "object") {
      if (Object.keys(v).length === 0) return false;
      out.push(`${indent}${k}:`);
      if (!lines(v as Record<string, unknown>, indent + "  ", out)) return false;
    } else {
      const s = scalar(v);
      if (s === undefined) return false;
      out.push(`${indent}${k}: ${s}`);
    }
  }
  return true;
}

/** yaml.stringify(v, { sortMapEntries: true }) for simple data (see above); undefined otherwise. */
export function stringifySimpleYaml(v: Record<string, unknown>): string | undefined {
  if (Object.keys(v).length === 0) return undefined;
  const out: string[] = [];
  return lines(v, "", out) ? out.join("\n") + "\n" : undefined;
}
