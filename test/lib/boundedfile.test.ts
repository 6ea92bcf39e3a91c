import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileLimitError, readBoundedFile, readBoundedFileSync, readBoundedText } from "../../src/lib/boundedfile.ts";

const dir = mkdtempSync(join(tmpdir(), "bounded-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function fifo(name: string): string {
  const p = join(dir, name);
  const r = Bun.spawnSync(["mkfifo", p]);
  if (r.exitCode !== 0) throw new Error(`mkfifo failed: ${r.stderr}`);
  return p;
}

describe("bounded file reads", () => {
  test("a regular file within the cap is read whole", async () => {
    const p = join(dir, "ok.txt");
    writeFileSync(p, "hello world");
    expect(await readBoundedText(p, { maxBytes: 11 })).toBe("hello world");
    expect(readBoundedFileSync(p, 11).toString()).toBe("hello world");
  });

  test("one byte over the cap is refused, naming the file and the limit", async () => {
    const p = join(dir, "big.txt");
    writeFileSync(p, "x".repeat(1025));
    await expect(readBoundedFile(p, { maxBytes: 1024 })).rejects.toThrow(`${p}: larger than the 1 KiB limit`);
    expect(() => readBoundedFileSync(p, 1024)).toThrow(`${p}: larger than the 1 KiB limit`);
  });

  test("a multi-chunk file exactly at the cap is read (chunk boundary)", async () => {
    const p = join(dir, "exact.bin");
    writeFileSync(p, Buffer.alloc(3 * 65536 + 7, 0x61));
    expect((await readBoundedFile(p, { maxBytes: 3 * 65536 + 7 })).length).toBe(3 * 65536 + 7);
    expect(readBoundedFileSync(p, 3 * 65536 + 7).length).toBe(3 * 65536 + 7);
  });

  test("a 10 GB sparse file is refused without reading it", async () => {
    const p = join(dir, "sparse.bin");
    writeFileSync(p, "");
    truncateSync(p, 10 * 1024 ** 3);
    const t0 = performance.now();
    await expect(readBoundedFile(p, { maxBytes: 4 << 20 })).rejects.toThrow("larger than the 4 MiB limit");
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  test("/dev/zero is refused as a character device", async () => {
    await expect(readBoundedFile("/dev/zero", { maxBytes: 1 << 20 })).rejects.toThrow("/dev/zero: is a character device, not a regular file");
    expect(() => readBoundedFileSync("/dev/zero", 1 << 20)).toThrow("/dev/zero: is a character device, not a regular file");
  });

  test("a FIFO with no writer is refused at once instead of blocking", async () => {
    const p = fifo("pipe");
    const err = await readBoundedFile(p, { maxBytes: 1024 }).catch((e) => e);
    expect(err).toBeInstanceOf(FileLimitError);
    expect(err.message).toBe(`${p}: is a FIFO, not a regular file`);
    expect(() => readBoundedFileSync(p, 1024)).toThrow(`${p}: is a FIFO, not a regular file`);
  });

  test("a directory is refused", async () => {
    await expect(readBoundedFile(dir, { maxBytes: 1024 })).rejects.toThrow("is a directory, not a regular file");
  });

  test("a missing file keeps its ENOENT code", async () => {
    const err = await readBoundedFile(join(dir, "nope"), { maxBytes: 1024 }).catch((e) => e);
    expect(err.code).toBe("ENOENT");
    let syncErr: NodeJS.ErrnoException | undefined;
    try {
      readBoundedFileSync(join(dir, "nope"), 1024);
    } catch (e) {
      syncErr = e as NodeJS.ErrnoException;
    }
    expect(syncErr?.code).toBe("ENOENT");
  });

  test("an aborted requester stops the read", async () => {
    const p = join(dir, "abort.bin");
    writeFileSync(p, Buffer.alloc(1 << 20));
    const ac = new AbortController();
    ac.abort(new Error("requester went away"));
    await expect(readBoundedFile(p, { maxBytes: 2 << 20, signal: ac.signal })).rejects.toThrow("requester went away");
  });
});
