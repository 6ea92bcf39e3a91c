// Go's strconv.Unquote and strconv.Quote for the three Go literal forms: "interpreted" strings
// with escapes, `raw` strings and 'c' rune literals. Used by the template lexer and by the
// downward-API file parser (./etc/istio/pod/labels and annotations are written with %q).

export class QuoteError extends Error {
  override name = "QuoteError";
}

const SIMPLE_ESCAPES: Record<string, string> = {
  a: "\x07",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  v: "\v",
  "\\": "\\",
};

/** strconv.Unquote: the value of a Go string, raw string or rune literal. Throws QuoteError. */
export function goUnquote(literal: string): string {
  const n = literal.length;
  if (n < 2) throw new QuoteError(`invalid syntax: ${literal}`);
  const q = literal[0];
  if (q !== literal[n - 1]) throw new QuoteError(`invalid syntax: ${literal}`);
  const body = literal.slice(1, n - 1);
  if (q === "`") {
    if (body.includes("`")) throw new QuoteError(`invalid syntax: ${literal}`);
    return body.replace(/\r/g, "");
  }
  if (q !== '"' && q !== "'") throw new QuoteError(`invalid syntax: ${literal}`);
  if (body.includes("\n")) throw new QuoteError(`invalid syntax: newline in ${literal}`);
  const bytes: number[] = [];
  const enc = new TextEncoder();
  const pushText = (s: string) => {
    for (const b of enc.encode(s)) bytes.push(b);
  };
  let runes = 0;
  for (let i = 0; i < body.length;) {
    const c = body[i]!;
    if (c === q) throw new QuoteError(`invalid syntax: unescaped quote in ${literal}`);
    if (c !== "\\") {
      const cp = body.codePointAt(i)!;
      pushText(String.fromCodePoint(cp));
      i += cp > 0xffff ? 2 : 1;
      runes++;
      continue;
    }
    const e = body[i + 1];
    if (e === undefined) throw new QuoteError(`invalid syntax: trailing backslash in ${literal}`);
    i += 2;
    runes++;
    if (e in SIMPLE_ESCAPES) {
      pushText(SIMPLE_ESCAPES[e]!);
    } else if (e === q) {
      pushText(q);
    } else if (e === "x" || e === "u" || e === "U") {
      const len = e === "x" ? 2 : e === "u" ? 4 : 8;
      const hex = body.slice(i, i + len);
      if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(hex)) throw new QuoteError(`invalid syntax: bad \\${e} escape in ${literal}`);
      i += len;
      const v = parseInt(hex, 16);
      if (e === "x") {
        if (q === "'") pushText(String.fromCodePoint(v));
        else bytes.push(v);
      } else {
        if (v > 0x10ffff || (v >= 0xd800 && v < 0xe000)) throw new QuoteError(`invalid syntax: bad code point in ${literal}`);
        pushText(String.fromCodePoint(v));
      }
    } else if (e >= "0" && e <= "7") {
      const oct = body.slice(i - 1, i + 2);
      if (!/^[0-7]{3}$/.test(oct)) throw new QuoteError(`invalid syntax: bad octal escape in ${literal}`);
      const v = parseInt(oct, 8);
      if (v > 255) throw new QuoteError(`invalid syntax: octal escape out of range in ${literal}`);
      i += 2;
      bytes.push(v);
    } else {
      throw new QuoteError(`invalid syntax: unknown escape \\${e} in ${literal}`);
    }
  }
  if (q === "'" && runes !== 1) throw new QuoteError(`invalid syntax: rune literal ${literal} must hold one character`);
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** strconv.Quote: a double-quoted Go literal; printable Unicode kept, the rest escaped. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case '"':
        out += '\\"';
        continue;
      case "\\":
        out += "\\\\";
        continue;
      case "\x07":
        out += "\\a";
        continue;
      case "\b":
        out += "\\b";
        continue;
      case "\f":
        out += "\\f";
        continue;
      case "\n":
        out += "\\n";
        continue;
      case "\r":
        out += "\\r";
        continue;
      case "\t":
        out += "\\t";
        continue;
      case "\v":
        out += "\\v";
        continue;
    }
    if (cp < 0x20 || cp === 0x7f) out += "\\x" + cp.toString(16).padStart(2, "0");
    else if (cp >= 0xd800 && cp < 0xe000) out += "\\ufffd";
    else if (isGoPrintable(cp)) out += ch;
    else if (cp < 0x10000) out += "\\u" + cp.toString(16).padStart(4, "0");
    else out += "\\U" + cp.toString(16).padStart(8, "0");
  }
  return out + '"';
}

/** unicode.IsPrint, approximated with Unicode general categories (letters, marks, numbers, punctuation, symbols, U+0020). */
export function isGoPrintable(cp: number): boolean {
  if (cp === 0x20) return true;
  return /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u.test(String.fromCodePoint(cp));
}
