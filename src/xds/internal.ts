// Internal xDS types: consumed by the agent, never forwarded, ACKed or NACKed upstream by the
// relay. NDS name tables go to the DNS proxy, PCDS ProxyConfig trust bundles to the certificate
// side. A handler throws to NACK; the message becomes the NACK's error_detail.

import type { NameTableSink, TrustBundleSink } from "../lib/interfaces.ts";
import { repeatedStrings } from "./frame.ts";
import { NAME_TABLE_TYPE, PROXY_CONFIG_TYPE } from "./types.ts";

export type InternalHandler = (resource: Uint8Array) => void;

/** istio.mesh.v1alpha1.ProxyConfig.ca_certificates_pem */
export const PROXY_CONFIG_CA_CERTIFICATES_PEM = 34;

export function internalHandlers(sinks: { nameTables?: NameTableSink; trustBundles?: TrustBundleSink }): Map<string, InternalHandler> {
  const m = new Map<string, InternalHandler>();
  const { nameTables, trustBundles } = sinks;
  if (nameTables) m.set(NAME_TABLE_TYPE, (r) => nameTables.updateNameTable(r));
  if (trustBundles) m.set(PROXY_CONFIG_TYPE, (r) => trustBundles.updateTrustBundle(repeatedStrings(r, PROXY_CONFIG_CA_CERTIFICATES_PEM)));
  return m;
}
