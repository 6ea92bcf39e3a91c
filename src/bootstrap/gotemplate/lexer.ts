// The lexer of Go's text/template: text outside `{{ }}`, tokens inside. Trim markers (`{{- ` and
// ` -}}`) are applied here, as Go does: the adjacent text loses its surrounding spaces, tabs,
// carriage returns and newlines. Comments (`{{/* */}}`) must sit right against the delimiters.

export type TokKind =
  | "text"
  | "left"
  | "right"
  | "space"
  | "ident"
  | "keyword"
  | "field"
  | "variable"
  | "string"
  | "raw"
  | "char"
  | "number"
  | "bool"
  | "nil"
  | "dot"
  | "pipe"
  | "assign"
  | "declare"
  | "lparen"
  | "rparen"
  | "comma"
  | "eof";

export interface Token {
  kind: TokKind;
  /** Raw text; for `text` the (trimmed) text to emit. */
  val: string;
  /** Offset of the token in the source. */
  pos: number;
}

export class LexError extends Error {
  override name = "LexError";
  constructor(
    message: string,
    readonly pos: number,
  ) {
    super(message);
  }
}

const KEYWORDS = new Set(["block", "break", "continue", "define", "else", "end", "if", "range", "template", "with"]);
const isSpace = (c: string | undefined) => c === " " || c === "\t" || c === "\r" || c === "\n";
const isAlnum = (c: string | undefined) => c !== undefined && /[\p{L}\p{Nd}_]/u.test(c);
const SPACE_CHARS = /[ \t\r\n]+$/;
const LEADING_SPACE = /^[ \t\r\n]+/;

export function lex(input: string): Token[] {
  const toks: Token[] = [];
  let pos = 0;
  let trimNextText = false;
  while (pos <= input.length) {
    const open = input.indexOf("{{", pos);
    const end = open < 0 ? input.length : open;
    let text = input.slice(pos, end);
    let textPos = pos;
    if (trimNextText) {
      const m = LEADING_SPACE.exec(text);
      if (m) {
        text = text.slice(m[0].length);
        textPos += m[0].length;
      }
      trimNextText = false;
    }
    let leftTrim = false;
    if (open >= 0 && input[open + 2] === "-" && isSpace(input[open + 3])) leftTrim = true;
    if (leftTrim) text = text.replace(SPACE_CHARS, "");
    if (text.length > 0) toks.push({ kind: "text", val: text, pos: textPos });
    if (open < 0) break;
    pos = open + 2 + (leftTrim ? 2 : 0);
    // Comment: must start right after the delimiter (and trim marker).
    if (input.startsWith("/*", pos)) {
      const close = input.indexOf("*/", pos + 2);
      if (close < 0) throw new LexError("unclosed comment", open);
      let after = close + 2;
      let rightTrim = false;
      if (isSpace(input[after]) && input[after + 1] === "-" && input.startsWith("}}", after + 2)) {
        rightTrim = true;
        after += 2;
      }
      if (!input.startsWith("}}", after)) throw new LexError("comment ends before closing delimiter", open);
      pos = after + 2;
      trimNextText = rightTrim;
      continue;
    }
    toks.push({ kind: "left", val: "{{", pos: open });
    const r = lexAction(input, pos, toks);
    pos = r.pos;
    trimNextText = r.trim;
  }
  toks.push({ kind: "eof", val: "", pos: input.length });
  return toks;
}

