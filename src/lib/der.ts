// ASN.1 DER, written: the few universal types a PKCS#10 certificate request (src/ca/csr.ts) and
// the local CA's certificates (src/ca/certwrite.ts) are made of, each a tag-length-value with the
// definite, shortest length form DER requires (X.690 §10.1). Reading is in derread.ts.

/** Encoded DER: always in a plain ArrayBuffer of its own (WebCrypto takes it as it is). */
export type Der = Uint8Array<ArrayBuffer>;

export class DerError extends Error {
  override name = "DerError";
}

const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  utf8String: 0x0c,
  printableString: 0x13,
  utcTime: 0x17,
  generalizedTime: 0x18,
  sequence: 0x30,
  set: 0x31,
} as const;

/** One element: `tag`, its length (short form below 128, else long form), `content`. */
export function tlv(tag: number, content: Uint8Array): Der {
  const n = content.length;
  const len: number[] = [];
  if (n < 0x80) len.push(n);
  else {
    for (let v = n; v > 0; v = Math.floor(v / 256)) len.unshift(v & 0xff);
    len.unshift(0x80 | len.length);
  }
  const out = new Uint8Array(1 + len.length + n);
  out[0] = tag;
  out.set(len, 1);
  out.set(content, 1 + len.length);
  return out;
}

export function concat(parts: readonly Uint8Array[]): Der {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export const sequence = (...items: Uint8Array[]): Der => tlv(TAG.sequence, concat(items));

/** A SET OF with one member (DER's ordering of members needs no sorting then). */
export const setOf1 = (item: Uint8Array): Der => tlv(TAG.set, item);

/** `[n]` context-specific, constructed (IMPLICIT over a SET/SEQUENCE's contents: pass them). */
export const contextConstructed = (n: number, ...items: Uint8Array[]): Der => tlv(0xa0 | n, concat(items));

/** `[n]` context-specific, primitive (e.g. GeneralName's uniformResourceIdentifier [6] IA5String). */
export const contextPrimitive = (n: number, content: Uint8Array): Der => tlv(0x80 | n, content);

export const derNull = (): Der => tlv(TAG.null, new Uint8Array(0));

export const boolean = (v: boolean): Der => tlv(TAG.boolean, Uint8Array.of(v ? 0xff : 0x00));

export const octetString = (content: Uint8Array): Der => tlv(TAG.octetString, content);

/**
 * A named-bit BIT STRING (KeyUsage): bit 0 is the first bit of the first byte. DER drops trailing
 * zero bits and counts them as unused (X.690 §11.2.2).
 */
export function namedBits(bits: readonly number[]): Der {
  if (bits.length === 0) return tlv(TAG.bitString, Uint8Array.of(0));
  const last = Math.max(...bits);
  const bytes = new Uint8Array(Math.floor(last / 8) + 1);
  for (const b of bits) bytes[Math.floor(b / 8)]! |= 0x80 >> (b % 8);
  return tlv(TAG.bitString, concat([Uint8Array.of(7 - (last % 8)), bytes]));
}

/** A BIT STRING of whole bytes (no unused bits): signatures and keys. */
export const bitString = (bytes: Uint8Array): Der => tlv(TAG.bitString, concat([Uint8Array.of(0), bytes]));

/** A small non-negative INTEGER (versions). */
export function smallInteger(v: number): Der {
  if (!Number.isInteger(v) || v < 0 || v > 0x7f) throw new DerError(`integer ${v}: only 0..127 is written here`);
  return tlv(TAG.integer, Uint8Array.of(v));
}

/**
 * A non-negative INTEGER from its unsigned big-endian bytes (an ECDSA r or s): leading zero bytes
 * dropped, one 0x00 put back when the high bit is set so it does not read as negative (X.690 §8.3.2).
 */
export function unsignedInteger(bytes: Uint8Array): Der {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const v = bytes.subarray(start);
  if (v.length === 0) return tlv(TAG.integer, Uint8Array.of(0));
  return tlv(TAG.integer, v[0]! & 0x80 ? concat([Uint8Array.of(0), v]) : v);
}

/** An OBJECT IDENTIFIER from its dotted form ("2.5.29.17"). */
export function oid(dotted: string): Der {
  const arcs = dotted.split(".").map((a) => (/^\d{1,9}$/.test(a) ? Number(a) : NaN));
  if (arcs.length < 2 || arcs.some(Number.isNaN) || arcs[0]! > 2 || (arcs[0]! < 2 && arcs[1]! > 39))
    throw new DerError(`object identifier "${dotted}" is not valid`);
  const out: number[] = [];
  for (const arc of [arcs[0]! * 40 + arcs[1]!, ...arcs.slice(2)]) {
    const base128 = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift(0x80 | (v & 0x7f));
    out.push(...base128);
  }
  return tlv(TAG.oid, Uint8Array.from(out));
}

const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;

/** A PrintableString (X.680 §41.4's alphabet only). */
export function printableString(s: string): Der {
  if (!PRINTABLE.test(s)) throw new DerError(`"${s}" has characters a PrintableString cannot hold`);
  return tlv(TAG.printableString, new TextEncoder().encode(s));
}

/** A UTF8String. */
export const utf8String = (s: string): Der => tlv(TAG.utf8String, new TextEncoder().encode(s));

/** A name attribute's DirectoryString as Go's crypto/x509 writes it: PrintableString when it can, else UTF8String. */
export const directoryString = (s: string): Der => (PRINTABLE.test(s) ? printableString(s) : utf8String(s));

/**
 * A certificate's Time (RFC 5280 §4.1.2.5): UTCTime (YYMMDDHHMMSSZ) for 1950 through 2049,
 * GeneralizedTime (YYYYMMDDHHMMSSZ) otherwise; whole seconds, UTC.
 */
export function time(ms: number): Der {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  const y = d.getUTCFullYear();
  if (!Number.isFinite(ms) || y < 1 || y > 9999) throw new DerError(`time ${ms}: out of range`);
  const two = (n: number) => String(n).padStart(2, "0");
  const rest = `${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}${two(d.getUTCSeconds())}Z`;
  const utc = y >= 1950 && y < 2050;
  return tlv(utc ? TAG.utcTime : TAG.generalizedTime, new TextEncoder().encode(`${utc ? two(y % 100) : String(y).padStart(4, "0")}${rest}`));
}

/** IA5String's bytes (ASCII only), for a tag of the caller's choice (a GeneralName's is implicit). */
export function ia5Bytes(s: string, what: string): Der {
  if (!/^[\x00-\x7f]*$/.test(s)) throw new DerError(`${what} "${s}" has non-ASCII characters, which an IA5String cannot hold`);
  return new TextEncoder().encode(s);
}
