// Protobuf at the wire level, without a schema library: a message is read as its list of
// top-level fields (number, wire type, raw bytes) and written back from such a list or field by
// field. Shared by the Wasm conversion (which edits one field and keeps every other byte for
// byte, including fields newer than anything we know), the CA client and the SDS server (which
// read and write their few messages here, so they load no protobuf schema at all).
// Every length is checked against the message it came from: nothing here allocates more than the
// input it was given (or the output it was asked to write).

export class WireError extends Error {
  override name = "WireError";
}

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_START_GROUP = 3;
export const WIRE_END_GROUP = 4;
export const WIRE_FIXED32 = 5;

/** The largest field number protobuf allows (2^29 - 1). */
export const MAX_FIELD_NUMBER = 536_870_911;
/** How deeply (deprecated) groups may nest in a field we skip: protobuf's own recursion limit is of this order. */
const MAX_GROUP_DEPTH = 100;

export interface WireField {
  no: number;
  wire: number;
  /** The field's payload: the varint/fixed bytes, or a length-delimited field's contents. */
  data: Uint8Array;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const enc = new TextEncoder();

/**
 * The varint at `pos`: [value, the position after it]. Values past 2^53 lose their low bits (the
 * callers read lengths, tags and small numbers; int32Value reads the low 32 bits exactly). At most
 * 10 bytes, the 10th carrying only the 64th bit, as protobuf's own readers require.
 */
export function readVarint(buf: Uint8Array, pos: number): [number, number] {
  let result = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (pos + i >= buf.length) throw new WireError(`truncated varint at byte ${pos}`);
    const b = buf[pos + i]!;
    if (i === 9 && b > 1) throw new WireError(`varint overflows 64 bits at byte ${pos}`);
    if (i < 8) result += (b & 0x7f) * mul;
    mul *= 128;
    if ((b & 0x80) === 0) return [result, pos + i + 1];
  }
  throw new WireError(`varint longer than 10 bytes at byte ${pos}`);
}

const varint = readVarint;

/** The end of the group field `no` whose contents start at `pos`: [contents end, position after the end tag]. */
function groupEnd(buf: Uint8Array, no: number, pos: number): [number, number] {
  const open: number[] = [no];
  let p = pos;
  while (p < buf.length) {
    const tagAt = p;
    const [key, q] = varint(buf, p);
    const n = Math.floor(key / 8);
    const wire = key % 8;
    if (n === 0 || n > MAX_FIELD_NUMBER) throw new WireError(`field number ${n} out of range at byte ${tagAt}`);
    switch (wire) {
      case WIRE_VARINT:
        p = varint(buf, q)[1];
        break;
      case WIRE_FIXED64:
        p = q + 8;
        break;
      case WIRE_FIXED32:
        p = q + 4;
        break;
      case WIRE_LEN: {
        const [len, s] = varint(buf, q);
        p = s + len;
        break;
      }
      case WIRE_START_GROUP:
        if (open.length >= MAX_GROUP_DEPTH) throw new WireError(`groups nested deeper than ${MAX_GROUP_DEPTH} at byte ${tagAt}`);
        open.push(n);
        p = q;
        break;
      case WIRE_END_GROUP:
        if (open.pop() !== n) throw new WireError(`end of group ${n} does not match its start at byte ${tagAt}`);
        if (open.length === 0) return [tagAt, q];
        p = q;
        break;
      default:
        throw new WireError(`field ${n} has invalid wire type ${wire} at byte ${tagAt}`);
    }
    if (p > buf.length) throw new WireError(`field ${n} runs past the end of the message at byte ${tagAt}`);
  }
  throw new WireError(`group ${no} is not closed before the end of the message`);
}

/**
 * The top-level fields of one message, in wire order. A (deprecated) group's data is its contents
 * without the end tag. Refused with a WireError naming the problem and its byte: a truncated or
 * over-long varint, a field number of 0 or past 2^29 - 1, a wire type 6 or 7 or a stray end-group,
 * a length past the end of the message, an unclosed group.
 */
