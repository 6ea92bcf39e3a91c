// `npm test`: runs `bun test` (arguments passed through), then prints what was skipped and why,
// then repeats bun's closing "N pass / N skip / N fail" lines so they stay last. The exit code
// is bun test's own. Suites record their skips through test/support/requires.ts, which appends
// one line per skipped suite to the file named by AGENT_TEST_SKIP_FILE.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CLOSING = /^\s*(\d+ (pass|skip|todo|fail|snapshots?|expect\(\) calls?)\b|Ran \d+ tests?)/;

/** The distinct skip lines recorded during the run, in order. */
export function readSkips(text: string): string[] {
  return [...new Set(text.split("\n").filter((l) => l.startsWith("SKIP ")))];
}

/** The summary printed after the run: empty when nothing was skipped. */
export function skipSummary(skips: string[], ci: boolean): string {
  if (skips.length === 0) return "";
  const head = ci
    ? `${skips.length} suite(s) could not run (CI=true turns these into failures):`
    : `${skips.length} suite(s) skipped (missing root or tools; under CI=true these fail):`;
  return [head, ...skips.map((s) => "  " + s.slice("SKIP ".length))].join("\n") + "\n";
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
    const proc = Bun.spawn([process.execPath, "test", ...timeout, ...args], {
      stdin: "inherit",
      stdout: "inherit",
      stderr: "pipe",
      env: { ...process.env, AGENT_TEST_SKIP_FILE: skipFile },
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
