// Byte-level protobuf editing for the few Envoy messages the Wasm conversion touches. A message is
// read as its list of top-level fields (number, wire type, raw bytes), one field is replaced or
// removed, and the list is written back: every field this code does not name — including fields
// newer than anything we know — survives byte for byte, which decoding into a minimal schema and
// re-encoding would not guarantee.

export class WireError extends Error {
  override name = "WireError";
}

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_FIXED32 = 5;

export interface WireField {
  no: number;
  wire: number;
  /** The field's payload: the varint/fixed bytes, or a length-delimited field's contents. */
  data: Uint8Array;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
const enc = new TextEncoder();

function varint(buf: Uint8Array, pos: number): [number, number] {
  let result = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (pos + i >= buf.length) throw new WireError(`truncated varint at byte ${pos}`);
    const b = buf[pos + i]!;
    if (i < 8) result += (b & 0x7f) * mul;
    mul *= 128;
    if ((b & 0x80) === 0) return [result, pos + i + 1];
  }
  throw new WireError(`varint longer than 10 bytes at byte ${pos}`);
}

/** The top-level fields of one message, in wire order. */
export function parseFields(buf: Uint8Array): WireField[] {
  const out: WireField[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const [key, p] = varint(buf, pos);
    const no = Math.floor(key / 8);
    const wire = key & 7;
    if (no === 0) throw new WireError(`field number 0 at byte ${pos}`);
    let start = p;
    let end: number;
    switch (wire) {
      case WIRE_VARINT:
        end = varint(buf, p)[1];
        break;
      case WIRE_FIXED64:
        end = p + 8;
        break;
      case WIRE_FIXED32:
        end = p + 4;
        break;
      case WIRE_LEN: {
        const [len, s] = varint(buf, p);
        start = s;
        end = s + len;
        break;
      }
      default:
        throw new WireError(`field ${no} has unsupported wire type ${wire} at byte ${pos}`);
    }
    if (end > buf.length) throw new WireError(`field ${no} runs past the end of the message at byte ${pos}`);
    out.push({ no, wire, data: buf.subarray(start, end) });
    pos = end;
  }
  return out;
}

function writeVarint(n: number, out: number[]): void {
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

/** Serialize fields back to a message. */
export function encodeFields(fields: readonly WireField[]): Uint8Array {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (const f of fields) {
    const head: number[] = [];
    writeVarint(f.no * 8 + f.wire, head);
    if (f.wire === WIRE_LEN) writeVarint(f.data.length, head);
    const h = Uint8Array.from(head);
    parts.push(h, f.data);
    total += h.length + f.data.length;
  }
  const out = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** A length-delimited field built from bytes or a string. */
export function lenField(no: number, data: Uint8Array | string): WireField {
  return { no, wire: WIRE_LEN, data: typeof data === "string" ? enc.encode(data) : data };
}

export function varintField(no: number, value: number): WireField {
  const b: number[] = [];
  writeVarint(value, b);
  return { no, wire: WIRE_VARINT, data: Uint8Array.from(b) };
}

/** The last occurrence of field `no` (protobuf: last one wins for singular fields). */
export function lastField(fields: readonly WireField[], no: number): WireField | undefined {
  for (let i = fields.length - 1; i >= 0; i--) if (fields[i]!.no === no) return fields[i];
  return undefined;
}

/**
 * Singular embedded message `no`: protobuf merges repeated occurrences of a message field, so the
 * occurrences' bytes are concatenated. Undefined when absent.
 */
export function messageField(fields: readonly WireField[], no: number): Uint8Array | undefined {
  const hits = fields.filter((f) => f.no === no);
  if (hits.length === 0) return undefined;
  for (const h of hits) if (h.wire !== WIRE_LEN) throw new WireError(`field ${no} should be a message`);
  if (hits.length === 1) return hits[0]!.data;
  return encodeConcat(hits.map((h) => h.data));
}

function encodeConcat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function stringField(fields: readonly WireField[], no: number): string | undefined {
  const f = lastField(fields, no);
  if (!f) return undefined;
  if (f.wire !== WIRE_LEN) throw new WireError(`field ${no} should be a string`);
  try {
    return utf8.decode(f.data);
  } catch {
    throw new WireError(`field ${no} is not valid UTF-8`);
  }
}

export function varintValue(fields: readonly WireField[], no: number): number | undefined {
  const f = lastField(fields, no);
  if (!f) return undefined;
  if (f.wire !== WIRE_VARINT) throw new WireError(`field ${no} should be a varint`);
  return varint(f.data, 0)[0];
}

/** Replace every occurrence of field `no` with `replacement` (placed where the first one was), or drop it. */
export function replaceField(fields: readonly WireField[], no: number, replacement: WireField | undefined): WireField[] {
  const out: WireField[] = [];
  let placed = false;
  for (const f of fields) {
    if (f.no !== no) {
      out.push(f);
      continue;
    }
    if (!placed && replacement) out.push(replacement);
    placed = true;
  }
  if (!placed && replacement) out.push(replacement);
  return out;
}

/** Remove fields matching `drop`. */
export function withoutFields(fields: readonly WireField[], drop: (f: WireField) => boolean): WireField[] {
  return fields.filter((f) => !drop(f));
}
