// Parse tree of a Go text/template, close to Go's parse package. `pos` is a source offset.

export type Node =
  | { type: "text"; pos: number; text: string }
  | { type: "action"; pos: number; pipe: Pipe }
  | { type: "if" | "with" | "range"; pos: number; pipe: Pipe; list: Node[]; elseList: Node[] | null }
  | { type: "template"; pos: number; name: string; pipe: Pipe | null }
  | { type: "break" | "continue"; pos: number };

export interface Pipe {
  pos: number;
  /** Declared or assigned variables (`$x :=`, `$i, $v :=`, `$x =`). */
  decl: string[];
  isAssign: boolean;
  cmds: Command[];
}

export interface Command {
  pos: number;
  args: Arg[];
}

export type Arg =
  | { type: "field"; pos: number; idents: string[] }
  | { type: "variable"; pos: number; idents: string[] } // idents[0] is "$name"
  | { type: "identifier"; pos: number; name: string }
  | { type: "chain"; pos: number; node: Arg; fields: string[] }
  | { type: "dot"; pos: number }
  | { type: "nil"; pos: number }
  | { type: "bool"; pos: number; value: boolean }
  | { type: "number"; pos: number; text: string; value: number | bigint; isFloat: boolean; isChar: boolean }
  | { type: "string"; pos: number; value: string; quoted: string }
  | { type: "pipe"; pos: number; pipe: Pipe };

/** The Go source form of an argument, for error messages (`at <.a.b>`). */
export function argText(a: Arg): string {
  switch (a.type) {
    case "field":
      return "." + a.idents.join(".");
    case "variable":
      return a.idents.join(".");
    case "identifier":
      return a.name;
    case "chain":
      return argText(a.node) + "." + a.fields.join(".");
    case "dot":
      return ".";
    case "nil":
      return "nil";
    case "bool":
      return String(a.value);
    case "number":
      return a.text;
    case "string":
      return a.quoted;
    case "pipe":
      return "(" + pipeText(a.pipe) + ")";
  }
}

export function pipeText(p: Pipe): string {
  const decl = p.decl.length ? p.decl.join(", ") + (p.isAssign ? " = " : " := ") : "";
  return decl + p.cmds.map((c) => c.args.map(argText).join(" ")).join(" | ");
}
