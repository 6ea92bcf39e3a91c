// Parser of Go's text/template language: actions, if/else if/else, with/else with, range with
// break/continue, define/template/block, variables (declared before use), pipelines and
// parenthesized sub-pipelines. Unknown functions and undeclared variables are parse errors, as in Go.

import type { Arg, Command, Node, Pipe } from "./ast.ts";
import { lex, LexError, type Token, type TokKind } from "./lexer.ts";
import { goUnquote, QuoteError } from "../../lib/strconv.ts";

export class ParseFault extends Error {
  override name = "ParseFault";
  constructor(
    message: string,
    readonly pos: number,
  ) {
    super(message);
  }
}

export interface ParsedTemplates {
  /** The main template's body. */
  root: Node[];
  /** `{{define}}` and `{{block}}` bodies by name. */
  defined: Map<string, Node[]>;
}

export function parse(text: string, hasFunc: (name: string) => boolean): ParsedTemplates {
  let toks: Token[];
  try {
    toks = lex(text);
  } catch (e) {
    if (e instanceof LexError) throw new ParseFault(e.message, e.pos);
    throw e;
  }
  return new Parser(toks, hasFunc).parseAll();
}

type EndKind = "end" | "else";

class Parser {
  private i = 0;
  /** Offset of the last {{end}}/{{else}} keyword, for "unexpected" errors. */
  private closerPos = 0;
  private vars: string[] = ["$"];
  private rangeDepth = 0;
  private readonly defined = new Map<string, Node[]>();

  constructor(
    private readonly toks: Token[],
    private readonly hasFunc: (name: string) => boolean,
  ) {}

