// The built-in template's tree, parsed at bundle time by a macro, is exactly what the parser
// gives at run time, and bigint literals survive the JSON round trip.

import { expect, test } from "bun:test";
import { builtinTemplateTree } from "../../src/bootstrap/builtin-ast.ts";
import { builtinTemplateText } from "../../src/bootstrap/render.ts";
import { bootstrapFuncs, deserializeParsed, parseTemplate, serializeParsed, Template } from "../../src/bootstrap/gotemplate/index.ts";
import { parse } from "../../src/bootstrap/gotemplate/parser.ts";

test("the inlined tree equals a fresh parse of the built-in template", () => {
  const funcs = { ...bootstrapFuncs({}) };
  const fresh = parse(builtinTemplateText(), () => true);
  const tree = deserializeParsed(builtinTemplateTree());
  expect(tree.root).toEqual(fresh.root);
  expect([...tree.defined]).toEqual([...fresh.defined]);
  expect(Object.keys(funcs).length).toBeGreaterThan(0);
});

test("a tree round-trips through JSON, bigints included, and renders like the parsed template", () => {
  const text = '{{ define "x" }}[{{ . }}]{{ end }}{{ template "x" 18446744073709551615 }} {{ if gt .n 2 }}{{ .s | quote }}{{ end }} {{ 0x10 }} {{ 1.5 }}';
  const viaJson = Template.fromParsed("t", text, deserializeParsed(serializeParsed(text, bootstrapFuncs({}))), { funcs: bootstrapFuncs({}) });
  const direct = parseTemplate("t", text, { funcs: bootstrapFuncs({}) });
  const data = { n: 3, s: 'a"b' };
  expect(viaJson.execute(data)).toBe(direct.execute(data));
  expect(viaJson.execute(data)).toContain("[18446744073709551615]");
});

test("errors from a pre-parsed template still name the line", () => {
  const text = "line one\n{{ .a.b.c }}";
  const t = Template.fromParsed("t", text, deserializeParsed(serializeParsed(text, {})));
  expect(() => t.execute({ a: 1 })).toThrow(/t:2:/);
});
