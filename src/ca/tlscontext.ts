// The CA connection's TLS context, made once per content of its root, client certificate and
// COMPLIANCE_POLICY and shared by every dial until one of them changes. Each CSR attempt dials:
// with a context per dial, a large root (the system bundle, ~140 certificates) was loaded into a
// new certificate store at every retry while the CA did not answer (docs/memory.md). The files
// are still read at every dial, so a rotated root or certificate makes the next context.
// Without a root file (the system trust store) nothing is shared: the runtime's own store serves.

import { createHash } from "node:crypto";
import type { SecureContext } from "node:tls";
import { tlsContext, type TlsDialOptions } from "../xds/dial.ts";

const digest = (b: Buffer | undefined) => (b ? createHash("sha256").update(b).digest("base64") : "-");

export class TlsContextCache {
  private key: string | undefined;
  private context: SecureContext | undefined;
  /** Contexts made so far (for tests: retries with unchanged files make none). */
  made = 0;

  /** `o` with the shared context of its content (made now if the content changed). */
  with(o: TlsDialOptions): TlsDialOptions {
    if (!o.ca) return o;
    const key = [digest(o.ca), digest(o.cert), digest(o.key), o.compliancePolicy].join(" ");
    if (key !== this.key || !this.context) {
      this.context = tlsContext(o);
      this.key = key;
      this.made++;
    }
    return { ...o, context: this.context };
  }
}
