// Istio's conformance vectors (iptables and nftables capture and builder goldens, Envoy bootstrap
// goldens and template), kept in the repository so that a clone alone runs every suite; where
// they come from and how they relate to the oracle: vectors/README.md.

import { join } from "node:path";

/** The folder holding iptables/, iptables-builder/, nftables/, nftables-builder/, bootstrap/. */
export const VECTORS = join(import.meta.dir, "vectors");
