// OUTPUT_CERTS: key.pem, cert-chain.pem and root-cert.pem written for other consumers (VM
// workloads, proxyless gRPC). Each file is written atomically (temp file + rename), only when its
// content changed, mode 0600, or 0644 under Kubernetes (KUBERNETES_SERVICE_HOST set) as Istio.
// The key is written before the chain so a reader never pairs a new chain with an old key for long.

import { mkdir } from "node:fs/promises";
import { atomicWriteFile } from "../lib/atomicwrite.ts";
import { join } from "node:path";
import { SdsError } from "./errors.ts";
import { FILE_LIMITS, readBoundedText } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

export interface OutputFiles {
  key?: string;
  chain?: string;
  root?: string;
}

export class OutputCertsWriter {
  constructor(
    readonly dir: string,
    readonly mode: number,
  ) {}

  /** Write what changed; returns the file names written. Throws SdsError naming the file. */
  async write(files: OutputFiles): Promise<string[]> {
    const plan: [string, string | undefined][] = [
      ["key.pem", files.key],
      ["cert-chain.pem", files.chain],
      ["root-cert.pem", files.root],
    ];
    const written: string[] = [];
    for (const [name, content] of plan) {
      if (content === undefined) continue;
      const path = join(this.dir, name);
      let current: string | undefined;
      try {
        current = await readBoundedText(path, { maxBytes: FILE_LIMITS.certificate });
      } catch {
        current = undefined;
      }
      if (current === content) continue;
      try {
        await mkdir(this.dir, { recursive: true });
        await atomicWriteFile(path, content, this.mode);
      } catch (e) {
        throw new SdsError(`OUTPUT_CERTS: writing ${path}: ${(e as NodeJS.ErrnoException).code ?? errorMessage(e)}`, undefined, { cause: e });
      }
      written.push(name);
    }
    return written;
  }
}
