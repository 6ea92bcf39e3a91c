// The documentation facts an operator tripped over (issue 33, item 6): README's links and the
// demo's switches, and what /debug/pprof answers.

import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const REPO = join(import.meta.dir, "../..");
const read = (rel: string) => readFileSync(join(REPO, rel), "utf8");

test("README points at ARCHITECTURE.md in this repository, not at a copy outside it", () => {
  expect(read("README.md")).not.toMatch(/\.\.\/[\w-]+\/ARCHITECTURE\.md/);
  expect(read("README.md")).toContain("See `ARCHITECTURE.md`.");
});

test("README documents the demo's DEMO_VERBOSE and DEMO_KEEP switches (read by examples/demo.ts)", () => {
  const demo = read("examples/demo.ts");
  for (const name of ["DEMO_VERBOSE", "DEMO_KEEP"]) {
    expect(demo).toContain(`process.env.${name}`);
    expect(read("README.md")).toContain(`${name}=1`);
  }
});

test("docs/status.md says 501 for /debug/pprof, as src/status/server.ts answers", () => {
  expect(read("src/status/server.ts")).toMatch(/pprof path answers 501/);
  const status = read("docs/status.md");
  expect(status).toContain("`/debug/pprof/*` path answers 501");
  expect(status).not.toContain("`/debug/pprof/*` path answers 404");
});
