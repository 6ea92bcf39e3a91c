// OUTPUT_CERTS: key.pem, cert-chain.pem and root-cert.pem written for other consumers (VM
// workloads, proxyless gRPC). Each file is written atomically (temp file + rename), only when its
// content changed, mode 0600, or 0644 under Kubernetes (KUBERNETES_SERVICE_HOST set) as Istio.
// The key is written before the chain so a reader never pairs a new chain with an old key for long.
// With the local CA (CA_PROVIDER=local) a root-cert.pem from another CA (a VM's istiod root in
// /etc/certs, where istio-start.sh points OUTPUT_CERTS) is never replaced: nothing is written there
// and the refusal, naming the file, is the error the caller logs.

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
  /** The root this writer last wrote (its own, so replacing it is no surprise). */
  private ownRoot: string | undefined;

  constructor(
    readonly dir: string,
    readonly mode: number,
    /** Refuse to replace a root-cert.pem this writer did not write and that differs (the local CA). */
    readonly keepForeignRoot = false,
  ) {}

  /** Write what changed; returns the file names written. Throws SdsError naming the file. */
  async write(files: OutputFiles): Promise<string[]> {
    if (this.keepForeignRoot) {
      const path = join(this.dir, "root-cert.pem");
      const current = await readIfPresent(path);
      const ours = files.root ?? this.ownRoot;
      if (current !== undefined && current.trim() !== "" && current !== ours && current !== this.ownRoot) {
        throw new SdsError(
          `OUTPUT_CERTS: ${path} holds a root certificate from another CA; the local CA (CA_PROVIDER=local) does not replace it, nor key.pem and cert-chain.pem beside it: set OUTPUT_CERTS to another directory (or empty) for local mode, or remove the file`,
        );
      }
    }
    const plan: [string, string | undefined][] = [
      ["key.pem", files.key],
      ["cert-chain.pem", files.chain],
      ["root-cert.pem", files.root],
    ];
    const written: string[] = [];
    for (const [name, content] of plan) {
      if (content === undefined) continue;
      const path = join(this.dir, name);
      const current = await readIfPresent(path);
      if (current === content) continue;
      try {
        await mkdir(this.dir, { recursive: true });
        await atomicWriteFile(path, content, this.mode);
      } catch (e) {
        throw new SdsError(`OUTPUT_CERTS: writing ${path}: ${(e as NodeJS.ErrnoException).code ?? errorMessage(e)}`, undefined, { cause: e });
      }
      written.push(name);
      if (name === "root-cert.pem") this.ownRoot = content;
    }
    if (files.root !== undefined) this.ownRoot = files.root;
    return written;
  }
}

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readBoundedText(path, { maxBytes: FILE_LIMITS.certificate });
  } catch {
    return undefined;
  }
}
