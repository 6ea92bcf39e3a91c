// A ProxyConfig layer nested past MAX_LAYER_DEPTH (64) is refused before the YAML parser runs,
// with the message the depth check on the parsed value gives; 64 levels pass, 65 do not, in
// flow and block style, in PROXY_CONFIG and in a mesh file (one level deeper, under defaultConfig).
import { describe, expect, test } from "bun:test";
import { ConfigError, parseLayer, type LayerInput } from "../../src/config/layering.ts";

const env = (text: string): LayerInput => ({ layer: "PROXY_CONFIG", origin: "PROXY_CONFIG", text });
const mesh = (text: string): LayerInput => ({ layer: "mesh config", origin: "mesh config /m", text, meshConfig: true });
const REFUSED = "nested deeper than 64 levels (or an alias refers to itself)";

/** `tracing:` holding collections so that the text nests `levels` deep (the layer's mapping is level 1). */
const flow = (levels: number) => `tracing: ${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}`;
const block = (levels: number, indent = "") =>
  Array.from({ length: levels }, (_, k) => `${indent}${"  ".repeat(k)}${k === 0 ? "tracing" : "a"}:${k === levels - 1 ? " 1" : ""}`).join("\n");
/** Block sequences: `tracing:` then `- ` items, one level each. */
const blockSeq = (levels: number, indent = "") =>
  `${indent}tracing:\n` + Array.from({ length: levels - 1 }, (_, k) => `${indent}${"  ".repeat(k + 1)}-${k === levels - 2 ? " x" : ""}`).join("\n");

function refusal(input: LayerInput): string {
  try {
    parseLayer(input);
  } catch (e) {
    if (e instanceof ConfigError) return e.message;
    throw e;
  }
  return "accepted";
}

describe("ProxyConfig nesting limit", () => {
  test.each([
    ["flow", flow],
    ["block mappings", block],
    ["block sequences", blockSeq],
  ])("PROXY_CONFIG, %s: 64 levels pass, 65 are refused", (_style, make) => {
    expect(refusal(env(make(64)))).toBe("accepted");
    expect(refusal(env(make(65)))).toBe(`PROXY_CONFIG: ${REFUSED}`);
  });

  test.each([
    ["flow", (n: number) => `defaultConfig:\n  ${flow(n)}`],
    ["block mappings", (n: number) => `defaultConfig:\n${block(n, "  ")}`],
    ["block sequences", (n: number) => `defaultConfig:\n${blockSeq(n, "  ")}`],
  ])("mesh file, %s under defaultConfig: 64 levels pass, 65 are refused", (_style, make) => {
    expect(refusal(mesh(make(64)))).toBe("accepted");
    expect(refusal(mesh(make(65)))).toBe(`mesh config /m: ${REFUSED}`);
  });

  test("the 64-level value is what the parser built (the pre-scan does not cut it short)", () => {
    let v: unknown = (parseLayer(env(flow(64))) as { tracing: unknown }).tracing;
    let depth = 0;
    while (Array.isArray(v)) [v, depth] = [v[0], depth + 1];
    expect(depth).toBe(63);
  });

  test("refused before parsing: past the limit, what follows need not be YAML (the parser would call it malformed)", () => {
    const text = `tracing: ${"[".repeat(70)} : ] } "unterminated`;
    expect(refusal(env(text))).toBe(`PROXY_CONFIG: ${REFUSED}`);
  });

  test("a 1 MiB annotation of '[' is refused in bounded time (the parser spent 16 s on it, then overflowed its stack)", () => {
    const text = "[".repeat(1 << 20);
    const t0 = performance.now();
    expect(refusal({ layer: "annotation", origin: "annotation proxy.istio.io/config", text })).toBe(`annotation proxy.istio.io/config: ${REFUSED}`);
    expect(performance.now() - t0).toBeLessThan(500);
  });
});
