// One generated secret as the cache holds it, and how it becomes an SDS resource.

import { createHash } from "node:crypto";
import type { SecretResource } from "./proto.ts";
import { isRootResource } from "./resources.ts";

export interface SecretItem {
  resourceName: string;
  /** PEM chain (workload certificate first) for key/cert resources. */
  certificateChain?: string;
  /** PEM private key for key/cert resources. Never logged. */
  privateKey?: string;
  /** PEM bundle for root resources; for `default` the CA's root that came with the chain. */
  rootCert?: string;
  /** When the certificate was obtained and when its first certificate expires (ms); 0 for roots. */
  createdMs: number;
  expireMs: number;
  /** Short content hash: the resource's version in Delta and for change detection. */
  version: string;
}

export function contentVersion(...parts: (string | undefined)[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p ?? "").update("\0");
  return h.digest("hex").slice(0, 16);
}

export function toResource(item: SecretItem, crlFilename?: string): SecretResource {
  if (isRootResource(item.resourceName)) {
    const r: SecretResource = { name: item.resourceName, kind: "root", trustedCa: item.rootCert ?? "", version: item.version };
    if (crlFilename) r.crlFilename = crlFilename;
    return r;
  }
  return { name: item.resourceName, kind: "tls", certificateChain: item.certificateChain ?? "", privateKey: item.privateKey ?? "", version: item.version };
}
