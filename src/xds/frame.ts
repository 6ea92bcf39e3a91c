// The relay's protobuf wire-format scanner. It reads only the top-level fields the relay routes
// on and never decodes resources:
//   - responses: the first resource's Any.type_url (it comes early on the wire: resources are field
//     2, the response's own type_url is field 4 and is written after every resource), falling back
//     to field 4 when there is no resource; Delta resources wrap the Any in a Resource (field 2);
//   - requests: type_url (SotW field 4, Delta field 2), on whole (small) messages.
// Every function works on a prefix of a message and says "need more bytes" (null) instead of
// guessing, so the relay can decide while a large message is still arriving. Malformed input
// raises FrameError naming what is wrong and where.

export class FrameError extends Error {
  override name = "FrameError";
  constructor(
    message: string,
    readonly offset: number,
    options?: ErrorOptions,
  ) {
    super(`${message} at byte ${offset}`, options);
  }
}

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LEN = 2;
const WIRE_FIXED32 = 5;

/** Cursor result of reading one field header; `next` = -1 means the prefix ends inside it. */
interface Field {
  no: number;
  wire: number;
  /** For length-delimited fields: where the payload starts and its length. */
  start: number;
  len: number;
  /** Offset just after the whole field (may lie beyond the available prefix). */
  end: number;
}

const utf8 = new TextDecoder("utf-8");

/** Read a varint at `pos`; returns [value, nextPos] or null when the prefix ends inside it. */
export function readVarint(buf: Uint8Array, pos: number, limit: number): [number, number] | null {
  let result = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (pos + i >= limit) return null;
    const b = buf[pos + i]!;
    if (i < 8) result += (b & 0x7f) * mul;
    mul *= 128;
    if ((b & 0x80) === 0) {
      if (i === 9 && b > 1) throw new FrameError("varint overflows 64 bits", pos);
      return [result, pos + i + 1];
    }
  }
  throw new FrameError("varint longer than 10 bytes", pos);
}

/**
 * Read the field starting at `pos` of a message spanning [.., msgEnd) of which bytes up to
 * `avail` are present. Returns null when more bytes are needed to know where the field ends.
 */
function readField(buf: Uint8Array, pos: number, avail: number, msgEnd: number): Field | null {
  const tag = readVarint(buf, pos, Math.min(avail, msgEnd));
  if (!tag) {
    if (avail >= msgEnd) throw new FrameError("truncated field tag", pos);
    return null;
  }
  const [key, p] = tag;
  const no = Math.floor(key / 8);
  const wire = key & 7;
  if (no === 0) throw new FrameError("field number 0", pos);
  switch (wire) {
    case WIRE_VARINT: {
      const v = readVarint(buf, p, Math.min(avail, msgEnd));
      if (!v) {
        if (avail >= msgEnd) throw new FrameError(`truncated varint in field ${no}`, p);
        return null;
      }
      return { no, wire, start: p, len: v[1] - p, end: v[1] };
    }
    case WIRE_FIXED64:
    case WIRE_FIXED32: {
      const n = wire === WIRE_FIXED64 ? 8 : 4;
      if (p + n > msgEnd) throw new FrameError(`fixed field ${no} runs past the message end`, p);
      return { no, wire, start: p, len: n, end: p + n };
    }
    case WIRE_LEN: {
      const l = readVarint(buf, p, Math.min(avail, msgEnd));
      if (!l) {
        if (avail >= msgEnd) throw new FrameError(`truncated length of field ${no}`, p);
        return null;
      }
      const [len, start] = l;
      if (start + len > msgEnd) throw new FrameError(`field ${no} length ${len} runs past the message end`, p);
      return { no, wire, start, len, end: start + len };
    }
    default:
      throw new FrameError(`field ${no} has unsupported wire type ${wire}`, pos);
  }
}

/** Decoded string of a length-delimited field, or null if its bytes are not all present yet. */
function stringOf(buf: Uint8Array, f: Field, avail: number): string | null {
  if (f.wire !== WIRE_LEN) throw new FrameError(`field ${f.no} should be a string`, f.start);
  if (f.end > avail) return null;
  return utf8.decode(buf.subarray(f.start, f.end));
}

