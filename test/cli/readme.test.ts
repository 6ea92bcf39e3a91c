import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { updateReadme } from "../../scripts/readme-env.ts";

test("README's environment table is generated from src/config/env.ts and up to date", () => {
  const text = readFileSync(join(import.meta.dir, "../../README.md"), "utf8");
  expect(updateReadme(text)).toBe(text);
});

test("README keeps the two commands, and .ci/run runs the README's test command", () => {
  const text = readFileSync(join(import.meta.dir, "../../README.md"), "utf8");
  expect(text).toContain("npm ci && npm run demo");
  expect(text).toContain("npm ci && npm test");
  const ci = readFileSync(join(import.meta.dir, "../../.ci/run"), "utf8");
  expect(ci).toContain("npm ci && npm test");
});
