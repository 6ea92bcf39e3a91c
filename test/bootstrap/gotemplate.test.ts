// The Go text/template engine: each construct, Go's printing and truthiness rules, and errors with
// file, line and column. Expected outputs are what Go's text/template produces for the same input.

import { describe, expect, test } from "bun:test";
import { bootstrapFuncs, GoFloat, GoStringer, GoStruct, parseTemplate, TemplateError } from "../../src/bootstrap/gotemplate/index.ts";

const data = {
  s: "str",
  n: null,
  zero: 0,
  t: true,
  list: [1, 2, 3],
  empty: [],
  strs: ["a", "b"],
  m: { b: 1, a: 2, C: 3 },
  nested: { inner: { v: "deep" } },
  f: new GoFloat(1000000),
  half: 0.5,
  dur: new GoStringer(10_000_000_000, "10s"),
  st: new GoStruct("main.T", { Name: "x", Port: 80 }),
};

function run(text: string, d: unknown = data): string {
  return parseTemplate("t.tmpl", text, { funcs: bootstrapFuncs({ HOME: "/root" }) }).execute(d);
}

function fail(text: string, d: unknown = data): TemplateError {
  try {
    run(text, d);
  } catch (e) {
    if (e instanceof TemplateError) return e;
    throw e;
  }
  throw new Error(`expected ${JSON.stringify(text)} to fail`);
}

describe("output and printing", () => {
  test.each([
    ["plain text", "plain text"],
    ["{{.s}}", "str"],
    ["{{.missing}}", "<no value>"],
    ["{{.missing.deeper}}", "<no value>"],
    ["{{.n}}", "<nil>"],
    ["{{.nested.inner.v}}", "deep"],
    ["{{.zero}} {{.t}}", "0 true"],
    ["{{.list}} {{.empty}} {{.strs}}", "[1 2 3] [] [a b]"],
    ["{{.m}}", "map[C:3 a:2 b:1]"],
    ["{{.f}} {{.half}} {{1.5}} {{1e6}} {{123456.0}} {{0.00001}}", "1e+06 0.5 1.5 1e+06 123456 1e-05"],
    ["{{.dur}}", "10s"],
    ["{{.st}} {{.st.Name}}", "{x 80}" + " x"],
    ["{{ 'a' }} {{ 0x1F }} {{ 1_000 }} {{ -3 }}", "97 31 1000 -3"],
    ['{{`raw\\n`}} {{"esc\\t|"}}', "raw\\n esc\t|"],
  ])("%s", (tmpl, want) => {
    expect(run(tmpl)).toBe(want);
  });
});

describe("whitespace trimming and comments", () => {
  test.each([
    ["a  {{- .s -}}  b", "astrb"],
    ["a\n\t {{- .s }}\n b", "astr\n b"],
    ["{{.s -}}\n\n  x", "strx"],
    ["{{-3}}", "-3"],
    ["a{{/* comment */}}b", "ab"],
    ["a \n{{- /* multi\nline */ -}}\n b", "ab"],
  ])("%j", (tmpl, want) => {
    expect(run(tmpl)).toBe(want);
  });
});

describe("control structures", () => {
  test.each([
    ["{{if .t}}yes{{end}}", "yes"],
    ["{{if .zero}}a{{else if .empty}}b{{else if .s}}c{{else}}d{{end}}", "c"],
    ["{{if .n}}a{{else}}nil is false{{end}}", "nil is false"],
    ["{{if .st}}structs are true{{end}}", "structs are true"],
    ["{{if .m}}non-empty map{{end}}{{if .empty}}x{{end}}", "non-empty map"],
    ["{{with .nested.inner}}{{.v}}{{end}}", "deep"],
    ["{{with .missing}}a{{else}}none{{end}}", "none"],
    ["{{with .missing}}a{{else with .s}}{{.}}{{end}}", "str"],
    ["{{range .list}}{{.}},{{end}}", "1,2,3,"],
    ["{{range $i, $v := .strs}}{{$i}}={{$v}};{{end}}", "0=a;1=b;"],
    ["{{range $k, $v := .m}}{{$k}}={{$v}};{{end}}", "C=3;a=2;b=1;"],
    ["{{range $v := .m}}{{$v}}{{end}}", "321"],
    ["{{range .empty}}x{{else}}empty{{end}}", "empty"],
    ["{{range .missing}}x{{else}}missing ranges like empty{{end}}", "missing ranges like empty"],
    ["{{range 3}}{{.}}{{end}}", "012"],
    ["{{range .list}}{{if eq . 2}}{{continue}}{{end}}{{if eq . 3}}{{break}}{{end}}{{.}}{{end}}", "1"],
    ["{{range .list}}{{$.s}}{{end}}", "strstrstr"],
  ])("%s", (tmpl, want) => {
    expect(run(tmpl)).toBe(want);
  });
});

