// The check a connection's root bundle gets before TLS sees it (TLS would only say "Invalid CA",
// naming no file), run once per content rather than once per dial. The files are still read at
// every dial, so a rotated root is picked up; only bytes already found good skip the parse. A
// system bundle is ~140 certificates: parsing it at every CSR retry while the CA is unreachable
// left several MiB of freed certificate objects in the allocator (docs/memory.md).

import { createHash } from "node:crypto";
import { parseRootBundle } from "./inspect.ts";

export class RootBundleCheck {
  /** SHA-256 of the last bytes found to be a usable bundle. */
  private good: string | undefined;
  /** Bundles parsed so far (for tests: a retry with the same root parses nothing). */
  parses = 0;

  /** Why `bytes` (the file at `path`) are not a usable root bundle, or undefined. */
  problem(path: string, bytes: Buffer): string | undefined {
    const digest = createHash("sha256").update(bytes).digest("base64");
    if (digest === this.good) return undefined;
    this.parses++;
    const bundle = parseRootBundle(path, bytes);
    if ("error" in bundle) return bundle.error;
    this.good = digest;
    return undefined;
  }
}
