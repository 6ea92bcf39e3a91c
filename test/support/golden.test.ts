import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectGolden, GoldenUpdated } from "./golden.ts";

const dir = mkdtempSync(join(tmpdir(), "golden-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("equal output passes; different output fails naming the first differing line", () => {
  const g = join(dir, "a.txt");
  writeFileSync(g, "one\ntwo\nthree\n");
  expect(() => expectGolden(g, "one\ntwo\nthree\n", {})).not.toThrow();
  expect(() => expectGolden(g, "one\nTWO\nthree\n", {})).toThrow(`${g} differs at line 2:\n  golden: "two"\n  actual: "TWO"`);
  expect(() => expectGolden(g, "one\ntwo\n", {})).toThrow(/differs at line 3/);
});

test("UPDATE_GOLDEN=1 rewrites the file and fails, even when the output was already equal", () => {
  const g = join(dir, "b.txt");
  writeFileSync(g, "old\n");
  expect(() => expectGolden(g, "new\n", { UPDATE_GOLDEN: "1" })).toThrow(GoldenUpdated);
  expect(readFileSync(g, "utf8")).toBe("new\n");
  expect(() => expectGolden(g, "new\n", { UPDATE_GOLDEN: "1" })).toThrow(/rewritten \(UPDATE_GOLDEN=1\); run again without UPDATE_GOLDEN/);
  expect(() => expectGolden(g, "new\n", {})).not.toThrow();
});