describe("variables, pipelines and nested templates", () => {
  test.each([
    ["{{$x := 1}}{{$x = 2}}{{$x}}", "2"],
    ["{{$x := .s}}{{range .list}}{{$x}}{{end}}", "strstrstr"],
    ['{{$sep := ""}}{{range .strs}}{{$sep}}{{.}}{{$sep = ","}}{{end}}', "a,b"],
    ['{{"abc" | printf "%s-%s" "x"}}', "x-abc"],
    ["{{.list | len}} {{(len .list)}} {{len .m}}", "3 3 3"],
    ['{{(index .nested "inner").v}}', "deep"],
    ['{{define "t"}}[{{.}}]{{end}}{{template "t" 5}}{{template "t" .s}}', "[5][str]"],
    ['{{block "b" .s}}<{{.}}>{{end}}', "<str>"],
  ])("%s", (tmpl, want) => {
    expect(run(tmpl)).toBe(want);
  });
});

describe("functions", () => {
  test.each([
    ['{{eq 2 1 2}} {{eq .s "str"}} {{ne 1 2}} {{eq .missing "x"}} {{eq .n .missing}}', "true true true false true"],
    ['{{lt 1 2}} {{le 2 2}} {{gt "b" "a"}} {{ge 1 2}}', "true true true false"],
    ['{{and 1 0 2}}|{{and 1 2}}|{{or 0 "" "x"}}|{{or 0 ""}}|{{not .missing}}', "0|2|x||true"],
    ["{{or 1 (index .list 10)}}", "1"],
    ['{{len "héllo"}} {{index .list 1}} {{index .m "a"}} {{index .m "nope"}}', "6 2 2 <nil>"],
    ['{{slice .list 1}} {{slice "hello" 1 3}}', "[2 3] el"],
    ['{{print 1 2 "a" 3}}|{{println 1 "a"}}', "1 2a3|1 a\n"],
    [
      '{{printf "%d|%5s|%-4d|%x|%q|%v|%t|%05.2f|%s" 42 "ab" 7 255 "q\\"" .list true 3.14159 .missing}}',
      '42|   ab|7   |ff|"q\\""|[1 2 3]|true|03.14|%!s(<nil>)',
    ],
    ['{{printf "%d %d" 1}} {{printf "%d" 1 2}} {{printf "%d" "x"}}', "1 %!d(MISSING) 1%!(EXTRA int=2) %!d(string=x)"],
    ['{{js "a\'b\\"<>&=\\\\"}}', "a\\'b\\\"\\u003C\\u003E\\u0026\\u003D\\\\"],
    ['{{js "vhost\\\\..*"}}', "vhost\\\\..*"],
    ['{{html "<a href=\'x\'>&\\""}} {{urlquery "a b&c=d/é"}}', "&lt;a href=&#39;x&#39;&gt;&amp;&#34; a+b%26c%3Dd%2F%C3%A9"],
  ])("%s", (tmpl, want) => {
    expect(run(tmpl)).toBe(want);
  });

  test.each([
    ["{{toJson .m}}", '{"C":3,"a":2,"b":1}'],
    ["{{toJSON .missing}} {{toJSON .strs}}", '{} ["a","b"]'],
    ['{{toJson "<&>"}}', '"\\u003c\\u0026\\u003e"'],
    ['{{default "d" .missing}} {{default "d" .s}} {{empty .zero}} {{coalesce .zero .s}}', "d str true str"],
    ['{{ternary "y" "n" .t}} {{upper .s}} {{trimPrefix "s" .s}} {{replace "t" "T" .s}}', "y STR tr sTr"],
    ['{{join "," .strs}} {{splitList "," "x,y"}} {{list 1 "a"}} {{has "b" .strs}}', "a,b [x y] [1 a] true"],
    ['{{$d := dict "k" "v"}}{{get $d "k"}} {{hasKey $d "k"}} {{keys .m}}', "v true [C a b]"],
    ["{{add 1 2 3}} {{sub 5 2}} {{mul 2 3}} {{div 7 2}} {{mod 7 2}} {{max 1 9 3}}", "6 3 6 3 1 9"],
    ['{{quote .s 1}} {{squote .s}} {{indent 2 "a\\nb"}} {{b64enc "hi"}} {{env "HOME"}}', '"str" "1" \'str\'   a\n  b aGk= /root'],
    ['{{typeOf .s}} {{kindOf .m}} {{kindIs "slice" .list}} {{regexMatch "^s.r$" .s}}', "string map true true"],
  ])("sprig %s", (tmpl, want) => {
    expect(run(tmpl)).toBe(want);
  });
});

