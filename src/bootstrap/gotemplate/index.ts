// Public face of the Go text/template engine:
//
//   const t = parseTemplate("envoy_bootstrap_tmpl.json", text, { funcs: bootstrapFuncs(env) });
//   const out = t.execute(params);
//
// Parse and execution errors are TemplateErrors naming the file, line and column.

import { builtinFuncs, type FuncMap } from "./builtins.ts";
import { ExecFault, LineIndex, TemplateError } from "./errors.ts";
import { Executor } from "./exec.ts";
import { parse, ParseFault, type ParsedTemplates } from "./parser.ts";

export type { ParsedTemplates } from "./parser.ts";
import { sprigFuncs } from "./sprig.ts";

export { TemplateError } from "./errors.ts";
export { fn, type FuncMap, type TemplateFunc } from "./builtins.ts";
export { GoFloat, GoStringer, GoStruct, formatValue, isTrue } from "./values.ts";
export { goJsonMarshal, goJsonIndent, goJsonString } from "./json.ts";
export { goQuote, goUnquote, QuoteError } from "../../lib/strconv.ts";

export interface TemplateOptions {
  /** Functions added to the builtins (they override builtins of the same name, as Funcs does in Go). */
  funcs?: FuncMap;
}

export class Template {
  private linesCache: LineIndex | undefined;
  private constructor(
    readonly file: string,
    private readonly text: string,
    private readonly parsed: ParsedTemplates,
    private readonly funcs: FuncMap,
  ) {}

  /** Line starts, built only when an error needs a line number. */
  private get lines(): LineIndex {
    return (this.linesCache ??= new LineIndex(this.text));
  }

  /**
   * A template from an already parsed tree (see serializeParsed): `text` must be the text that
   * tree was parsed from, and every function it calls must be in builtins + `opts.funcs`.
   */
  static fromParsed(file: string, text: string, parsed: ParsedTemplates, opts: TemplateOptions = {}): Template {
    return new Template(file, text, parsed, { ...builtinFuncs(), ...opts.funcs });
  }

  static parse(file: string, text: string, opts: TemplateOptions = {}): Template {
    const funcs = { ...builtinFuncs(), ...opts.funcs };
    try {
      return new Template(
        file,
        text,
        parse(text, (name) => Object.hasOwn(funcs, name)),
        funcs,
      );
    } catch (e) {
      if (e instanceof ParseFault) throw new TemplateError(file, new LineIndex(text).at(e.pos), e.message, "parse");
      throw e;
    }
  }

  /** Names of the templates declared with define/block. */
  definedNames(): string[] {
    return [...this.parsed.defined.keys()];
  }

  execute(data: unknown): string {
    const ex = new Executor({ funcs: this.funcs, defined: this.parsed.defined });
    try {
      return ex.run(this.parsed.root, data);
    } catch (e) {
      if (e instanceof ExecFault) {
        throw new TemplateError(this.file, this.lines.at(ex.at.pos), `executing at <${ex.at.text}>: ${e.message}`, "exec");
      }
      if (e instanceof RangeError) {
        throw new TemplateError(this.file, this.lines.at(ex.at.pos), `executing at <${ex.at.text}>: ${e.message}`, "exec");
      }
      throw e;
    }
  }
}

/** The function map Istio gives its bootstrap template: builtins + sprig's generic functions + toJSON. */
export function bootstrapFuncs(env: Readonly<Record<string, string | undefined>> = {}): FuncMap {
  return sprigFuncs(env);
}

export function parseTemplate(file: string, text: string, opts: TemplateOptions = {}): Template {
  return Template.parse(file, text, opts);
}

/** Parse `text` (functions named in `funcs` allowed) into JSON that deserializeParsed reads back. */
export function serializeParsed(text: string, funcs: FuncMap): string {
  const all = { ...builtinFuncs(), ...funcs };
  const parsed = parse(text, (name) => Object.hasOwn(all, name));
  return JSON.stringify({ root: parsed.root, defined: [...parsed.defined] }, (_k, v: unknown) => (typeof v === "bigint" ? { $bigint: v.toString() } : v));
}

export function deserializeParsed(json: string): ParsedTemplates {
  const o = JSON.parse(json, (_k, v: unknown) => (v !== null && typeof v === "object" && "$bigint" in v ? BigInt((v as { $bigint: string }).$bigint) : v)) as {
    root: ParsedTemplates["root"];
    defined: [string, ParsedTemplates["root"]][];
  };
  return { root: o.root, defined: new Map(o.defined) };
}
