// The names under which a NameTable entry answers (Istio's BuildAlternateHosts): a non-Kubernetes
// host answers as `<host>.`; a Kubernetes host in the proxy's domain also as `<short>.<ns>.`,
// `<short>.<ns>.<first domain label>.` (usually `svc`), `<short>.` when the service lives in the
// proxy's own namespace, and its alt_hosts. Pure functions of the table and the proxy's identity.

import { splitIps, type ParsedIp } from "./ip.ts";
import type { NameInfo, NameTable } from "./nametable.ts";

export const KUBERNETES_REGISTRY = "Kubernetes";

/** The proxy's namespace and DNS domain, as the DNS proxy uses them for short names. */
export interface ProxyDomain {
  namespace: string;
  /** The domain without a leading namespace label, e.g. `svc.cluster.local`. */
  domain: string;
  /** `domain` split on dots. */
  domainParts: string[];
}

/** `--domain` may start with the namespace (`ns1.svc.cluster.local`); only the rest is kept. */
export function proxyDomain(namespace: string, domain: string): ProxyDomain {
  let parts = domain.split(".");
  if (parts[0] === namespace) parts = parts.slice(1);
  return { namespace, domain: parts.join("."), domainParts: parts };
}

export function generateAltHosts(hostname: string, info: NameInfo, pd: ProxyDomain): Set<string> {
  const out = new Set<string>();
  // Istio generates nothing for a Kubernetes host already written with a trailing dot.
  if (hostname.endsWith(".")) return out;
  out.add(hostname + ".");
  // Not in the proxy's domain (e.g. another cluster's): no short forms, they could collide.
  if (pd.domain === "" || !hostname.endsWith(pd.domain)) return out;
  out.add(`${info.shortname}.${info.namespace}.`);
  if (pd.namespace === info.namespace) out.add(`${info.shortname}.`);
  out.add(`${info.shortname}.${info.namespace}.${pd.domainParts[0]}.`);
  for (const alt of info.altHosts) out.add(alt + ".");
  return out;
}

export interface HostEntry {
  /** The NameTable key this entry comes from. */
  source: string;
  info: NameInfo;
  /** Every name the entry answers under (each ends with a dot, case as sent). */
  names: Set<string>;
  v4: ParsedIp[];
  v6: ParsedIp[];
}

/** One HostEntry per table entry with at least one valid IP; `skipped` lists entries without any. */
export function buildAlternateHosts(nt: NameTable, pd: ProxyDomain): { entries: HostEntry[]; skipped: string[] } {
  const entries: HostEntry[] = [];
  const skipped: string[] = [];
  for (const [source, info] of Object.entries(nt.table)) {
    let names: Set<string>;
    if (info.registry === KUBERNETES_REGISTRY) names = generateAltHosts(source, info, pd);
    else names = new Set([source.endsWith(".") ? source : source + "."]);
    const { v4, v6 } = splitIps(info.ips);
    if (v4.length === 0 && v6.length === 0) {
      skipped.push(source);
      continue;
    }
    entries.push({ source, info, names, v4, v6 });
  }
  return { entries, skipped };
}
