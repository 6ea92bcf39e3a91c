// How deep a YAML text's collections nest, found by one pass over its characters before the
// `yaml` parser sees it. The parser spends tens of microseconds per level of nesting (and
// recurses), so a megabyte of `[` would cost seconds before a depth check on the parsed value
// could refuse it; this scan stops at the first level past the limit.
//
// What it counts, as YAML 1.2 nests them:
//   block collections  one level per indentation step of a line that starts a node (`key:`,
//                      `- `, `? `), and per compact indicator on one line (`- - a: b` is three);
//                      a sequence written at its parent key's indentation is one level inside it
//   flow collections   one level per `[` or `{` outside quoted scalars and comments, on top of
//                      the block level they start at
// Skipped: quoted scalars ('' and \ escapes, over several lines), comments, block scalars
// (`|`, `>`: their content lines are text), anchors and tags before a value.
// The count is exact for the usual shapes and may be one or two high for odd ones (a plain
// scalar continued on a more indented line that starts with `- `); it never misses a flow level.

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const HASH = 0x23;
const DQUOTE = 0x22;
const SQUOTE = 0x27;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const DASH = 0x2d;
const QUESTION = 0x3f;
const COMMA = 0x2c;
const OPEN_SEQ = 0x5b;
const CLOSE_SEQ = 0x5d;
const OPEN_MAP = 0x7b;
const CLOSE_MAP = 0x7d;
const PIPE = 0x7c;
const GT = 0x3e;
const AMP = 0x26;
const BANG = 0x21;

const isBlank = (c: number) => c === SPACE || c === TAB || c === CR;
const isBreakOrEnd = (c: number) => c === LF || Number.isNaN(c);
/** Whitespace, a line break or the end: what must follow an indicator such as `-` or `:`. */
const endsToken = (c: number) => isBlank(c) || isBreakOrEnd(c);

interface Node {
  col: number;
  seq: boolean;
}

/** Index just past the quoted scalar opening at `i` (or the end of the text if it never closes). */
function skipQuoted(text: string, i: number): number {
  const q = text.charCodeAt(i);
  for (let j = i + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (q === DQUOTE && c === BACKSLASH) j++;
    else if (c === q) {
      if (q === SQUOTE && text.charCodeAt(j + 1) === SQUOTE) j++;
      else return j + 1;
    }
  }
  return text.length;
}

const lineEnd = (text: string, i: number) => {
  const j = text.indexOf("\n", i);
  return j < 0 ? text.length : j;
};

/**
 * Scans the flow collection opening at `i`, `base` levels deep in block structure. Returns the
 * index just past its close and the deepest level reached, or end -1 once past `limit`.
 */
function scanFlow(text: string, i: number, base: number, limit: number): { end: number; deepest: number } {
  let depth = 0;
  let deepest = 0;
  let scalarStart = true; // a quote here opens a quoted scalar; inside a plain scalar it is a character
  for (let j = i; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === OPEN_SEQ || c === OPEN_MAP) {
      if (base + ++depth > limit) return { end: -1, deepest: base + depth };
      deepest = Math.max(deepest, base + depth);
      scalarStart = true;
    } else if (c === CLOSE_SEQ || c === CLOSE_MAP) {
      if (--depth === 0) return { end: j + 1, deepest };
      scalarStart = false;
    } else if (c === COMMA || c === COLON || c === QUESTION) scalarStart = true;
    else if ((c === DQUOTE || c === SQUOTE) && scalarStart) {
      j = skipQuoted(text, j) - 1;
      scalarStart = false;
    } else if (c === HASH && (j === i || endsToken(text.charCodeAt(j - 1)))) j = lineEnd(text, j) - 1;
    else if (!isBlank(c) && c !== LF) scalarStart = false;
  }
  return { end: text.length, deepest };
}

/** Index of the first character after anchors (`&a`) and tags (`!t`) starting at `i`, and blanks. */
function skipProperties(text: string, i: number): number {
  for (;;) {
    while (isBlank(text.charCodeAt(i))) i++;
    const c = text.charCodeAt(i);
    if (c !== AMP && c !== BANG) return i;
    while (i < text.length && !endsToken(text.charCodeAt(i))) i++;
  }
}

