// `npm test`'s runner (scripts/test.ts) on a fixture with unmet requirements: outside CI the
// suites are skipped (never counted as passes), the run exits 0 and ends with the skip summary
// followed by bun's own counts; under CI=true the same suites fail and the run exits non-zero.

import { expect, test } from "bun:test";
import { join } from "node:path";
import { closingLines, readSkips, runsInterop, skipSummary } from "../../scripts/test.ts";

const ROOT = join(import.meta.dir, "../..");
const FIXTURE = "./test/scripts/fixtures/needs-tools.fixture.ts";

async function runner(ci: boolean): Promise<{ code: number; out: string }> {
  const env: Record<string, string | undefined> = { ...process.env, AGENT_TEST_SKIP_FILE: undefined };
  if (ci) env.CI = "true";
  else delete env.CI;
  const p = Bun.spawn([process.execPath, "scripts/test.ts", FIXTURE], { cwd: ROOT, env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: out + err };
}

test("outside CI: unmet requirements are skips, listed at the end, and the counts close the output", async () => {
  const r = await runner(false);
  expect(r.code).toBe(0);
  expect(r.out).toContain("2 suite(s) skipped (missing root or tools; under CI=true these fail):");
  expect(r.out).toContain("  suite needing a missing tool: needs agent-test-no-such-tool on PATH (apt-get install no-such-package)");
  expect(r.out).toContain("  single test needing a condition: needs a condition this fixture never meets");
  const lines = r.out.trimEnd().split("\n");
  expect(lines.slice(-5).map((l) => l.trim())).toEqual([
    "1 pass",
    "2 skip",
    "0 fail",
    "1 expect() calls",
    expect.stringMatching(/^Ran 3 tests across 1 file\./) as unknown as string,
  ]);
  // The summary comes before the repeated counts.
  expect(r.out.lastIndexOf("suite(s) skipped")).toBeLessThan(r.out.lastIndexOf(" 1 pass"));
});

test("under CI=true the same suites fail and the exit code is bun's", async () => {
  const r = await runner(true);
  expect(r.code).toBe(1);
  expect(r.out).toContain("(CI=true: missing requirements fail instead of skipping)");
  expect(r.out).toMatch(/^ 1 pass$/m);
  expect(r.out).toMatch(/^ 2 fail$/m);
  expect(r.out).not.toMatch(/^ \d+ skip$/m);
});

test("skip lines are read once each, in order; nothing skipped prints nothing", () => {
  expect(readSkips("SKIP b: x\nnoise\nSKIP a: y\nSKIP b: x\n")).toEqual(["SKIP b: x", "SKIP a: y"]);
  expect(skipSummary([], false)).toBe("");
  expect(skipSummary(["SKIP s: needs root"], true)).toBe("1 suite(s) could not run (CI=true turns these into failures):\n  s: needs root\n");
});

test("suites skipped for the same reason share one summary line, in first-seen order", () => {
  expect(skipSummary(["SKIP a: needs Go", "SKIP b: needs root", "SKIP c: needs Go"], false)).toBe(
    "3 suite(s) skipped (missing root or tools; under CI=true these fail):\n  a, c: needs Go\n  b: needs root\n",
  );
});

test("the interop build runs only when the interop suites are part of the run", () => {
  expect(runsInterop([])).toBe(true);
  expect(runsInterop(["--bail"])).toBe(true);
  expect(runsInterop(["test/interop/goldens.test.ts"])).toBe(true);
  expect(runsInterop(["./test/interop"])).toBe(true);
  expect(runsInterop(["test/dns"])).toBe(false);
  expect(runsInterop(["./test/scripts/fixtures/needs-tools.fixture.ts"])).toBe(false);
  // A flag's value is not a path filter: these run everything, the interop suites included.
  expect(runsInterop(["--timeout", "60000"])).toBe(true);
  expect(runsInterop(["-t", "relay"])).toBe(true);
  expect(runsInterop(["--timeout", "60000", "test/dns"])).toBe(false);
});

test("closing lines are bun's counts only", () => {
  expect(closingLines(["(pass) x", "", " 3 pass", " 1 skip", " 0 fail", " 9 expect() calls", "Ran 4 tests across 2 files. [1.00s]", "other"])).toEqual([
    " 3 pass",
    " 1 skip",
    " 0 fail",
    " 9 expect() calls",
    "Ran 4 tests across 2 files. [1.00s]",
  ]);
});
