// A mesh root certificate for the rendered pods' istio-ca-root-cert volume, made by openssl (an
// independent tool): the agents read it; no CA signs with it in these runs.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export async function selfSignedRoot(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "injection-root-"));
  try {
    const p = Bun.spawn(
      [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "root.pem"),
        "-days",
        "2",
        "-subj",
        "/O=cluster.local",
      ],
      { stdout: "ignore", stderr: "pipe" },
    );
    if ((await p.exited) !== 0) throw new Error(`openssl req: ${await new Response(p.stderr).text()}`);
    return readFileSync(join(dir, "root.pem"), "utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
