// A throwaway self-signed certificate and its key, made by openssl (an independent tool): an HTTPS
// test app's server certificate, or a mesh root the agents read and nothing signs with.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** An EC P-256 certificate for `subject` (openssl's -subj form), valid for `days`, with the extensions `addext` (openssl's -addext form). */
export function selfSignedCert(subject = "/CN=app.test", days = 1, addext: string[] = []): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), "self-signed-"));
  try {
    const r = Bun.spawnSync(
      [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        String(days),
        "-subj",
        subject,
        ...addext.flatMap((e) => ["-addext", e]),
        "-keyout",
        join(dir, "k.pem"),
        "-out",
        join(dir, "c.pem"),
      ],
      { stderr: "pipe" },
    );
    if (r.exitCode !== 0) throw new Error(`openssl req: ${r.stderr.toString()}`);
    return { cert: readFileSync(join(dir, "c.pem"), "utf8"), key: readFileSync(join(dir, "k.pem"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
