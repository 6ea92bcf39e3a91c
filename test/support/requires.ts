// Suites that need root or system tools declare it here instead of skipping on their own.
//
// - Everything present: the suite runs.
// - Something missing under CI=true: the suite is replaced by one failing test that names what is
//   missing (CI can never pass by skipping).
// - Something missing elsewhere: the suite is skipped, one line names what is missing and how to
//   install it, and the reason is recorded for the end-of-run summary (scripts/test.ts prints it).

import { appendFileSync } from "node:fs";
import { describe, test } from "bun:test";

export interface Requirements {
  /** Needs uid 0 (network namespaces, setpriv, unshare --pid). */
  root?: boolean;
  /** Commands that must be on PATH. */
  tools?: string[];
  /** Debian packages that provide the tools, for the install hint. */
  apt?: string[];
  /** Any other precondition: a function returning a reason when unmet. */
  check?: () => string | undefined;
}

const onPath = new Map<string, boolean>();
function hasTool(tool: string): boolean {
  let v = onPath.get(tool);
  if (v === undefined) {
    v = Bun.which(tool) !== null;
    onPath.set(tool, v);
  }
  return v;
}

/** Why the requirements are unmet, or undefined when they are met. */
export function unmet(req: Requirements): string | undefined {
  const parts: string[] = [];
  if (req.root && process.getuid?.() !== 0) parts.push("root");
  const missing = (req.tools ?? []).filter((t) => !hasTool(t));
  if (missing.length) {
    const hint = req.apt?.length ? ` (apt-get install ${req.apt.join(" ")})` : "";
    parts.push(`${missing.join(", ")} on PATH${hint}`);
  }
  const other = req.check?.();
  if (other) parts.push(other);
  return parts.length ? `needs ${parts.join(" and ")}` : undefined;
}

export const inCI = (): boolean => process.env.CI === "true" || process.env.CI === "1";

/** Records a skip for the end-of-run summary and prints it once. */
export function recordSkip(suite: string, reason: string): void {
  const line = `SKIP ${suite}: ${reason}`;
  console.log(line);
  const file = process.env.AGENT_TEST_SKIP_FILE;
  if (file) appendFileSync(file, line + "\n");
}

/**
 * `describe` that runs only when `req` is met. Under CI=true an unmet requirement is a failing
 * test; elsewhere a recorded skip.
 */
export function describeRequiring(req: Requirements, name: string, fn: () => void): void {
  const why = unmet(req);
  if (why === undefined) {
    describe(name, fn);
  } else if (inCI()) {
    describe(name, () => {
      test(`requirements of "${name}"`, () => {
        throw new Error(`${name}: ${why} (CI=true: missing requirements fail instead of skipping)`);
      });
    });
  } else {
    recordSkip(name, why);
    describe.skip(name, fn);
  }
}

/** Single-test form of describeRequiring. */
export function testRequiring(req: Requirements, name: string, fn: () => unknown | Promise<unknown>, timeout?: number): void {
  const why = unmet(req);
  if (why === undefined) test(name, fn as () => Promise<void>, timeout);
  else if (inCI())
    test(name, () => {
      throw new Error(`${name}: ${why} (CI=true: missing requirements fail instead of skipping)`);
    });
  else {
    recordSkip(name, why);
    test.skip(name, fn as () => Promise<void>);
  }
}
