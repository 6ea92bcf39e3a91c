// google.protobuf.Struct bytes to plain JSON, read at the wire level: the value of a
// udpa.type.v1.TypedStruct (a Wasm filter written through an EnvoyFilter) is a Struct, and the
// conversion needs it as JSON to rebuild the typed Wasm message.

import { WIRE_FIXED64, WireError, lastField, parseFields, stringField, varintValue, type WireField } from "../lib/protowire.ts";

type Json = null | number | string | boolean | Json[] | { [k: string]: Json };

/** Struct nesting deeper than this is refused (a Wasm config is a few levels deep). */
const MAX_DEPTH = 64;

export function structToJson(bytes: Uint8Array, depth = 0): { [k: string]: Json } {
  if (depth > MAX_DEPTH) throw new WireError(`Struct nested deeper than ${MAX_DEPTH} levels`);
  const out: { [k: string]: Json } = {};
  for (const f of parseFields(bytes)) {
    if (f.no !== 1) continue;
    const entry = parseFields(f.data);
    const key = stringField(entry, 1) ?? "";
    const v = lastField(entry, 2);
    out[key] = v ? valueToJson(v.data, depth + 1) : null;
  }
  return out;
}

function valueToJson(bytes: Uint8Array, depth: number): Json {
  const fields = parseFields(bytes);
  const kind = fields[fields.length - 1];
  if (!kind) return null;
  switch (kind.no) {
    case 1:
      return null;
    case 2: {
      if (kind.wire !== WIRE_FIXED64) throw new WireError("Struct number_value should be a double");
      return new DataView(kind.data.buffer, kind.data.byteOffset, 8).getFloat64(0, true);
    }
    case 3:
      return stringField(fields, 3) ?? "";
    case 4:
      return (varintValue(fields, 4) ?? 0) !== 0;
    case 5:
      return structToJson(kind.data, depth);
    case 6:
      return listToJson(kind.data, depth);
    default:
      throw new WireError(`Struct value has unknown kind field ${kind.no}`);
  }
}

function listToJson(bytes: Uint8Array, depth: number): Json[] {
  if (depth > MAX_DEPTH) throw new WireError(`Struct nested deeper than ${MAX_DEPTH} levels`);
  return parseFields(bytes)
    .filter((f: WireField) => f.no === 1)
    .map((f) => valueToJson(f.data, depth + 1));
}
