// HPACK's static Huffman code (RFC 7541 Appendix B). The code is canonical, so the table is just
// each symbol's code length (256 octets + EOS); codes are derived from the lengths in symbol
// order. Only decoding is needed: the agent sends its own header strings as raw literals.

/** Code lengths of symbols 0..255, sixteen per row; EOS (256) is 30 bits. */
const ROWS: readonly number[][] = [
  [13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28],
  [28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28],
  [6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6],
  [5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10],
  [13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
  [7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6],
  [15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5],
  [6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28],
  [20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23],
  [24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24],
  [22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23],
  [21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23],
  [26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25],
  [19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27],
  [20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23],
  [26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26],
];
export const EOS = 256;

/** Code length per symbol (0..256). */
export const CODE_LENGTHS: readonly number[] = [...ROWS.flat(), 30];

/** Canonical codes derived from the lengths: shorter first, then by symbol. */
function canonicalCodes(): number[] {
  const order = CODE_LENGTHS.map((len, sym) => ({ len, sym })).sort((a, b) => a.len - b.len || a.sym - b.sym);
  const codes = new Array<number>(CODE_LENGTHS.length).fill(0);
  let code = 0;
  let prevLen = order[0]!.len;
  for (const { len, sym } of order) {
    code *= 2 ** (len - prevLen);
    prevLen = len;
    codes[sym] = code;
    code++;
  }
  return codes;
}

/**
 * Canonical decoding: for each length, the first code of that length, how many codes have it, and
 * where its symbols start in the symbols sorted by (length, symbol).
 */
function decodeTables() {
  const codes = canonicalCodes();
  const sorted = CODE_LENGTHS.map((len, sym) => ({ len, sym })).sort((a, b) => a.len - b.len || a.sym - b.sym);
  const first = new Array<number>(31).fill(0);
  const count = new Array<number>(31).fill(0);
  const offset = new Array<number>(31).fill(0);
  sorted.forEach(({ len, sym }, i) => {
    if (count[len] === 0) {
      first[len] = codes[sym]!;
      offset[len] = i;
    }
    count[len]!++;
  });
  return { codes, first, count, offset, symbols: sorted.map((e) => e.sym) };
}

/** Built on first use (header blocks arrive after the start path). */
let tables: ReturnType<typeof decodeTables> | undefined;
const huffmanTables = () => (tables ??= decodeTables());

/** Canonical code of each symbol. */
function huffmanCode(sym: number): number {
  return huffmanTables().codes[sym]!;
}

const MIN_LEN = 5;
const MAX_LEN = 30;

export class HuffmanError extends Error {
  override name = "HuffmanError";
}

/** Decode a Huffman-coded HPACK string (RFC 7541 §5.2): padding must be at most 7 one-bits. */
export function huffmanDecode(src: Uint8Array): string {
  const out: number[] = [];
  const { first, count, offset, symbols } = huffmanTables();
  let code = 0;
  let len = 0;
  for (let i = 0; i < src.length; i++) {
    const byte = src[i]!;
    for (let bit = 7; bit >= 0; bit--) {
      code = code * 2 + ((byte >> bit) & 1);
      len++;
      const k = code - first[len]!;
      if (len >= MIN_LEN && k >= 0 && k < count[len]!) {
        const sym = symbols[offset[len]! + k]!;
        if (sym === EOS) throw new HuffmanError("EOS symbol inside a Huffman-coded string");
        out.push(sym);
        code = 0;
        len = 0;
      } else if (len >= MAX_LEN) {
        throw new HuffmanError("invalid Huffman code");
      }
    }
  }
  // What is left must be the most significant bits of EOS (all ones), shorter than a byte.
  if (len > 7) throw new HuffmanError("Huffman padding longer than 7 bits");
  if (len > 0 && code !== 2 ** len - 1) throw new HuffmanError("Huffman padding is not a prefix of EOS");
  return Buffer.from(out).toString("latin1");
}

/** Huffman-encode (used by tests to produce what grpc-go and nghttp2 send). */
export function huffmanEncode(s: string): Buffer {
  const bytes: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const b of Buffer.from(s, "latin1")) {
    const len = CODE_LENGTHS[b]!;
    const code = huffmanCode(b);
    for (let i = len - 1; i >= 0; i--) {
      acc = (acc << 1) | (Math.floor(code / 2 ** i) & 1);
      bits++;
      if (bits === 8) {
        bytes.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) bytes.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) & 0xff);
  return Buffer.from(bytes);
}
