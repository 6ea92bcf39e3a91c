// The nesting pre-scan: its depth for each YAML shape, checked two ways — a literal, and the depth
// of the value the `yaml` parser itself builds from the same text (an independent reading).
import { describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { yamlNestingDepth } from "../../src/lib/yamldepth.ts";

/** Depth of a parsed value: a collection is one level more than its deepest member. */
function parsedDepth(v: unknown): number {
  if (!v || typeof v !== "object") return 0;
  let m = 0;
  for (const x of Object.values(v)) m = Math.max(m, parsedDepth(x));
  return 1 + m;
}

const SHAPES: [string, string, number][] = [
  ["a scalar", "just text", 0],
  ["one mapping", "a: 1", 1],
  ["a nested mapping", "a:\n  b: 1", 2],
  ["a sequence at its key's indentation", "a:\n- 1\n- 2\nb: 3", 2],
  ["compact sequences and a mapping on one line", "- - - a: b\n      c: d", 4],
  ["flow inside block", "tracing: [[1]]", 3],
  ["flow mapping and sequence", "a: {b: [c, {d: e}]}", 4],
  ["brackets in a single-quoted scalar", "x: 'a[b'", 1],
  ["brackets in a double-quoted scalar", 'x: "[[["', 1],
  ["brackets inside a plain block scalar", "x: a[[b", 1],
  ["a literal block scalar holding brackets and keys", "x: |\n  [[[[\n  {{{\n  a:\n    b: c\ny: 1", 1],
  ["a folded block scalar holding indicators", "x: >-\n  - a: b\n    - c\n", 1],
  ["a block scalar in a sequence", "- |\n  [[[\n  [[[\n- b", 1],
  ["a complex key", "? a\n: b", 1],
  ["anchors and tags before nested values", "a: &x\n  b: !!map\n    c: 1", 3],
  ["comments holding brackets", "# [[[\na: 1 # [[\n", 1],
  ["a comment inside flow", "a: [b, # [[\n c]", 2],
  ["quoted flow keys and values holding brackets", "a: {'x[': \"y{\"}", 2],
  ["sequences of sequences, block style", "- a\n-\n  - b\n  -\n    - c", 3],
  ["deep block mapping ending in flow", "a:\n  b:\n    c:\n      d:\n        e: [1, {f: g}]", 7],
  ["an escaped single quote", "a: 'it''s [' ", 1],
  ["an escaped double quote", 'a: "esc \\" ["', 1],
  ["a quoted scalar over two lines inside flow", 'a: ["x\n [y"]', 2],
  ["an apostrophe inside a plain scalar", "key: don't [stop", 1],
  ["an apostrophe inside a flow plain scalar", "a: [don't, b]", 2],
  ["mappings inside a sequence inside a mapping", "a:\n  - b: 1\n    c:\n      - d\n  - e", 4],
  ["quoted keys", "'q': 1\n\"r\":\n  s: 2", 2],
  ["a flow mapping holding a key, in a sequence", "- {b: c}\n- [d, {e: f}]", 3],
  ["CRLF line ends", "a:\r\n  b:\r\n    c: 1\r\n", 3],
  ["JSON", '{"a": {"b": [1, [2, {"c": 3}]]}}', 5],
];

describe("yamlNestingDepth", () => {
  test.each(SHAPES)("%s", (_what, text, want) => {
    expect(yamlNestingDepth(text, 99)).toBe(want);
    expect(parsedDepth(parse(text))).toBe(want);
  });

  test("stops at the first level past the limit, and reports limit + 1", () => {
    expect(yamlNestingDepth("a: [[[]]]", 4)).toBe(4);
    expect(yamlNestingDepth("a: [[[]]]", 3)).toBe(4);
    expect(yamlNestingDepth("a: [[[]]]", 2)).toBe(3);
    expect(yamlNestingDepth("a:\n  b:\n    c: 1", 2)).toBe(3);
    expect(yamlNestingDepth("a:\n  b:\n    c: 1", 3)).toBe(3);
    // Unclosed: nothing after the limit is read, so the rest need not be YAML.
    expect(yamlNestingDepth(`a: ${"[".repeat(10)}\u0000 not yaml`, 5)).toBe(6);
  });

  test("a sibling after a deep branch is counted from its own level", () => {
    expect(yamlNestingDepth("a:\n  b:\n    c:\n      d: 1\ne: [1]", 99)).toBe(4);
    expect(yamlNestingDepth("a: [[[1]]]\nb: [1]", 99)).toBe(4);
  });

  test("a 1 MiB run of '[' is refused in bounded time (yaml.parse took 87 s on it)", () => {
    const text = `tracing: ${"[".repeat(1 << 20)}`;
    const t0 = performance.now();
    expect(yamlNestingDepth(text, 64)).toBe(65);
    expect(performance.now() - t0).toBeLessThan(500);
  });

  test("a 1 MiB document of shallow lines is scanned in bounded time", () => {
    const text = "a:\n" + "  - [1, 2, {b: 'c'}] # x\n".repeat(40_000);
    const t0 = performance.now();
    expect(yamlNestingDepth(text, 64)).toBe(4);
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});