/** Index of the `:` that makes the text at `i` a mapping key on this line, or -1. */
function keyIndicator(text: string, i: number, end: number): number {
  let j = i;
  const c0 = text.charCodeAt(j);
  if (c0 === OPEN_SEQ || c0 === OPEN_MAP) return -1; // a flow collection (a flow key is counted as one too)
  if (c0 === DQUOTE || c0 === SQUOTE) {
    j = skipQuoted(text, j);
    if (j > end) return -1; // a quoted scalar over several lines is not a key
    while (isBlank(text.charCodeAt(j))) j++;
    return text.charCodeAt(j) === COLON && endsToken(text.charCodeAt(j + 1)) ? j : -1;
  }
  for (; j < end; j++) {
    const c = text.charCodeAt(j);
    if (c === COLON && endsToken(text.charCodeAt(j + 1))) return j;
    if (c === HASH && isBlank(text.charCodeAt(j - 1))) return -1;
  }
  return -1;
}

/**
 * The nesting depth of `text`'s collections (a top-level mapping is 1), or `limit + 1` as soon
 * as a level past `limit` is seen: the scan stops there.
 */
export function yamlNestingDepth(text: string, limit: number): number {
  const stack: Node[] = [];
  let max = 0;
  /** Places a block node at `col`; false once past the limit. */
  const place = (col: number, seq: boolean): boolean => {
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.col > col || (top.col === col && top.seq && !seq)) stack.pop();
      else break;
    }
    const top = stack[stack.length - 1];
    if (!top || top.col !== col || top.seq !== seq) stack.push({ col, seq });
    max = Math.max(max, stack.length);
    return max <= limit;
  };
  let i = 0;
  let blockScalarParent: number | undefined; // inside a block scalar: its parent's column
  while (i < text.length) {
    const end = lineEnd(text, i);
    let p = i;
    while (text.charCodeAt(p) === SPACE) p++;
    const indent = p - i;
    const first = text.charCodeAt(p);
    const blankLine = p >= end || (isBlank(first) && text.slice(p, end).trim() === "");
    if (blockScalarParent !== undefined) {
      if (blankLine || indent > blockScalarParent) {
        i = end + 1;
        continue;
      }
      blockScalarParent = undefined;
    }
    if (blankLine || first === HASH || (indent === 0 && (first === 0x25 /* % */ || text.startsWith("---", p) || text.startsWith("...", p)))) {
      if (indent === 0 && (text.startsWith("---", p) || text.startsWith("...", p))) stack.length = 0;
      i = end + 1;
      continue;
    }
    // Compact indicators: `- `, `? `, each a node at its own column.
    let parentCol = indent - 1; // what a block scalar's lines must be indented past
    for (;;) {
      const c = text.charCodeAt(p);
      if ((c === DASH || c === QUESTION) && endsToken(text.charCodeAt(p + 1))) {
        if (!place(p - i, c === DASH)) return limit + 1;
        parentCol = p - i;
        p++;
        while (isBlank(text.charCodeAt(p))) p++;
      } else break;
    }
    p = skipProperties(text, p);
    const key = p < end ? keyIndicator(text, p, end) : -1;
    if (key >= 0) {
      if (!place(p - i, false)) return limit + 1;
      parentCol = p - i;
      p = skipProperties(text, key + 1);
    }
    const c = text.charCodeAt(p);
    let next = end + 1;
    if (c === OPEN_SEQ || c === OPEN_MAP) {
      const flow = scanFlow(text, p, stack.length, limit);
      if (flow.end < 0) return limit + 1;
      max = Math.max(max, flow.deepest);
      next = lineEnd(text, flow.end) + 1;
    } else if (c === DQUOTE || c === SQUOTE) {
      next = lineEnd(text, skipQuoted(text, p)) + 1;
    } else if ((c === PIPE || c === GT) && p < end) {
      blockScalarParent = parentCol;
    }
    i = next;
  }
  return max;
}
