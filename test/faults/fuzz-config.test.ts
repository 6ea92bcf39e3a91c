// The configuration fuzzer: PROXY_CONFIG (YAML and JSON), the mesh config file, the pod
// annotations and labels files (downward-API format), ISTIO_KUBE_APP_PROBERS, the command line and
// the environment. Seeded; FAULTS_FUZZ_SEED reproduces a run, FAULTS_FUZZ_COUNT sets the inputs per
// surface (10,000 in CI), FAULTS_FUZZ_BINARY the sample run through the compiled agent (56: 8 per surface).
//
// In-process, every input goes through what `agent proxy` parses before it serves
// (config-case.ts): it is accepted, or rejected by a known error naming the input; anything else
// (an uncaught exception, a rejection naming nothing) fails the test with the seed, the index and
// the input. A sample then runs through dist/agent: what the loader accepted must start (its status
// port answers) and exit 0 on SIGTERM; what it rejected must exit non-zero naming the input; never
// a stack trace.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";
import { describeRequiring } from "../support/requires.ts";
import { rng } from "./config-inputs.ts";
import { describeCase, loadLikeTheAgent, makeCase, MESH_PATH, SURFACES, BINARY_UNSAFE_TEXT, type ConfigCase, type Verdict } from "./config-case.ts";

const COUNT = Number(process.env.FAULTS_FUZZ_COUNT ?? 10_000);
const BINARY_COUNT = Number(process.env.FAULTS_FUZZ_BINARY ?? 56);
const SEED = Number(process.env.FAULTS_FUZZ_SEED ?? 22);
/** Agents run at once in the binary sample. */
const PARALLEL = 4;

describe(`config fuzz, in-process (${COUNT} inputs per surface, seed ${SEED})`, () => {
  for (const [i, surface] of SURFACES.entries()) {
    test(`${surface}: every input accepted or rejected naming it; no crash`, () => {
      const r = rng(SEED * 100 + i);
      const counts = { accepted: 0, help: 0, rejected: 0 };
      const t0 = performance.now();
      for (let n = 0; n < COUNT; n++) {
        const c = makeCase(r, surface);
        const v = loadLikeTheAgent(c);
        if (v.kind === "crash") {
          throw new Error(`config fuzz crash: surface ${surface}, seed ${SEED}, input #${n}\n  input: ${describeCase(c)}\n  ${v.error}`);
        }
        counts[v.kind]++;
      }
      console.log(
        `fuzz-config ${surface}: ${COUNT} inputs in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${counts.accepted + counts.help} accepted, ${counts.rejected} rejected naming the input`,
      );
    }, 120_000);
  }
});

/** What the compiled agent did with one case. */
interface BinaryRun {
  served: boolean;
  code: number | null;
  output: string;
  ms: number;
}

/** A stack trace or Bun's uncaught-error frame: a crash, whatever the exit code. */
const STACK = /^\s+at\s.+:\d+(:\d+)?\)?$|\$bunfs|^\d+ \| /m;

