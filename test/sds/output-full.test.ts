// OUTPUT_CERTS on a full or read-only filesystem: each failed write is reported naming the file
// and leaves no temp file behind, however often it is retried; a later write succeeds once there
// is room. A real tmpfs of 64 KiB stands in for the full disk.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OutputCertsWriter } from "../../src/sds/output.ts";
import { describeRequiring } from "../support/requires.ts";

describeRequiring({ root: true, tools: ["mount", "umount"], apt: ["mount"] }, "OUTPUT_CERTS on a full or read-only disk", () => {
  let dir: string;
  const sh = (...cmd: string[]) => {
    const r = Bun.spawnSync(cmd);
    if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr}`);
  };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "out-full-"));
    sh("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir);
  });
  afterAll(() => {
    Bun.spawnSync(["umount", dir]);
    rmSync(dir, { recursive: true, force: true });
  });

  test("full disk: every retry fails naming key.pem, and no temp file is left", async () => {
    writeFileSync(join(dir, "filler"), Buffer.alloc(60 * 1024)); // fill the tmpfs (64 KiB of pages)
    const w = new OutputCertsWriter(dir, 0o600);
    const key = "-----BEGIN PRIVATE KEY-----\n" + "A".repeat(16 * 1024) + "\n-----END PRIVATE KEY-----\n";
    for (let i = 0; i < 5; i++) {
      const err = await w.write({ key }).catch((e) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err.message).toBe(`OUTPUT_CERTS: writing ${join(dir, "key.pem")}: ENOSPC`);
    }
    expect(readdirSync(dir).sort()).toEqual(["filler"]);
    rmSync(join(dir, "filler"));
    expect(await w.write({ key })).toEqual(["key.pem"]);
    expect(readFileSync(join(dir, "key.pem"), "utf8")).toBe(key);
    expect(readdirSync(dir).sort()).toEqual(["key.pem"]);
  });

  test("read-only: fails naming the file, nothing left behind, the old file kept", async () => {
    sh("mount", "-o", "remount,ro", dir);
    try {
      const w = new OutputCertsWriter(dir, 0o600);
      const err = await w.write({ key: "new key" }).catch((e) => e);
      expect(err.message).toBe(`OUTPUT_CERTS: writing ${join(dir, "key.pem")}: EROFS`);
      expect(readdirSync(dir).sort()).toEqual(["key.pem"]);
      expect(readFileSync(join(dir, "key.pem"), "utf8")).toContain("BEGIN PRIVATE KEY");
    } finally {
      sh("mount", "-o", "remount,rw", dir);
    }
  });
});