  parseAll(): ParsedTemplates {
    const root: Node[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === "eof") break;
      if (t.kind === "left" && this.peekNonSpace(1).kind === "keyword" && this.peekNonSpace(1).val === "define") {
        this.next();
        this.nextNonSpace();
        this.parseDefine();
        continue;
      }
      const n = this.textOrAction();
      if (typeof n === "string") throw new ParseFault(`unexpected {{${n}}}`, this.closerPos);
      root.push(n);
    }
    return { root, defined: this.defined };
  }

  // ---- token helpers -------------------------------------------------------------------------
  private peek(k = 0): Token {
    return this.toks[Math.min(this.i + k, this.toks.length - 1)]!;
  }
  private next(): Token {
    return this.toks[Math.min(this.i++, this.toks.length - 1)]!;
  }
  private peekNonSpace(from = 0): Token {
    let k = from;
    while (this.peek(k).kind === "space") k++;
    return this.peek(k);
  }
  private nextNonSpace(): Token {
    let t = this.next();
    while (t.kind === "space") t = this.next();
    return t;
  }
  private expect(kind: TokKind, context: string): Token {
    const t = this.nextNonSpace();
    if (t.kind !== kind) throw new ParseFault(`unexpected ${describe(t)} in ${context}`, t.pos);
    return t;
  }

  // ---- structure -----------------------------------------------------------------------------
  /** A text or action node, or the keyword ("end"/"else") that closed the current list. */
  private textOrAction(): Node | EndKind {
    const t = this.next();
    if (t.kind === "text") return { type: "text", pos: t.pos, text: t.val };
    if (t.kind === "left") return this.action(t);
    throw new ParseFault(`unexpected ${describe(t)} in input`, t.pos);
  }

  private itemList(context: string): { list: Node[]; end: EndKind; endPos: number } {
    const list: Node[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === "eof") throw new ParseFault(`unexpected EOF in ${context}`, t.pos);
      const n = this.textOrAction();
      if (typeof n === "string") return { list, end: n, endPos: this.closerPos };
      list.push(n);
    }
  }

  private action(left: Token): Node | EndKind {
    const t = this.peekNonSpace();
    if (t.kind === "keyword") {
      this.nextNonSpace();
      switch (t.val) {
        case "end":
          this.closerPos = t.pos;
          this.expect("right", "end");
          return "end";
        case "else":
          this.closerPos = t.pos;
          return this.elseControl();
        case "if":
        case "with":
        case "range":
          return this.control(t.val, t.pos);
        case "template":
          return this.templateControl(t.pos);
        case "block":
          return this.blockControl(t.pos);
        case "break":
        case "continue":
          if (this.rangeDepth === 0) throw new ParseFault(`{{${t.val}}} outside {{range}}`, t.pos);
          this.expect("right", t.val);
          return { type: t.val, pos: t.pos };
        case "define":
          throw new ParseFault("unexpected {{define}} inside a template body", t.pos);
      }
    }
    return { type: "action", pos: left.pos, pipe: this.pipeline("command", "right") };
  }

  private elseControl(): "else" {
    // `{{else if ...}}` / `{{else with ...}}` are rewritten as an else list holding one control;
    // the keyword stays unread for control() to see.
    const t = this.peekNonSpace();
    if (t.kind === "keyword" && (t.val === "if" || t.val === "with")) return "else";
    this.expect("right", "else");
    return "else";
  }

  private control(kind: "if" | "with" | "range", pos: number): Node {
    const mark = this.vars.length;
    const pipe = this.pipeline(kind, "right");
    if (pipe.cmds.length === 0) throw new ParseFault(`missing value for ${kind}`, pos);
    if (kind === "range") this.rangeDepth++;
    const body = this.itemList(kind);
    if (kind === "range") this.rangeDepth--;
    let elseList: Node[] | null = null;
    if (body.end === "else") {
      const t = this.peekNonSpace();
      if (t.kind === "keyword" && (t.val === "if" || t.val === "with")) {
        if (kind === "range" || t.val !== kind) throw new ParseFault(`unexpected {{else ${t.val}}} in {{${kind}}}`, t.pos);
        this.nextNonSpace();
        // The chained control consumes the shared {{end}}.
        elseList = [this.control(t.val, t.pos)];
      } else {
        const rest = this.itemList(kind);
        if (rest.end !== "end") throw new ParseFault(`expected end; found {{else}}`, rest.endPos);
        elseList = rest.list;
      }
    }
    this.vars.length = mark;
    return { type: kind, pos, pipe, list: body.list, elseList };
  }

  private templateControl(pos: number): Node {
    const nameTok = this.nextNonSpace();
    const name = this.stringValue(nameTok, "template clause");
    let pipe: Pipe | null = null;
    if (this.peekNonSpace().kind !== "right") pipe = this.pipeline("template", "right");
    else this.nextNonSpace();
    return { type: "template", pos, name, pipe };
  }

  private blockControl(pos: number): Node {
    const name = this.stringValue(this.nextNonSpace(), "block clause");
    const pipe = this.peekNonSpace().kind !== "right" ? this.pipeline("block", "right") : (this.nextNonSpace(), null);
    this.defineBody(name, pos);
    return { type: "template", pos, name, pipe };
  }

  private parseDefine(): void {
    const t = this.nextNonSpace();
    const name = this.stringValue(t, "define clause");
    this.expect("right", "define clause");
    this.defineBody(name, t.pos);
  }

  private defineBody(name: string, pos: number): void {
    const saved = this.vars;
    const savedRange = this.rangeDepth;
    this.vars = ["$"];
    this.rangeDepth = 0;
    const body = this.itemList(`define "${name}"`);
    if (body.end !== "end") throw new ParseFault(`unexpected {{else}} in define clause`, body.endPos);
    this.vars = saved;
    this.rangeDepth = savedRange;
    if (this.defined.has(name)) throw new ParseFault(`template: multiple definition of template "${name}"`, pos);
    this.defined.set(name, body.list);
  }

  private stringValue(t: Token, context: string): string {
    if (t.kind !== "string" && t.kind !== "raw") throw new ParseFault(`unexpected ${describe(t)} in ${context}`, t.pos);
    return this.unquote(t);
  }

  private unquote(t: Token): string {
    try {
      return goUnquote(t.val);
    } catch (e) {
      if (e instanceof QuoteError) throw new ParseFault(e.message, t.pos);
      throw e;
    }
  }

  // ---- pipelines -----------------------------------------------------------------------------
  private pipeline(context: string, end: "right" | "rparen"): Pipe {
    const start = this.peekNonSpace();
    const pipe: Pipe = { pos: start.pos, decl: [], isAssign: false, cmds: [] };
    // Declarations: `$x :=`, `$x =`, `$i, $v :=` (range only).
    if (start.kind === "variable") {
      const save = this.i;
      this.nextNonSpace();
      const after = this.peekNonSpace();
      if (after.kind === "declare" || after.kind === "assign") {
        this.nextNonSpace();
        pipe.decl.push(start.val);
        pipe.isAssign = after.kind === "assign";
        if (!pipe.isAssign) this.vars.push(start.val);
        else if (!this.vars.includes(start.val)) throw new ParseFault(`undefined variable "${start.val}"`, start.pos);
      } else if (after.kind === "comma") {
        this.nextNonSpace();
        if (context !== "range") throw new ParseFault(`too many declarations in ${context}`, after.pos);
        const second = this.nextNonSpace();
        if (second.kind !== "variable") throw new ParseFault(`missing or invalid range variable`, second.pos);
        const op = this.nextNonSpace();
        if (op.kind !== "declare" && op.kind !== "assign") throw new ParseFault(`unexpected ${describe(op)} in range declaration`, op.pos);
        pipe.decl.push(start.val, second.val);
        pipe.isAssign = op.kind === "assign";
        if (!pipe.isAssign) this.vars.push(start.val, second.val);
      } else {
        this.i = save;
      }
    }
    for (;;) {
      const t = this.peekNonSpace();
      if (t.kind === end) {
        this.nextNonSpace();
        this.checkPipeline(pipe, context, t.pos);
        return pipe;
      }
      if (t.kind === "eof" || t.kind === "right" || t.kind === "rparen") {
        throw new ParseFault(`unexpected ${describe(t)} in ${context}`, t.pos);
      }
      pipe.cmds.push(this.command(end));
    }
  }

  private checkPipeline(pipe: Pipe, context: string, pos: number): void {
    if (pipe.cmds.length === 0) {
      if (context === "command" || context === "parenthesized pipeline") throw new ParseFault(`missing value for ${context}`, pos);
      return;
    }
    pipe.cmds.slice(1).forEach((c, idx) => {
      const first = c.args[0]!;
      if (["bool", "dot", "nil", "number", "string"].includes(first.type)) {
        throw new ParseFault(`non executable command in pipeline stage ${idx + 2}`, first.pos);
      }
    });
  }

  private command(end: "right" | "rparen"): Command {
    const cmd: Command = { pos: this.peekNonSpace().pos, args: [] };
    for (;;) {
      const t = this.peekNonSpace();
      if (t.kind === "pipe") {
        this.nextNonSpace();
        if (cmd.args.length === 0) throw new ParseFault("missing command", t.pos);
        return cmd;
      }
      if (t.kind === end || t.kind === "eof" || t.kind === "right" || t.kind === "rparen") {
        if (cmd.args.length === 0) throw new ParseFault(`missing command`, t.pos);
        return cmd;
      }
      // Operands must be separated by spaces.
      if (cmd.args.length > 0 && this.peek().kind !== "space") throw new ParseFault(`unexpected ${describe(t)} in operand`, t.pos);
      cmd.args.push(this.operand());
    }
  }

  private operand(): Arg {
    const term = this.term();
    const fields: string[] = [];
    while (this.peek().kind === "field") fields.push(this.next().val.slice(1));
    if (fields.length === 0) return term;
    switch (term.type) {
      case "field":
        return { ...term, idents: [...term.idents, ...fields] };
      case "variable":
        return { ...term, idents: [...term.idents, ...fields] };
      case "bool":
      case "string":
      case "number":
      case "nil":
      case "dot":
        throw new ParseFault(`unexpected . after term "${this.toks[this.i - fields.length - 1]?.val ?? ""}"`, term.pos);
      default:
        return { type: "chain", pos: term.pos, node: term, fields };
    }
  }

  private term(): Arg {
    const t = this.nextNonSpace();
    switch (t.kind) {
      case "ident":
        if (!this.hasFunc(t.val)) throw new ParseFault(`function "${t.val}" not defined`, t.pos);
        return { type: "identifier", pos: t.pos, name: t.val };
      case "dot":
        return { type: "dot", pos: t.pos };
      case "nil":
        return { type: "nil", pos: t.pos };
      case "variable":
        if (!this.vars.includes(t.val)) throw new ParseFault(`undefined variable "${t.val}"`, t.pos);
        return { type: "variable", pos: t.pos, idents: [t.val] };
      case "field":
        return { type: "field", pos: t.pos, idents: [t.val.slice(1)] };
      case "bool":
        return { type: "bool", pos: t.pos, value: t.val === "true" };
      case "char":
      case "number":
        return this.number(t);
      case "string":
      case "raw":
        return { type: "string", pos: t.pos, value: this.unquote(t), quoted: t.val };
      case "lparen": {
        const pipe = this.pipeline("parenthesized pipeline", "rparen");
        return { type: "pipe", pos: t.pos, pipe };
      }
    }
    throw new ParseFault(`unexpected ${describe(t)} in operand`, t.pos);
  }

  private number(t: Token): Arg {
    if (t.kind === "char") {
      const s = this.unquote(t);
      return { type: "number", pos: t.pos, text: t.val, value: s.codePointAt(0)!, isFloat: false, isChar: true };
    }
    const text = t.val;
    if (text.endsWith("i")) throw new ParseFault(`complex constants are not supported: ${text}`, t.pos);
    const clean = text.replace(/_/g, "");
    const neg = clean.startsWith("-");
    const body = clean.replace(/^[+-]/, "");
    const isHex = /^0[xX]/.test(body);
    const looksFloat = isHex ? /[.pP]/.test(body) : /[.eE]/.test(body);
    if (!looksFloat) {
      if (/^0\d+$/.test(body) && !/^0[0-7]+$/.test(body)) throw new ParseFault(`illegal number syntax: "${text}"`, t.pos);
      let big: bigint;
      try {
        const lit = /^0[0-7]+$/.test(body) ? "0o" + body.slice(1) : body;
        big = BigInt(lit);
      } catch {
        throw new ParseFault(`illegal number syntax: "${text}"`, t.pos);
      }
      if (neg) big = -big;
      const value = big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      return { type: "number", pos: t.pos, text, value, isFloat: false, isChar: false };
    }
    const f = isHex ? parseHexFloat(body) : Number(body);
    if (!Number.isFinite(f)) throw new ParseFault(`illegal number syntax: "${text}"`, t.pos);
    return { type: "number", pos: t.pos, text, value: neg ? -f : f, isFloat: true, isChar: false };
  }
}

function parseHexFloat(s: string): number {
  const m = /^0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?[pP]([+-]?\d+)$/.exec(s);
  if (!m) return NaN;
  const mant = parseInt((m[1] || "0") + (m[2] ?? ""), 16) / 16 ** (m[2]?.length ?? 0);
  return mant * 2 ** Number(m[3]);
}

function describe(t: Token): string {
  switch (t.kind) {
    case "eof":
      return "EOF";
    case "right":
      return `"}}"`;
    case "rparen":
      return `")"`;
    case "keyword":
      return `<${t.val}>`;
    case "space":
      return "space";
    default:
      return `"${t.val}"`;
  }
}
