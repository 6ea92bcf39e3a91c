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
import { sprigFuncs } from "./sprig.ts";

export { TemplateError } from "./errors.ts";
export { fn, type FuncMap, type TemplateFunc } from "./builtins.ts";
export { GoFloat, GoStringer, GoStruct, formatValue, isTrue } from "./values.ts";
export { goJsonMarshal, goJsonIndent, goJsonString } from "./json.ts";
export { goQuote, goUnquote, QuoteError } from "./strconv.ts";

export interface TemplateOptions {
  /** Functions added to the builtins (they override builtins of the same name, as Funcs does in Go). */
  funcs?: FuncMap;
}

export class Template {
  private readonly lines: LineIndex;
  private constructor(
    readonly file: string,
    private readonly text: string,
    private readonly parsed: ParsedTemplates,
    private readonly funcs: FuncMap,
  ) {
    this.lines = new LineIndex(text);
  }

  static parse(file: string, text: string, opts: TemplateOptions = {}): Template {
    const funcs = { ...builtinFuncs(), ...opts.funcs };
    try {
      return new Template(file, text, parse(text, (name) => Object.hasOwn(funcs, name)), funcs);
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
