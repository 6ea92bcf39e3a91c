import { describe, expect, test } from "bun:test";
import { FlagError, parseFlags, parseGoInt, type FlagSpec } from "../../src/lib/flags.ts";

const specs: FlagSpec[] = [
  { name: "domain", type: "string", default: "", usage: "" },
  { name: "concurrency", type: "int", default: 0, usage: "" },
  { name: "profiling", type: "bool", default: true, usage: "" },
  { name: "dry-run", short: "n", type: "bool", default: false, usage: "" },
  { name: "envoy-port", short: "p", type: "string", default: "15001", usage: "" },
  { name: "log_target", type: "stringArray", default: ["stdout"], usage: "" },
  { name: "timeout", type: "duration", default: 5000, usage: "" },
];

const SYNTAX_CASES: [string[], string, unknown][] = [
  [["--domain=x.svc"], "domain", "x.svc"],
  [["--domain", "x.svc"], "domain", "x.svc"],
  [["--concurrency=4"], "concurrency", 4],
  [["--concurrency", "0x10"], "concurrency", 16],
  [["--profiling=false"], "profiling", false],
  [["--profiling"], "profiling", true],
  [["-p", "15002"], "envoy-port", "15002"],
  [["-p15003"], "envoy-port", "15003"],
  [["-p=15004"], "envoy-port", "15004"],
  [["-n"], "dry-run", true],
  [["-np", "1"], "envoy-port", "1"],
  [["--timeout=1m30s"], "timeout", 90_000],
  [["--log_target", "a", "--log_target=b"], "log_target", ["a", "b"]],
];

describe("pflag syntax", () => {
  for (const [argv, name, value] of SYNTAX_CASES) {
    test(`${JSON.stringify(argv)} sets ${name}`, () => {
      const r = parseFlags(argv, specs);
      expect(r.values[name] as unknown).toEqual(value);
      expect(r.set.has(name)).toBe(true);
    });
  }

  test("defaults when not set; repeated array replaces the default", () => {
    const r = parseFlags([], specs);
    expect(r.values).toMatchObject({ domain: "", concurrency: 0, profiling: true, log_target: ["stdout"], timeout: 5000 });
    expect(r.set.size).toBe(0);
  });

  test("a bare bool never consumes the next argument", () => {
    const r = parseFlags(["--profiling", "false"], specs);
    expect(r.values.profiling).toBe(true);
    expect(r.positionals).toEqual(["false"]);
  });

  test("positionals and --", () => {
    const r = parseFlags(["sidecar", "--domain", "d", "--", "--not-a-flag"], specs);
    expect(r.positionals).toEqual(["sidecar", "--not-a-flag"]);
  });

  test("unknown flags: error by default", () => {
    expect(() => parseFlags(["--nope"], specs)).toThrow(FlagError);
    expect(() => parseFlags(["-z"], specs)).toThrow(/unknown shorthand flag: 'z'/);
  });

  test("unknown flags accepted and collected when allowed; a following value is swallowed like pflag", () => {
    const r = parseFlags(["--old-flag", "v", "--other=1", "--domain", "d", "pos"], specs, { allowUnknown: true });
    expect(r.unknown).toEqual(["--old-flag", "v", "--other=1"]);
    expect(r.values.domain).toBe("d");
    expect(r.positionals).toEqual(["pos"]);
  });

  test.each([
    [["--concurrency=abc"], /invalid argument "abc" for "--concurrency"/],
    [["--profiling=maybe"], /invalid argument "maybe" for "--profiling"/],
    [["--timeout=5"], /invalid argument "5" for "--timeout"/],
    [["--domain"], /flag needs an argument: --domain/],
    [["-p"], /flag needs an argument: 'p'/],
  ] as [string[], RegExp][])("bad value %p names the flag", (argv, re) => {
    expect(() => parseFlags(argv, specs)).toThrow(re);
  });

  test("Go integer forms", () => {
    expect(parseGoInt("010")).toBe(8);
    expect(parseGoInt("0b101")).toBe(5);
    expect(parseGoInt("-42")).toBe(-42);
    expect(parseGoInt("1_000")).toBe(1000);
    expect(parseGoInt("4.5")).toBeUndefined();
  });
});