export function parseFields(buf: Uint8Array): WireField[] {
  const out: WireField[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const [key, p] = varint(buf, pos);
    const no = Math.floor(key / 8);
    const wire = key % 8;
    if (no === 0 || no > MAX_FIELD_NUMBER) throw new WireError(`field number ${no} out of range at byte ${pos}`);
    let start = p;
    let end: number;
    let next: number | undefined;
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
      case WIRE_START_GROUP:
        [end, next] = groupEnd(buf, no, p);
        break;
      default:
        throw new WireError(`field ${no} has ${wire === WIRE_END_GROUP ? "an end-group tag without its start" : `invalid wire type ${wire}`} at byte ${pos}`);
    }
    if (end > buf.length) throw new WireError(`field ${no} runs past the end of the message at byte ${pos}`);
    out.push({ no, wire, data: buf.subarray(start, end) });
    pos = next ?? end;
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
    if (f.wire === WIRE_START_GROUP) {
      const tail: number[] = [];
      writeVarint(f.no * 8 + WIRE_END_GROUP, tail);
      const t = Uint8Array.from(tail);
      parts.push(t);
      total += t.length;
    }
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

/**
 * A varint field read as int32: protobuf writes a negative int32 as a 10-byte varint of its 64-bit
 * sign extension, and readers keep the low 32 bits (read here exactly, from the first 5 bytes).
 */
export function int32Of(f: WireField): number {
  if (f.wire !== WIRE_VARINT) throw new WireError(`field ${f.no} should be a varint`);
  let low = 0;
  for (let i = 0; i < 5 && i < f.data.length; i++) low += (f.data[i]! & 0x7f) * 2 ** (7 * i);
  return (low % 2 ** 32) | 0;
}

/** A varint's length in bytes. */
function varintSize(n: number): number {
  let size = 1;
  for (let v = n; v >= 0x80; v = Math.floor(v / 0x80)) size++;
  return size;
}

function putVarint(out: Uint8Array, pos: number, n: number): number {
  let v = n;
  let p = pos;
  while (v >= 0x80) {
    out[p++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[p++] = v;
  return p;
}

/**
 * A message written field by field, with its length-delimited fields (strings, bytes, embedded
 * messages) kept as views until finish() copies everything once into a buffer of the exact size.
 */
export class MessageWriter {
  private readonly heads: number[] = [];
  private readonly bodies: (Uint8Array | MessageWriter)[] = [];
  /** Each body's length when it was added (a nested writer must not change afterwards). */
  private readonly lengths: number[] = [];
  private total = 0;

  /** Length-delimited field `no` with these bytes (a string is UTF-8 encoded). */
  bytes(no: number, data: Uint8Array | string): this {
    return this.add(no, typeof data === "string" ? Buffer.from(data, "utf8") : data);
  }

  /**
   * Embedded message field `no`, complete when added (written even when empty: presence is what a
   * oneof member says).
   */
  message(no: number, m: MessageWriter): this {
    return this.add(no, m);
  }

  /** The encoded length so far. */
  get length(): number {
    return this.total;
  }

  private add(no: number, body: Uint8Array | MessageWriter): this {
    const tag = no * 8 + WIRE_LEN;
    this.heads.push(tag);
    this.bodies.push(body);
    this.lengths.push(body.length);
    this.total += varintSize(tag) + varintSize(body.length) + body.length;
    return this;
  }

  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.total);
    const end = this.writeTo(out, 0);
    if (end !== out.length) throw new WireError(`message writer miscounted: ${end} of ${out.length} bytes`);
    return out;
  }

  private writeTo(out: Uint8Array, pos: number): number {
    let p = pos;
    for (let i = 0; i < this.heads.length; i++) {
      const body = this.bodies[i]!;
      if (body.length !== this.lengths[i]) throw new WireError(`message writer miscounted: field ${Math.floor(this.heads[i]! / 8)} changed after it was added`);
      p = putVarint(out, p, this.heads[i]!);
      p = putVarint(out, p, body.length);
      if (body instanceof MessageWriter) p = body.writeTo(out, p);
      else {
        out.set(body, p);
        p += body.length;
      }
    }
    return p;
  }
}
