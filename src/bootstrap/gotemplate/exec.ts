// Executes a parsed template the way Go's text/template does: dot and variable scoping, field
// chains over maps and structs (missing map key = "<no value>", field of nil = error), function
// calls with Go's arity checks, short-circuit and/or, range over slices, maps (sorted keys) and
// integers, with break/continue, and nested templates.

import type { Arg, Command, Node, Pipe } from "./ast.ts";
import { argText } from "./ast.ts";
import type { FuncMap } from "./builtins.ts";
import { ExecFault } from "./errors.ts";
import { formatValue, GoFloat, GoStruct, isTrue, kindOf, mapEntries, mapGet, numberValue, typeName } from "./values.ts";

const NO_FINAL: unique symbol = Symbol("no final");
type Final = unknown | typeof NO_FINAL;

/** Functions whose Go parameters are reflect.Value keep "no value"; the rest get nil. */
const REFLECT_ARG_FUNCS = new Set(["and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "slice", "call"]);
const MAX_DEPTH = 100_000;

class BreakSignal {}
class ContinueSignal {}

export interface ExecContext {
  funcs: FuncMap;
  defined: Map<string, Node[]>;
}

export class Executor {
  private vars: { name: string; value: unknown }[] = [];
  private readonly out: string[] = [];
  private depth = 0;
  /** Offset and text of the construct being evaluated, for error positions. */
  at: { pos: number; text: string } = { pos: 0, text: "" };

  constructor(private readonly ctx: ExecContext) {}

  run(nodes: Node[], data: unknown): string {
    this.vars = [{ name: "$", value: data }];
    this.walkList(data, nodes);
    return this.out.join("");
  }

  private walkList(dot: unknown, nodes: Node[]): void {
    for (const n of nodes) this.walk(dot, n);
  }

  private walk(dot: unknown, node: Node): void {
    switch (node.type) {
      case "text":
        this.out.push(node.text);
        return;
      case "action": {
        const v = this.evalPipeline(dot, node.pipe);
        if (node.pipe.decl.length === 0) this.out.push(this.printable(v));
        return;
      }
      case "if":
      case "with": {
        const mark = this.vars.length;
        const v = this.evalPipeline(dot, node.pipe);
        if (isTrue(v)) this.walkList(node.type === "with" ? v : dot, node.list);
        else if (node.elseList) this.walkList(dot, node.elseList);
        this.vars.length = mark;
        return;
      }
      case "range":
        return this.walkRange(dot, node);
      case "template": {
        const body = this.ctx.defined.get(node.name);
        this.at = { pos: node.pos, text: `{{template "${node.name}"}}` };
        if (!body) throw new ExecFault(`template "${node.name}" not defined`);
        if (++this.depth > MAX_DEPTH) throw new ExecFault(`exceeded maximum template depth (${MAX_DEPTH})`);
        const newDot = node.pipe ? this.evalPipeline(dot, node.pipe) : undefined;
        const saved = this.vars;
        this.vars = [{ name: "$", value: newDot }];
        try {
          this.walkList(newDot, body);
        } finally {
          this.vars = saved;
          this.depth--;
        }
        return;
      }
      case "break":
        throw new BreakSignal();
      case "continue":
        throw new ContinueSignal();
    }
  }

  private walkRange(dot: unknown, node: Extract<Node, { list: Node[] }>): void {
    const mark = this.vars.length;
    const pipe = node.pipe;
    const val = this.evalPipeline(dot, { ...pipe, decl: [] });
    const items: [unknown, unknown][] = [];
    switch (kindOf(val)) {
      case "slice":
        (val as unknown[]).forEach((v, i) => items.push([i, v]));
        break;
      case "map":
        items.push(...mapEntries(val));
        break;
      case "int": {
        const n = numberValue(val);
        if (n < 0) throw new ExecFault(`range can't iterate over ${n}`);
        for (let i = 0; i < n; i++) items.push([i, i]);
        break;
      }
      case "invalid":
      case "nil":
        break;
      default:
        this.at = { pos: pipe.pos, text: "range" };
        throw new ExecFault(`range can't iterate over ${formatValue(val)}`);
    }
    if (items.length === 0) {
      this.vars.length = mark;
      if (node.elseList) this.walkList(dot, node.elseList);
      return;
    }
    for (const [k, v] of items) {
      if (pipe.decl.length === 1) this.setVar(pipe.decl[0]!, v, pipe.isAssign);
      else if (pipe.decl.length === 2) {
        this.setVar(pipe.decl[0]!, k, pipe.isAssign);
        this.setVar(pipe.decl[1]!, v, pipe.isAssign);
      }
      const inner = this.vars.length;
      try {
        this.walkList(v, node.list);
      } catch (e) {
        if (e instanceof BreakSignal) break;
        if (!(e instanceof ContinueSignal)) throw e;
      } finally {
        this.vars.length = inner;
      }
      if (!pipe.isAssign) this.vars.length = mark;
    }
    this.vars.length = mark;
  }

  private setVar(name: string, value: unknown, assign: boolean): void {
    if (!assign) {
      this.vars.push({ name, value });
      return;
    }
    for (let i = this.vars.length - 1; i >= 0; i--) {
      if (this.vars[i]!.name === name) {
        this.vars[i]!.value = value;
        return;
      }
    }
    throw new ExecFault(`undefined variable: ${name}`);
  }

  private varValue(name: string): unknown {
    for (let i = this.vars.length - 1; i >= 0; i--) if (this.vars[i]!.name === name) return this.vars[i]!.value;
    throw new ExecFault(`undefined variable: ${name}`);
  }

  private printable(v: unknown): string {
    return formatValue(v, true);
  }

  // ---- pipelines and commands ---------------------------------------------------------------
  evalPipeline(dot: unknown, pipe: Pipe): unknown {
    let value: Final = NO_FINAL;
    for (const cmd of pipe.cmds) value = this.evalCommand(dot, cmd, value);
    const result = value === NO_FINAL ? undefined : value;
    pipe.decl.forEach((name) => this.setVar(name, result, pipe.isAssign));
    return result;
  }

  private evalCommand(dot: unknown, cmd: Command, final: Final): unknown {
    const first = cmd.args[0]!;
    this.at = { pos: first.pos, text: cmd.args.map(argText).join(" ") };
    switch (first.type) {
      case "field":
        return this.evalFieldChain(dot, first.idents, cmd.args, final);
      case "chain": {
        const recv = this.evalArg(dot, first.node);
        if (first.node.type === "nil") throw new ExecFault("indirection through explicit nil");
        return this.evalFieldChain(recv, first.fields, cmd.args, final);
      }
      case "variable": {
        const value = this.varValue(first.idents[0]!);
        if (first.idents.length === 1) {
          this.notAFunction(cmd.args, final);
          return value;
        }
        return this.evalFieldChain(value, first.idents.slice(1), cmd.args, final);
      }
      case "identifier":
        return this.evalFunction(dot, first.name, cmd.args, final);
      case "pipe":
        this.notAFunction(cmd.args, final);
        return this.evalPipeline(dot, first.pipe);
    }
    this.notAFunction(cmd.args, final);
    if (first.type === "nil") throw new ExecFault("nil is not a command");
    return this.evalArg(dot, first);
  }

  private notAFunction(args: Arg[], final: Final): void {
    if (args.length > 1 || final !== NO_FINAL) throw new ExecFault(`can't give argument to non-function ${argText(args[0]!)}`);
  }

  private evalArg(dot: unknown, arg: Arg): unknown {
    switch (arg.type) {
      case "dot":
        return dot;
      case "nil":
        return null;
      case "bool":
        return arg.value;
      case "string":
        return arg.value;
      case "number":
        return arg.isFloat ? new GoFloat(arg.value as number) : arg.value;
      case "field":
        return this.evalFieldChain(dot, arg.idents, [arg], NO_FINAL);
      case "variable": {
        const v = this.varValue(arg.idents[0]!);
        return arg.idents.length === 1 ? v : this.evalFieldChain(v, arg.idents.slice(1), [arg], NO_FINAL);
      }
      case "chain":
        return this.evalFieldChain(this.evalArg(dot, arg.node), arg.fields, [arg], NO_FINAL);
      case "pipe":
        return this.evalPipeline(dot, arg.pipe);
      case "identifier":
        return this.evalFunction(dot, arg.name, [arg], NO_FINAL);
    }
  }

  private evalFieldChain(receiver: unknown, idents: string[], args: Arg[], final: Final): unknown {
    let r = receiver;
    for (let i = 0; i < idents.length - 1; i++) r = this.evalField(idents[i]!, r, false);
    const hasArgs = args.length > 1 || final !== NO_FINAL;
    return this.evalField(idents[idents.length - 1]!, r, hasArgs);
  }

  private evalField(name: string, receiver: unknown, hasArgs: boolean): unknown {
    if (receiver === undefined) return undefined;
    if (receiver === null) throw new ExecFault(`nil pointer evaluating interface {}.${name}`);
    if (receiver instanceof GoStruct) {
      if (!receiver.has(name)) throw new ExecFault(`can't evaluate field ${name} in type ${receiver.typeName}`);
      if (hasArgs) throw new ExecFault(`${name} has arguments but cannot be invoked as function`);
      return receiver.get(name);
    }
    if (kindOf(receiver) === "map") {
      if (hasArgs) throw new ExecFault(`${name} is not a method but has arguments`);
      return mapGet(receiver, name);
    }
    throw new ExecFault(`can't evaluate field ${name} in type ${typeName(receiver)}`);
  }

  private evalFunction(dot: unknown, name: string, args: Arg[], final: Final): unknown {
    const f = this.ctx.funcs[name];
    if (!f) throw new ExecFault(`"${name}" is not a defined function`);
    const rest = args.slice(1);
    const keepInvalid = REFLECT_ARG_FUNCS.has(name);
    const conv = (v: unknown) => (v === undefined && !keepInvalid ? null : v);
    const count = rest.length + (final === NO_FINAL ? 0 : 1);
    if (count < f.min) {
      throw new ExecFault(`wrong number of args for ${name}: want ${f.max === f.min ? "" : "at least "}${f.min} got ${count}`);
    }
    if (count > f.max) throw new ExecFault(`wrong number of args for ${name}: want ${f.max} got ${count}`);
    if (name === "and" || name === "or") {
      let v: unknown;
      const thunks = rest.map((a) => () => this.evalArg(dot, a));
      if (final !== NO_FINAL) thunks.push(() => final);
      for (const t of thunks) {
        v = t();
        if (isTrue(v) === (name === "or")) return v;
      }
      return v;
    }
    const argv = rest.map((a) => conv(this.evalArg(dot, a)));
    if (final !== NO_FINAL) argv.push(conv(final));
    const where = { pos: args[0]!.pos, text: args.map(argText).join(" ") };
    try {
      return f.call(argv);
    } catch (e) {
      this.at = where;
      if (e instanceof ExecFault) throw new ExecFault(`error calling ${name}: ${e.message}`);
      if (e instanceof Error) throw new ExecFault(`error calling ${name}: ${e.message}`);
      throw e;
    }
  }
}