function lexAction(input: string, start: number, toks: Token[]): { pos: number; trim: boolean } {
  let pos = start;
  let parens = 0;
  const push = (kind: TokKind, from: number, to: number) => toks.push({ kind, val: input.slice(from, to), pos: from });
  for (;;) {
    // Right delimiter, with or without the trim marker.
    if (isSpace(input[pos]) && input[pos + 1] === "-" && input.startsWith("}}", pos + 2)) {
      if (parens > 0) throw new LexError("unclosed left paren", pos);
      toks.push({ kind: "right", val: "}}", pos: pos + 2 });
      return { pos: pos + 4, trim: true };
    }
    if (input.startsWith("}}", pos)) {
      if (parens > 0) throw new LexError("unclosed left paren", pos);
      toks.push({ kind: "right", val: "}}", pos });
      return { pos: pos + 2, trim: false };
    }
    const c = input[pos];
    if (c === undefined) throw new LexError("unclosed action", start - 2);
    const from = pos;
    if (isSpace(c)) {
      while (isSpace(input[pos]) && !(input[pos + 1] === "-" && input.startsWith("}}", pos + 2))) pos++;
      push("space", from, pos);
      continue;
    }
    switch (c) {
      case "=":
        push("assign", pos, ++pos);
        continue;
      case ":":
        if (input[pos + 1] !== "=") throw new LexError("expected :=", pos);
        pos += 2;
        push("declare", from, pos);
        continue;
      case "|":
        push("pipe", pos, ++pos);
        continue;
      case ",":
        push("comma", pos, ++pos);
        continue;
      case "(":
        parens++;
        push("lparen", pos, ++pos);
        continue;
      case ")":
        parens--;
        if (parens < 0) throw new LexError(`unexpected right paren`, pos);
        push("rparen", pos, ++pos);
        continue;
      case '"':
        pos = endOfQuoted(input, pos, '"', "unterminated quoted string");
        push("string", from, pos);
        continue;
      case "`": {
        const close = input.indexOf("`", pos + 1);
        if (close < 0) throw new LexError("unterminated raw quoted string", from);
        pos = close + 1;
        push("raw", from, pos);
        continue;
      }
      case "'":
        pos = endOfQuoted(input, pos, "'", "unterminated character constant");
        push("char", from, pos);
        continue;
      case "$": {
        pos++;
        while (isAlnum(input[pos])) pos++;
        push("variable", from, pos);
        checkTerminator(input, pos);
        continue;
      }
      case ".": {
        if (input[pos + 1] !== undefined && /[0-9]/.test(input[pos + 1]!)) {
          pos = scanNumber(input, pos);
          push("number", from, pos);
          continue;
        }
        pos++;
        if (!isAlnum(input[pos])) {
          push("dot", from, pos);
          checkTerminator(input, pos);
          continue;
        }
        while (isAlnum(input[pos])) pos++;
        push("field", from, pos);
        checkTerminator(input, pos);
        continue;
      }
    }
    if (c === "+" || c === "-" || (c >= "0" && c <= "9")) {
      pos = scanNumber(input, pos);
      push("number", from, pos);
      continue;
    }
    if (isAlnum(c)) {
      while (isAlnum(input[pos])) pos++;
      const word = input.slice(from, pos);
      checkTerminator(input, pos);
      if (KEYWORDS.has(word)) push("keyword", from, pos);
      else if (word === "true" || word === "false") push("bool", from, pos);
      else if (word === "nil") push("nil", from, pos);
      else push("ident", from, pos);
      continue;
    }
    const cp = input.codePointAt(pos)!;
    throw new LexError(`unrecognized character in action: U+${cp.toString(16).toUpperCase().padStart(4, "0")} '${String.fromCodePoint(cp)}'`, pos);
  }
}

function checkTerminator(input: string, pos: number): void {
  const c = input[pos];
  if (c === undefined || isSpace(c) || ".,|:()".includes(c) || input.startsWith("}}", pos)) return;
  throw new LexError(`bad character U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")} '${c}'`, pos);
}

function scanNumber(input: string, start: number): number {
  let pos = start;
  if (input[pos] === "+" || input[pos] === "-") pos++;
  let digits = "0123456789_";
  if (input[pos] === "0" && /[xXoObB]/.test(input[pos + 1] ?? "")) {
    const p = input[pos + 1]!.toLowerCase();
    digits = p === "x" ? "0123456789abcdefABCDEF_" : p === "o" ? "01234567_" : "01_";
    pos += 2;
  }
  while (input[pos] !== undefined && digits.includes(input[pos]!)) pos++;
  if (input[pos] === ".") {
    pos++;
    while (input[pos] !== undefined && digits.includes(input[pos]!)) pos++;
  }
  const exp = digits.length > 16 ? "pP" : "eE";
  if (input[pos] !== undefined && exp.includes(input[pos]!)) {
    pos++;
    if (input[pos] === "+" || input[pos] === "-") pos++;
    while (/[0-9_]/.test(input[pos] ?? "")) pos++;
  }
  if (input[pos] === "i") pos++;
  if (isAlnum(input[pos]) || input[pos] === ".") throw new LexError(`bad number syntax: "${input.slice(start, pos + 1)}"`, start);
  return pos;
}

/** End (exclusive) of a "..." or '...' literal starting at `start`, honouring backslash escapes. */
function endOfQuoted(input: string, start: number, quote: string, unterminated: string): number {
  let pos = start + 1;
  for (;;) {
    const d = input[pos];
    if (d === "\\") {
      pos += 2;
      continue;
    }
    if (d === undefined || d === "\n") throw new LexError(unterminated, start);
    pos++;
    if (d === quote) return pos;
  }
}
