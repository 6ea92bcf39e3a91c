// HPACK (RFC 7541), as much as an ADS relay needs. The decoder is complete: static and dynamic
// tables, table size updates, integer and Huffman-coded strings, every representation — Envoy
// (nghttp2) and istiod (grpc-go) use all of them. The encoder sends literals without indexing
// (names from the static table where there is one): a relay sends a handful of header blocks per
// stream, so compression would buy nothing and a stateless encoder cannot get out of sync.

import { huffmanDecode } from "./huffman.ts";
import { errorMessage } from "../../lib/errors.ts";

export type HeaderList = [name: string, value: string][];

/** The first value of header `name` (lowercase) in a decoded list. */
export function headerValue(h: HeaderList, name: string): string | undefined {
  for (const [k, v] of h) if (k === name) return v;
  return undefined;
}

export class HpackError extends Error {
  override name = "HpackError";
}

/** RFC 7541 Appendix A. Index 1 is the first entry. */
const STATIC: readonly (readonly [string, string])[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

const STATIC_NAME_INDEX: ReadonlyMap<string, number> = (() => {
  const m = new Map<string, number>();
  STATIC.forEach(([n], i) => {
    if (!m.has(n)) m.set(n, i + 1);
  });
  return m;
})();

/** Entry overhead in table size accounting (RFC 7541 §4.1). */
const ENTRY_OVERHEAD = 32;

export class HpackDecoder {
  /** Newest first. */
  private readonly dynamic: [string, string][] = [];
  private size = 0;
  private maxSize: number;

  /** `protocolMaxSize` = the SETTINGS_HEADER_TABLE_SIZE we advertised (the encoder's ceiling). */
  constructor(
    private readonly protocolMaxSize = 4096,
    /** Upper bound on a decoded header list (name + value + 32 per field). */
    private readonly maxListSize = 256 * 1024,
  ) {
    this.maxSize = protocolMaxSize;
  }

  decode(block: Uint8Array): HeaderList {
    const out: HeaderList = [];
    let listSize = 0;
    let pos = 0;
    let fieldsSeen = false;
    const int = (prefixBits: number): number => {
      const mask = (1 << prefixBits) - 1;
      if (pos >= block.length) throw new HpackError("truncated integer");
      let v = block[pos++]! & mask;
      if (v < mask) return v;
      let m = 0;
      for (;;) {
        if (pos >= block.length) throw new HpackError("truncated integer");
        // Anything past 2^31 needs at most 5 continuation octets; more is an attack, not a number.
        if (m > 28) throw new HpackError("integer overflow");
        const b = block[pos++]!;
        v += (b & 0x7f) * 2 ** m;
        m += 7;
        if (v > 0x7fffffff) throw new HpackError("integer overflow");
        if ((b & 0x80) === 0) return v;
      }
    };
    const str = (): string => {
      if (pos >= block.length) throw new HpackError("truncated string");
      const huff = (block[pos]! & 0x80) !== 0;
      const len = int(7);
      if (pos + len > block.length) throw new HpackError("string longer than the header block");
      const raw = block.subarray(pos, pos + len);
      pos += len;
      try {
        return huff ? huffmanDecode(raw) : Buffer.from(raw.buffer, raw.byteOffset, raw.length).toString("latin1");
      } catch (e) {
        throw new HpackError(errorMessage(e), { cause: e });
      }
    };
    const entry = (index: number): readonly [string, string] => {
      if (index === 0) throw new HpackError("index 0");
      if (index <= STATIC.length) return STATIC[index - 1]!;
      const e = this.dynamic[index - STATIC.length - 1];
      if (!e) throw new HpackError(`index ${index} is beyond the dynamic table (${this.dynamic.length} entries)`);
      return e;
    };
    const emit = (name: string, value: string) => {
      listSize += name.length + value.length + ENTRY_OVERHEAD;
      if (listSize > this.maxListSize) throw new HpackError(`header list larger than ${this.maxListSize} bytes`);
      out.push([name, value]);
      fieldsSeen = true;
    };
    while (pos < block.length) {
      const b = block[pos]!;
      if (b & 0x80) {
        // Indexed field.
        const [n, v] = entry(int(7));
        emit(n, v);
      } else if (b & 0x40) {
        // Literal with incremental indexing.
        const idx = int(6);
        const name = idx === 0 ? str() : entry(idx)[0];
        const value = str();
        this.add(name, value);
        emit(name, value);
      } else if (b & 0x20) {
        // Dynamic table size update: only at the start of a block.
        if (fieldsSeen) throw new HpackError("table size update after a header field");
        const size = int(5);
        if (size > this.protocolMaxSize) throw new HpackError(`table size ${size} above the advertised ${this.protocolMaxSize}`);
        this.maxSize = size;
        this.evict(0);
      } else {
        // Literal without indexing (0000) or never indexed (0001).
        const idx = int(4);
        const name = idx === 0 ? str() : entry(idx)[0];
        emit(name, str());
      }
    }
    return out;
  }

  private add(name: string, value: string): void {
    const sz = name.length + value.length + ENTRY_OVERHEAD;
    this.evict(sz);
    if (sz > this.maxSize) return; // larger than the table: it empties the table and is not added
    this.dynamic.unshift([name, value]);
    this.size += sz;
  }

  private evict(room: number): void {
    while (this.dynamic.length > 0 && this.size + room > this.maxSize) {
      const [n, v] = this.dynamic.pop()!;
      this.size -= n.length + v.length + ENTRY_OVERHEAD;
    }
  }
}

function encodeInt(out: number[], first: number, prefixBits: number, v: number): void {
  const mask = (1 << prefixBits) - 1;
  if (v < mask) {
    out.push(first | v);
    return;
  }
  out.push(first | mask);
  v -= mask;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

function encodeStr(out: number[], s: string): void {
  const b = Buffer.from(s, "latin1");
  encodeInt(out, 0, 7, b.length);
  for (const x of b) out.push(x);
}

/**
 * Encode a header list as literals without indexing (stateless). Names must be lowercase.
 * `tableSizeUpdate`: start with a dynamic table size update to 0 — owed after the peer changed
 * SETTINGS_HEADER_TABLE_SIZE (RFC 7541 §4.2; nghttp2 insists). 0 is always allowed: we never index.
 */
export function encodeHeaders(headers: HeaderList, tableSizeUpdate = false): Buffer {
  const out: number[] = [];
  if (tableSizeUpdate) out.push(0x20);
  for (const [name, value] of headers) {
    const idx = STATIC_NAME_INDEX.get(name);
    if (idx !== undefined) {
      encodeInt(out, 0x00, 4, idx);
    } else {
      out.push(0x00);
      encodeStr(out, name);
    }
    encodeStr(out, value);
  }
  return Buffer.from(out);
}
