// `npm test`: runs `bun test` (arguments passed through), then prints what was skipped and why,
// then repeats bun's closing "N pass / N skip / N fail" lines so they stay last. The exit code
// is bun test's own. Suites record their skips through test/support/requires.ts, which appends
// one line per skipped suite to the file named by AGENT_TEST_SKIP_FILE.
//
// When the run includes the interop suites (test/interop: no path arguments, or a path naming
// them), the Go tooling they judge us with (Istio's pilot-agent, istiod-lite) is built once,
// first, with progress lines, outside any test's timeout; the suites then only check it is there.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUILD_ERROR_ENV, buildInterop, findGo, PREBUILT_ENV } from "../test/interop/support/go-build.ts";
import { errorMessage } from "../src/lib/errors.ts";

const CLOSING = /^\s*(\d+ (pass|skip|todo|fail|snapshots?|expect\(\) calls?)\b|Ran \d+ tests?)/;

/** The distinct skip lines recorded during the run, in order. */
export function readSkips(text: string): string[] {
  return [...new Set(text.split("\n").filter((l) => l.startsWith("SKIP ")))];
}

/**
 * The summary printed after the run: empty when nothing was skipped. Suites skipped for the same
 * reason share one line ("a, b: reason"), so one missing tool is one line however many suites
 * need it.
 */
export function skipSummary(skips: string[], ci: boolean): string {
  if (skips.length === 0) return "";
  const byReason = new Map<string, string[]>();
  for (const line of skips) {
    const body = line.slice("SKIP ".length);
    const at = body.indexOf(": ");
    const [suite, reason] = at < 0 ? [body, ""] : [body.slice(0, at), body.slice(at + 2)];
    byReason.set(reason, [...(byReason.get(reason) ?? []), suite]);
  }
  const head = ci
    ? `${skips.length} suite(s) could not run (CI=true turns these into failures):`
    : `${skips.length} suite(s) skipped (missing root or tools; under CI=true these fail):`;
  const lines = [...byReason].map(([reason, suites]) => `  ${suites.join(", ")}${reason ? ": " + reason : ""}`);
  return [head, ...lines].join("\n") + "\n";
}

/** Whether `bun test` with these arguments runs the interop suites: no path filter, or one naming them. */
export function runsInterop(args: string[]): boolean {
  const paths = args.filter((a, i) => !a.startsWith("-") && !VALUE_FLAGS.has(args[i - 1] ?? ""));
  return paths.length === 0 || paths.some((p) => p.includes("interop"));
}

/** `bun test` flags whose value is the next argument (`--timeout 60000`): that value is not a path filter. */
const VALUE_FLAGS = new Set([
  "--timeout",
  "-t",
  "--test-name-pattern",
  "--preload",
  "--rerun-each",
  "--seed",
  "--max-concurrency",
  "--reporter",
  "--reporter-outfile",
  "--coverage-reporter",
  "--coverage-dir",
]);

/**
 * Builds the interop suites' Go tooling before the run. Returns the environment that tells the
 * suites the outcome: built (they only check the stamp) or failed (they report this error).
 * Without Go nothing is built: the suites' own requirement check skips them (fails under CI).
 */
export async function prepareInterop(args: string[], log: (line: string) => void): Promise<Record<string, string>> {
  if (!runsInterop(args)) return {};
  if (!findGo()) {
    log(
      "interop: Go not found: the interop and differential suites (test/interop) will be SKIPPED; install Go (https://go.dev/dl) or set INTEROP_GO to run them (under CI=true they fail)",
    );
    return {};
  }
  try {
    await buildInterop(log);
    return { [PREBUILT_ENV]: "1" };
  } catch (e) {
    const message = errorMessage(e);
    log(`interop: the Go build FAILED; the interop suites will report it:\n${message}`);
    return { [BUILD_ERROR_ENV]: message };
  }
}

/** Bun's closing count lines from the tail of its output. */
export function closingLines(tail: string[]): string[] {
  return tail.filter((l) => CLOSING.test(l));
}

/** Per-test timeout: tests spawn real processes (compiled agent, fake Envoy, fake istiod). */
export const TEST_TIMEOUT_MS = 30_000;

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "agent-test-"));
  const skipFile = join(dir, "skips");
  try {
    // Bun 1.4 does not read a test timeout from bunfig.toml (its default 5 s applied, failing
    // process-spawning tests on a loaded machine): pass it unless the caller gave one.
    const args = process.argv.slice(2);
    const timeout = args.some((a) => a.startsWith("--timeout")) ? [] : ["--timeout", String(TEST_TIMEOUT_MS)];
    const interopEnv = await prepareInterop(args, (l) => process.stderr.write(l + "\n"));
    const proc = Bun.spawn([process.execPath, "test", ...timeout, ...args], {
      stdin: "inherit",
      stdout: "inherit",
      stderr: "pipe",
      env: { ...process.env, ...interopEnv, AGENT_TEST_SKIP_FILE: skipFile },
    });
    // Bun writes results to stderr: forward it as it comes, keeping the last lines.
    const tail: string[] = [];
    let partial = "";
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr) {
      process.stderr.write(chunk);
      const lines = (partial + decoder.decode(chunk, { stream: true })).split("\n");
      partial = lines.pop() ?? "";
      tail.push(...lines);
      if (tail.length > 40) tail.splice(0, tail.length - 40);
    }
    if (partial) tail.push(partial);
    const code = await proc.exited;
    let recorded = "";
    try {
      recorded = readFileSync(skipFile, "utf8");
    } catch {
      // no suite skipped
    }
    const summary = skipSummary(readSkips(recorded), process.env.CI === "true" || process.env.CI === "1");
    if (summary) {
      process.stderr.write("\n" + summary);
      const closing = closingLines(tail);
      if (closing.length) process.stderr.write("\n" + closing.join("\n") + "\n");
    }
    return code;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) process.exit(await main());
