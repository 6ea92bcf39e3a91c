// The binary tests refuse a dist/agent older than any of its inputs (they used to run whatever
// binary was there, testing yesterday's code).

import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { staleBinaryReason } from "./binary.ts";

const root = mkdtempSync(join(tmpdir(), "stale-bin-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const at = (path: string, secondsSinceEpoch: number) => {
  writeFileSync(path, "x");
  utimesSync(path, secondsSinceEpoch, secondsSinceEpoch);
};

test("missing, stale and fresh binaries", () => {
  mkdirSync(join(root, "src/deep/er"), { recursive: true });
  mkdirSync(join(root, "dist"));
  const bin = join(root, "dist/agent");
  expect(staleBinaryReason(bin, root, ["src", "build.ts"])).toBe(`${bin} is missing`);
  at(join(root, "src/a.ts"), 1_000);
  at(join(root, "build.ts"), 1_000);
  at(bin, 2_000);
  expect(staleBinaryReason(bin, root, ["src", "build.ts"])).toBeUndefined();
  // A file deep under src/ changed after the build.
  at(join(root, "src/deep/er/b.ts"), 3_000);
  expect(staleBinaryReason(bin, root, ["src", "build.ts"])).toBe(`${bin} is older than src/deep/er/b.ts (stale binary)`);
  at(bin, 4_000);
  expect(staleBinaryReason(bin, root, ["src", "build.ts"])).toBeUndefined();
  // A top-level input file counts too; a file outside the inputs does not.
  at(join(root, "README.md"), 5_000);
  expect(staleBinaryReason(bin, root, ["src", "build.ts"])).toBeUndefined();
  at(join(root, "build.ts"), 5_000);
  expect(staleBinaryReason(bin, root, ["src", "build.ts"])).toBe(`${bin} is older than build.ts (stale binary)`);
});
