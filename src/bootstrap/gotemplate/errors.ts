// Errors of the Go text/template engine. Every error names the template file, the line and the
// column (1-based, in characters) where parsing or execution failed, so a user with a broken
// custom bootstrap template sees exactly where to look.

export interface SourcePos {
  line: number;
  col: number;
}

export class TemplateError extends Error {
  override name = "TemplateError";
  constructor(
    readonly file: string,
    readonly pos: SourcePos,
    readonly detail: string,
    readonly phase: "parse" | "exec",
  ) {
    super(`template ${file}:${pos.line}:${pos.col}: ${detail}`);
  }
}

/** Maps character offsets to line and column for one source text. */
export class LineIndex {
  private readonly starts: number[] = [0];
  constructor(text: string) {
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) this.starts.push(i + 1);
  }
  at(offset: number): SourcePos {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, col: offset - this.starts[lo]! + 1 };
  }
}

/** Thrown by functions and value operations; the executor adds file, line and column. */
export class ExecFault extends Error {
  override name = "ExecFault";
}
