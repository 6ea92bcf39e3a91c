// Go's encoding/json Marshal for the values the agent handles: maps with sorted keys, structs in
// field order (GoStruct), HTML-safe string escaping (<, >, & and U+2028/2029 as \u escapes),
// float64 formatting (which matches JavaScript's for JSON), nil as null.

import { GoFloat, GoStringer, GoStruct, isPlainObject, mapEntries } from "./values.ts";

export class JsonMarshalError extends Error {
  override name = "JsonMarshalError";
}

export function goJsonString(s: string): string {
  return JSON.stringify(s)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** json.Marshal(v), compact. */
export function goJsonMarshal(v: unknown): string {
  if (v === undefined || v === null) return "null";
  switch (typeof v) {
    case "string":
      return goJsonString(v);
    case "boolean":
      return String(v);
    case "number":
      if (!Number.isFinite(v)) throw new JsonMarshalError(`json: unsupported value: ${v}`);
      return JSON.stringify(v);
    case "bigint":
      return v.toString();
  }
  if (v instanceof GoFloat) return goJsonMarshal(v.value);
  if (v instanceof GoStringer) return String(v.value);
  if (v instanceof Uint8Array) return goJsonString(Buffer.from(v).toString("base64"));
  if (Array.isArray(v)) return "[" + v.map(goJsonMarshal).join(",") + "]";
  if (v instanceof GoStruct) {
    if (v.json !== undefined) return marshalOrdered(v.json);
    return marshalOrdered(v.fields);
  }
  if (v instanceof Map || isPlainObject(v)) {
    return (
      "{" +
      mapEntries(v)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => goJsonString(String(k)) + ":" + goJsonMarshal(x))
        .join(",") +
      "}"
    );
  }
  throw new JsonMarshalError(`json: unsupported type ${Object.prototype.toString.call(v)}`);
}

/** An object whose key order is meaningful (a struct's JSON form): keys kept in insertion order. */
function marshalOrdered(o: unknown): string {
  if (!isPlainObject(o)) return goJsonMarshal(o);
  return (
    "{" +
    Object.entries(o)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => goJsonString(k) + ":" + goJsonMarshal(x))
      .join(",") +
    "}"
  );
}

/** json.MarshalIndent(v, prefix "", indent) of already-marshalled compact JSON text. */
export function goJsonIndent(compact: string, indent = "  "): string {
  let out = "";
  let depth = 0;
  let inStr = false;
  for (let i = 0; i < compact.length; i++) {
    const c = compact[i]!;
    if (inStr) {
      out += c;
      if (c === "\\") out += compact[++i]!;
      else if (c === '"') inStr = false;
      continue;
    }
    switch (c) {
      case '"':
        inStr = true;
        out += c;
        break;
      case "{":
      case "[": {
        const close = c === "{" ? "}" : "]";
        if (compact[i + 1] === close) {
          out += c + close;
          i++;
          break;
        }
        depth++;
        out += c + "\n" + indent.repeat(depth);
        break;
      }
      case "}":
      case "]":
        depth--;
        out += "\n" + indent.repeat(depth) + c;
        break;
      case ",":
        out += ",\n" + indent.repeat(depth);
        break;
      case ":":
        out += ": ";
        break;
      default:
        out += c;
    }
  }
  return out;
}