/** One run in its own root (`dir`), all runs with the one copy of the binary (`bin`: 110 MiB). */
async function runBinary(c: ConfigCase, rootCert: string, bin: string, work: string): Promise<BinaryRun> {
  const dir = mkdtempSync(join(work, "case-"));
  const box = { dir, bin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  try {
    const statusPort = await freePort();
    const base = { statusPort, proxyAdminPort: await freePort(), discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE" };
    const files: Record<string, string> = { "var/run/secrets/tokens/istio-token": "t\n", "var/run/secrets/istio/root-cert.pem": rootCert, ...c.files };
    // ECDSA keys: an RSA key per start would cost most of the run on a busy machine.
    const env: Record<string, string> = {
      HOME: box.dir,
      POD_NAME: "fuzz-0",
      POD_NAMESPACE: "demo",
      SERVICE_ACCOUNT: "fuzz",
      INSTANCE_IP: "127.0.0.1",
      DISABLE_ENVOY: "true",
      CA_PROVIDER: "local",
      ECC_SIGNATURE_ALGORITHM: "ECDSA",
    };
    // The ports and a discovery address go in the layer below the one fuzzed (the mesh file, or
    // PROXY_CONFIG when the mesh file is the input).
    if (c.surface === "mesh config") env.PROXY_CONFIG = JSON.stringify(base);
    else files[MESH_PATH] = `defaultConfig: ${JSON.stringify(base)}\n`;
    Object.assign(env, c.env);
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(dirname(join(box.dir, rel)), { recursive: true });
      writeFileSync(join(box.dir, rel), text);
    }
    const t0 = performance.now();
    const agent = start(box.bin, ["proxy", ...c.argv], { cwd: box.dir, env });
    const deadline = Date.now() + 20_000;
    let served = false;
    while (agent.proc.exitCode === null && agent.proc.signalCode === null && Date.now() < deadline) {
      try {
        await (await fetch(`http://127.0.0.1:${statusPort}/healthz/ready`, { signal: AbortSignal.timeout(1000) })).arrayBuffer();
        served = true;
        break;
      } catch {
        await Bun.sleep(50);
      }
    }
    if (served || agent.proc.exitCode === null) agent.proc.kill("SIGTERM");
    const code = await Promise.race([agent.proc.exited, Bun.sleep(15_000).then(() => null)]);
    if (code === null) agent.proc.kill("SIGKILL");
    await Bun.sleep(20); // the last output chunks
    return { served, code, output: agent.output(), ms: performance.now() - t0 };
  } finally {
    box.cleanup();
  }
}

/** Why the binary's run disagrees with what the loader decided, or undefined when it holds. */
function binaryProblem(c: ConfigCase, v: Verdict, run: BinaryRun): string | undefined {
  if (STACK.test(run.output)) return "a stack trace in the output";
  if (v.kind === "rejected") {
    if (run.served || run.code === 0 || run.code === null)
      return `the loader rejected it (${v.message}) but the agent ${run.served ? "served" : `exited ${run.code}`}`;
    if (!c.names.some((n) => run.output.includes(n))) return `exit ${run.code} without naming any of ${JSON.stringify(c.names)}`;
    return undefined;
  }
  if (v.kind === "help") return run.code === 0 ? undefined : `--help exited ${run.code}`;
  // Refused later on the start path (a key type, a listen address): fine when it names the input.
  if (!run.served && run.code !== 0 && run.code !== null && c.names.some((n) => run.output.includes(n))) return undefined;
  if (!run.served) return `the loader accepted it but the agent did not serve (exit ${run.code})`;
  if (run.code !== 0) return `served, then exit ${run.code} on SIGTERM (want 0)`;
  return undefined;
}

describeRequiring({ tools: ["openssl"], apt: ["openssl"] }, `config fuzz, compiled agent (${BINARY_COUNT} inputs, seed ${SEED})`, () => {
  let work: string;
  let pki: TestPki;
  let box: Sandbox;
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "agent-faults-fuzzcfg-"));
    pki = makeTestPki(join(work, "pki"));
    box = sandbox("agent-fuzzcfg-");
  });
  afterAll(() => {
    box?.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  test("valid inputs start and exit 0 on SIGTERM; rejected ones exit non-zero naming the input; never a stack trace", async () => {
    const r = rng(SEED * 100 + 99);
    const rootCert = readFileSync(pki.caCert, "utf8");
    const cases: ConfigCase[] = [];
    while (cases.length < BINARY_COUNT) {
      const c = makeCase(r, SURFACES[cases.length % SURFACES.length]!, true);
      // A NUL cannot travel in argv or the environment (the kernel's strings end there).
      const nul = [...c.argv, ...Object.values(c.env)].some((x) => x.includes("\0"));
      if (!nul && !BINARY_UNSAFE_TEXT.test(describeCase(c))) cases.push(c);
    }
    const problems: string[] = [];
    const tally = { served: 0, rejected: 0, help: 0 };
    const times: number[] = [];
    const rejectMs: number[] = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < cases.length) {
          const i = next++;
          const c = cases[i]!;
          const v = loadLikeTheAgent(c);
          if (v.kind === "crash") {
            problems.push(`#${i}: in-process crash: ${v.error}\n  input: ${describeCase(c)}`);
            continue;
          }
          const run = await runBinary(c, rootCert, box.bin, work);
          (v.kind === "rejected" ? rejectMs : times).push(run.ms);
          const why = binaryProblem(c, v, run);
          if (why) problems.push(`#${i} (seed ${SEED}): ${why}\n  input: ${describeCase(c)}\n  output tail:\n${run.output.split("\n").slice(-12).join("\n")}`);
          else tally[v.kind === "accepted" ? (run.served ? "served" : "rejected") : v.kind]++;
        }
      }),
    );
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]?.toFixed(0) ?? "-";
    console.log(
      `fuzz-config binary: ${cases.length} inputs in ${((performance.now() - t0) / 1000).toFixed(1)} s (${PARALLEL} at a time): ${tally.served} served and exited 0 on SIGTERM (median ${median(times)} ms from start to exit), ${tally.rejected} exited naming the input (median ${median(rejectMs)} ms), ${tally.help} help`,
    );
    expect(problems).toEqual([]);
  }, 300_000);
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
    expect(v).toEqual({
      kind: "rejected",
      message: "mesh config ./etc/istio/config/mesh: discoveryRefreshDelay: 1e+308 is out of range (at most 315576000000s)",
    });
  });

  test("a Go duration past int64 nanoseconds is not a duration, as Go's time.ParseDuration says", () => {
    const v = load({ surface: "PROXY_CONFIG", env: { PROXY_CONFIG: "drainDuration: 9999999999h" }, names: ["PROXY_CONFIG"] });
    expect(v).toEqual({ kind: "rejected", message: 'PROXY_CONFIG: drainDuration: "9999999999h" is not a duration (want e.g. "45s" or "1m30s")' });
  });
});
