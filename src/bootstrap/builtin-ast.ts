// A Bun macro (imported `with { type: "macro" }` by render.ts): the built-in bootstrap template
// is parsed when the agent is bundled, and its parse tree is inlined as JSON, so the agent's start
// does not run the template parser (~3 ms of a cold start). Templates read from files are parsed
// at run time as before. test/bootstrap/builtin-ast.test.ts checks the tree equals a fresh parse.

import text from "./default_bootstrap.tmpl" with { type: "text" };
import { bootstrapFuncs, serializeParsed } from "./gotemplate/index.ts";

export function builtinTemplateTree(): string {
  return serializeParsed(text, bootstrapFuncs({}));
}
