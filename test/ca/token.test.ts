// The token file is named by the operator (or a mounted volume): a FIFO or device there must not
// block or exhaust the agent, and the error names the file and the limit, never a token.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileTokenSource } from "../../src/ca/token.ts";

const dir = mkdtempSync(join(tmpdir(), "token-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("token file", () => {
  test("a token is read and trimmed; a missing file means no token", async () => {
    writeFileSync(join(dir, "t"), "abc.def.ghi\n");
    expect(await new FileTokenSource(join(dir, "t")).token()).toBe("abc.def.ghi");
    expect(await new FileTokenSource(join(dir, "missing")).token()).toBeUndefined();
  });

  test("a FIFO is refused at once, naming the file", async () => {
    const p = join(dir, "fifo");
    expect(Bun.spawnSync(["mkfifo", p]).exitCode).toBe(0);
    const err = await new FileTokenSource(p).token().catch((e) => e);
    expect(err.message).toContain(`${p}: is a FIFO, not a regular file`);
  });

  test("a token file over 64 KiB is refused, naming the limit", async () => {
    const p = join(dir, "big");
    writeFileSync(p, "x".repeat(64 * 1024 + 1));
    const err = await new FileTokenSource(p).token().catch((e) => e);
    expect(err.message).toContain(`${p}: larger than the 64 KiB limit`);
    expect(err.message).not.toContain("xxxx");
  });
});