/**
 * Find string field `want` inside the message spanning [from, to); bytes up to `avail` present.
 * Returns the string, "" when the (complete) message has no such field, or null for "need more".
 */
function findString(buf: Uint8Array, from: number, to: number, avail: number, want: number): string | null {
  let pos = from;
  while (pos < to) {
    if (pos >= avail) return null;
    const f = readField(buf, pos, avail, to);
    if (!f) return null;
    if (f.no === want) return stringOf(buf, f, avail);
    pos = f.end;
  }
  return "";
}

/** Type URL of an Any spanning [from, to), "" if absent, null if more bytes are needed. */
function anyTypeUrl(buf: Uint8Array, from: number, to: number, avail: number): string | null {
  return findString(buf, from, to, avail, 1);
}

/** Type URL of the Any inside a Delta Resource spanning [from, to). */
function deltaResourceTypeUrl(buf: Uint8Array, from: number, to: number, avail: number): string | null {
  let pos = from;
  while (pos < to) {
    if (pos >= avail) return null;
    const f = readField(buf, pos, avail, to);
    if (!f) return null;
    if (f.no === 2) {
      if (f.wire !== WIRE_LEN) throw new FrameError("Resource.resource should be a message", f.start);
      return anyTypeUrl(buf, f.start, f.end, avail);
    }
    pos = f.end;
  }
  return "";
}

/**
 * The type a DiscoveryResponse (or DeltaDiscoveryResponse when `delta`) carries, decided from the
 * first `avail` bytes of a message `total` bytes long: the first resource's Any.type_url, or the
 * response's type_url (field 4) when that comes first or there is no typed resource.
 * Returns null while more bytes are needed; "" for a complete message naming no type at all.
 */
export function peekResponseType(buf: Uint8Array, avail: number, total: number, delta: boolean): string | null {
  avail = Math.min(avail, total);
  let pos = 0;
  let firstResourceSeen = false;
  while (pos < total) {
    if (pos >= avail) return null;
    const f = readField(buf, pos, avail, total);
    if (!f) return null;
    if (f.no === 4) {
      const s = stringOf(buf, f, avail);
      if (s === null) return null;
      return s;
    }
    if (f.no === 2 && !firstResourceSeen) {
      if (f.wire !== WIRE_LEN) throw new FrameError("resources should be messages", f.start);
      const t = delta ? deltaResourceTypeUrl(buf, f.start, f.end, avail) : anyTypeUrl(buf, f.start, f.end, avail);
      if (t === null) return null;
      if (t !== "") return t;
      firstResourceSeen = true; // an untyped first resource: fall back to field 4
    }
    pos = f.end;
  }
  return "";
}

/** What the relay learns from a whole request message: its type_url (SotW field 4, Delta field 2). */
export function requestTypeUrl(msg: Uint8Array, delta: boolean): string {
  const want = delta ? 2 : 4;
  let pos = 0;
  let typeUrl = "";
  while (pos < msg.length) {
    const f = readField(msg, pos, msg.length, msg.length)!;
    if (f.no === want) typeUrl = stringOf(msg, f, msg.length)!;
    pos = f.end;
  }
  return typeUrl;
}

/** Walk every top-level field of a whole message, checking only that the framing is consistent. */
export function checkMessage(msg: Uint8Array): void {
  let pos = 0;
  while (pos < msg.length) pos = readField(msg, pos, msg.length, msg.length)!.end;
}

/** Every occurrence of string field `no` in a whole message (e.g. ProxyConfig.ca_certificates_pem = 34). */
export function repeatedStrings(msg: Uint8Array, no: number): string[] {
  const out: string[] = [];
  let pos = 0;
  while (pos < msg.length) {
    const f = readField(msg, pos, msg.length, msg.length)!;
    if (f.no === no) out.push(stringOf(msg, f, msg.length)!);
    pos = f.end;
  }
  return out;
}