describe("errors name file, line and column", () => {
  test.each([
    ["{{.s", 1, 1, "unclosed action"],
    ["line1\n  {{end}}", 2, 5, "unexpected {{end}}"],
    ["{{if}}x{{end}}", 1, 3, "missing value for if"],
    ["a\nb {{nofunc 1}}", 2, 5, 'function "nofunc" not defined'],
    ["{{.s | 3}}", 1, 8, "non executable command in pipeline stage 2"],
    ["{{if true}}{{$x := 1}}{{end}}{{$x}}", 1, 32, 'undefined variable "$x"'],
    ["{{/* unclosed", 1, 1, "unclosed comment"],
    ["{{ /* not at delimiter */ }}", 1, 4, "unrecognized character in action"],
    ["{{if .t}}x", 1, 11, "unexpected EOF"],
    ["{{break}}", 1, 3, "{{break}} outside {{range}}"],
    ["{{range $a, $b, $c := .list}}{{end}}", 1, 15, "unexpected"],
    ["{{with $a, $b := .s}}{{end}}", 1, 10, "too many declarations in with"],
    ["{{ 08 }}", 1, 4, "illegal number syntax"],
  ])("parse: %j", (tmpl, line, col, msg) => {
    const e = fail(tmpl);
    expect(e.phase).toBe("parse");
    expect(e.file).toBe("t.tmpl");
    expect(e.pos).toEqual({ line, col });
    expect(e.message).toContain(msg);
    expect(e.message).toStartWith(`template t.tmpl:${line}:${col}: `);
  });

  test.each([
    ["{{.n.x}}", 1, 3, "nil pointer evaluating interface {}.x"],
    ["x\n  {{.s.x}}", 2, 5, "can't evaluate field x in type string"],
    ["{{.st.Missing}}", 1, 3, "can't evaluate field Missing in type main.T"],
    ['{{eq 1 "a"}}', 1, 3, "error calling eq: incompatible types for comparison"],
    ["{{lt true false}}", 1, 3, "error calling lt: invalid type for comparison"],
    ["{{len 3}}", 1, 3, "error calling len: len of type int"],
    ["{{index .list 5}}", 1, 3, "error calling index: index out of range: 5"],
    ["{{not 1 2}}", 1, 3, "wrong number of args for not: want 1 got 2"],
    ["{{ 1 2 }}", 1, 4, "can't give argument to non-function 1"],
    ["{{nil}}", 1, 3, "nil is not a command"],
    ["{{.m.a 1}}", 1, 3, "a is not a method but has arguments"],
    ["{{range .s}}{{end}}", 1, 9, "range can't iterate over str"],
    ['{{template "nope"}}', 1, 3, 'template "nope" not defined'],
    ["{{printf 1}}", 1, 3, "wrong type for value; expected string; got int"],
  ])("exec: %j", (tmpl, line, col, msg) => {
    const e = fail(tmpl);
    expect(e.phase).toBe("exec");
    expect(e.pos).toEqual({ line, col });
    expect(e.message).toContain(msg);
  });
});
