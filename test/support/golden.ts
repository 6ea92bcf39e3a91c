// Golden files: a test compares its output with the file. Refreshing is a separate step that
// cannot pass a test: with UPDATE_GOLDEN=1 the file is rewritten and the test fails, saying so;
// the next run without it compares against what was written (review the diff before committing).

import { readFileSync, writeFileSync } from "node:fs";

export class GoldenUpdated extends Error {}

/** Throws unless `actual` equals the golden file (or rewrites it under UPDATE_GOLDEN=1 and throws). */
export function expectGolden(path: string, actual: string, env: Record<string, string | undefined> = process.env): void {
  if (env.UPDATE_GOLDEN === "1") {
    writeFileSync(path, actual);
    throw new GoldenUpdated(`${path} rewritten (UPDATE_GOLDEN=1); run again without UPDATE_GOLDEN to compare, and review the diff`);
  }
  const want = readFileSync(path, "utf8");
  if (actual !== want) {
    const a = actual.split("\n");
    const w = want.split("\n");
    let i = 0;
    while (i < a.length && i < w.length && a[i] === w[i]) i++;
    throw new Error(
      `${path} differs at line ${i + 1}:\n  golden: ${JSON.stringify(w[i] ?? "<end of file>")}\n  actual: ${JSON.stringify(a[i] ?? "<end of output>")}\n(UPDATE_GOLDEN=1 rewrites it, failing that run)`,
    );
  }
}
