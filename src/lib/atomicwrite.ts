// Writing a file others read (OUTPUT_CERTS, the gRPC bootstrap) so a reader sees the old content
// or the new, never half: a temp file beside the target, then rename. On any failure — a full
// disk, a read-only mount, a failed chmod or rename — the temp file is removed before the error
// is passed on, so retries never leave `*.tmp-*` files behind.

import { randomBytes } from "node:crypto";
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { chmod, rename, rm, writeFile } from "node:fs/promises";

function tempPathFor(path: string): string {
  return `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
}

/** `mode` exactly (chmod after the write, whatever the umask). */
export async function atomicWriteFile(path: string, content: string | Uint8Array, mode: number): Promise<void> {
  const tmp = tempPathFor(path);
  try {
    await writeFile(tmp, content, { mode, flag: "wx" });
    await chmod(tmp, mode); // the umask may have narrowed `mode`
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
}

/** Synchronous form; `mode` is subject to the umask, as os.WriteFile in Istio. */
export function atomicWriteFileSync(path: string, content: string | Uint8Array, mode: number): void {
  const tmp = tempPathFor(path);
  try {
    writeFileSync(tmp, content, { mode, flag: "wx" });
    renameSync(tmp, path);
  } catch (e) {
    try {
      rmSync(tmp, { force: true });
    } catch {}
    throw e;
  }
}
