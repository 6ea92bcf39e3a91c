// The YAML parser's warnings (an unresolved tag, an ambiguous alias) on a ProxyConfig layer become
// the loader's warnings, named by layer, and never reach process.emitWarning: that printed a raw
// "(node:PID) YAMLWarning" line on stderr, outside Istio's log format and --log_as_json.
import { afterEach, describe, expect, test } from "bun:test";
import { loadAgentConfig } from "../../src/config/load.ts";
import { parseYamlOrJson } from "../../src/lib/yaml.ts";
import { annotationsFile, inputs } from "./support.ts";

const seen: string[] = [];
const onWarning = (w: Error) => seen.push(w.message);

/** The process warnings emitted up to a sentinel emitted after `act` (warnings are delivered asynchronously). */
async function processWarningsDuring(act: () => void): Promise<string[]> {
  seen.length = 0;
  process.on("warning", onWarning);
  act();
  const sentinel = `sentinel ${Math.random()}`;
  process.emitWarning(sentinel);
  const deadline = Date.now() + 5000;
  while (!seen.includes(sentinel) && Date.now() < deadline) await Bun.sleep(5);
  return seen.slice(0, seen.indexOf(sentinel));
}

afterEach(() => void process.off("warning", onWarning));

describe("YAML warnings on ProxyConfig layers", () => {
  test("an unresolved tag in PROXY_CONFIG: read as a string (as Go's yaml does), one loader warning naming the layer, no process warning", async () => {
    let loaded: ReturnType<typeof loadAgentConfig> | undefined;
    const emitted = await processWarningsDuring(() => {
      loaded = loadAgentConfig(inputs({ env: { PROXY_CONFIG: "discoveryAddress: !foo istiod.example:15012\n" } }));
    });
    expect(emitted).toEqual([]);
    expect(loaded!.config.proxyConfig.discoveryAddress).toBe("istiod.example:15012");
    expect(loaded!.warnings.filter((w) => w.includes("tag"))).toEqual(["PROXY_CONFIG: Unresolved tag: !foo"]);
  });

  test("the same in the pod annotation: named by the annotation", async () => {
    let loaded: ReturnType<typeof loadAgentConfig> | undefined;
    const emitted = await processWarningsDuring(() => {
      loaded = loadAgentConfig(inputs({ files: { "./etc/istio/pod/annotations": annotationsFile({ "proxy.istio.io/config": "statNameLength: !bar 10\n" }) } }));
    });
    expect(emitted).toEqual([]);
    expect(loaded!.warnings.filter((w) => w.includes("tag"))).toEqual(["annotation proxy.istio.io/config: Unresolved tag: !bar"]);
  });

  test("parseYamlOrJson with a sink: same value as yaml.parse, errors still thrown; without one, yaml.parse's own behaviour", async () => {
    const sink: string[] = [];
    expect(parseYamlOrJson("a: !x 1\nb: [1, 2]\n", {}, sink)).toEqual({ a: "1", b: [1, 2] });
    expect(sink).toEqual(["Unresolved tag: !x at line 1, column 4"]);
    expect(() => parseYamlOrJson("a: [1,\n", { prettyErrors: false }, [])).toThrow(/Flow sequence|flow collection|Missing/i);
    expect(parseYamlOrJson("", {}, [])).toBeNull();
    const emitted = await processWarningsDuring(() => parseYamlOrJson("a: !y 1\n"));
    expect(emitted.map((m) => m.trim().split(" at line")[0])).toEqual(["Unresolved tag: !y"]);
  });
});
