// `/debug/ndsz` content: the last NameTable in protobuf JSON form (lowerCamelCase, empty fields
// left out), with every generated alternate host that is not already a key added as a
// `Kubernetes` entry holding the host's IPs (IPv4 first, canonical text), as Istio's agent shows it.

import { buildAlternateHosts, type ProxyDomain } from "./althosts.ts";
import { formatIp } from "./ip.ts";
import type { NameInfo, NameTable } from "./nametable.ts";

export type NameInfoJson = Partial<Pick<NameInfo, "ips" | "registry" | "shortname" | "namespace" | "altHosts">>;

export interface NameTableJson {
  table?: Record<string, NameInfoJson>;
}

function infoJson(info: NameInfo): NameInfoJson {
  const out: NameInfoJson = {};
  if (info.ips.length) out.ips = [...info.ips];
  if (info.registry) out.registry = info.registry;
  if (info.shortname) out.shortname = info.shortname;
  if (info.namespace) out.namespace = info.namespace;
  if (info.altHosts.length) out.altHosts = [...info.altHosts];
  return out;
}

export function ndszTable(nt: NameTable, pd: ProxyDomain): NameTableJson {
  const table: Record<string, NameInfoJson> = {};
  for (const [host, info] of Object.entries(nt.table)) table[host] = infoJson(info);
  for (const e of buildAlternateHosts(nt, pd).entries) {
    const ips = [...e.v4, ...e.v6].map(formatIp);
    for (const name of e.names) {
      if (!(name in table)) table[name] = { ips, registry: "Kubernetes" };
    }
  }
  return Object.keys(table).length ? { table } : {};
}
