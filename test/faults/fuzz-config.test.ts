// The configuration fuzzer: PROXY_CONFIG (YAML and JSON), the mesh config file, the pod
// annotations and labels files (downward-API format), ISTIO_KUBE_APP_PROBERS, the command line and
// the environment. Seeded; FAULTS_FUZZ_SEED reproduces a run, FAULTS_FUZZ_COUNT sets the inputs per
// surface (10,000 in CI), FAULTS_FUZZ_BINARY the sample run through the compiled agent (70).
//
// In-process, every input goes through what `agent proxy` parses before it serves
// (config-case.ts): it is accepted, or rejected by a known error naming the input; anything else
// (an uncaught exception, a rejection naming nothing) fails the test with the seed, the index and
// the input. A sample then runs through dist/agent: what the loader accepted must start (its status
// port answers) and exit 0 on SIGTERM; what it rejected must exit non-zero naming the input; never
// a stack trace.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import { sandbox, start } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";
import { rng } from "./config-inputs.ts";
import { describeCase, loadLikeTheAgent, makeCase, MESH_PATH, SURFACES, BINARY_UNSAFE_TEXT, type ConfigCase, type Verdict } from "./config-case.ts";

const COUNT = Number(process.env.FAULTS_FUZZ_COUNT ?? 10_000);
const BINARY_COUNT = Number(process.env.FAULTS_FUZZ_BINARY ?? 70);
const SEED = Number(process.env.FAULTS_FUZZ_SEED ?? 22);
/** Agents run at once in the binary sample. */
const PARALLEL = 4;

describe(`config fuzz, in-process (${COUNT} inputs per surface, seed ${SEED})`, () => {
  for (const [i, surface] of SURFACES.entries()) {
    test(`${surface}: every input accepted or rejected naming it; no crash`, () => {
      const r = rng(SEED * 100 + i);
      const counts = { accepted: 0, rejected: 0 };
      const t0 = performance.now();
      for (let n = 0; n < COUNT; n++) {
        const c = makeCase(r, surface);
        const v = loadLikeTheAgent(c);
        if (v.kind === "crash") {
          throw new Error(`config fuzz crash: surface ${surface}, seed ${SEED}, input #${n}\n  input: ${describeCase(c)}\n  ${v.error}`);
        }
        counts[v.kind]++;
      }
      console.log(`fuzz-config ${surface}: ${COUNT} inputs in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${counts.accepted} accepted, ${counts.rejected} rejected naming the input`);
    }, 120_000);
  }
});

// Each defect the fuzzer found, as the input that found it; they failed before their fixes.
describe("config fuzz: the defects it found", () => {
  const load = (c: Partial<ConfigCase> & Pick<ConfigCase, "surface" | "names">): Verdict => loadLikeTheAgent({ argv: ["sidecar"], env: {}, files: {}, ...c });
  test.each([
    ["an alias inside its own anchor", "gatewayTopology: &a\n  x: *a\n"],
    ["a cycle in a map field kept verbatim", "proxyMetadata: &a\n  X: *a\n"],
    ["nesting past 64 levels", `tracing: ${"[".repeat(70)}${"]".repeat(70)}`],
  ])("PROXY_CONFIG with %s is refused naming PROXY_CONFIG (the first two were a stack overflow)", (_what, text) => {
    const v = load({ surface: "PROXY_CONFIG", env: { PROXY_CONFIG: text }, names: ["PROXY_CONFIG"] });
    expect(v).toEqual({ kind: "rejected", message: "PROXY_CONFIG: nested deeper than 64 levels (or an alias refers to itself)" });
  });

  test("a duration beyond protobuf's range is refused naming the field and the file (was a BigInt RangeError)", () => {
    const v = load({ surface: "mesh config", files: { [MESH_PATH]: "defaultConfig:\n  discoveryRefreshDelay: 1e+308\n" }, names: ["mesh config"] });
    expect(v).toEqual({ kind: "rejected", message: 'mesh config ./etc/istio/config/mesh: discoveryRefreshDelay: 1e+308 is out of range (at most 315576000000s)' });
  });

  test("a Go duration past int64 nanoseconds is not a duration, as Go's time.ParseDuration says", () => {
    const v = load({ surface: "PROXY_CONFIG", env: { PROXY_CONFIG: "drainDuration: 9999999999h" }, names: ["PROXY_CONFIG"] });
    expect(v).toEqual({ kind: "rejected", message: 'PROXY_CONFIG: drainDuration: "9999999999h" is not a duration (want e.g. "45s" or "1m30s")' });
  });
});
