// Node identity as pilot-agent's initProxy computes it: the proxy's IPs (INSTANCE_IP first, then
// every address of an up, non-loopback, non-link-local interface, minus excluded interfaces,
// deduplicated; 127.0.0.1 and ::1 when nothing is left), the IP mode, the ID
// POD_NAME.POD_NAMESPACE, the DNS domain and the node ID `<type>~<ip>~<id>~<domain>`.

import { isIP } from "node:net";
import type { IpMode, NodeIdentity, ProxyType } from "./agentconfig.ts";

export interface InterfaceAddress {
  address: string;
  family: "IPv4" | "IPv6" | string | number;
  internal: boolean;
}

export type InterfaceTable = Record<string, InterfaceAddress[] | undefined>;

export interface NodeInputs {
  type: ProxyType;
  instanceIp: string;
  podName: string;
  podNamespace: string;
  serviceAccount: string;
  /** `--domain` (empty = `<ns>.svc.cluster.local`). */
  domain: string;
  interfaces: InterfaceTable;
  /** Annotation traffic.sidecar.istio.io/excludeInterfaces, comma list. */
  excludeInterfaces: string;
}

export function isLinkLocal(ip: string): boolean {
  if (isIP(ip) === 4) return ip.startsWith("169.254.");
  return /^fe[89ab][0-9a-f]:/i.test(ip);
}

function isLoopback(ip: string): boolean {
  return isIP(ip) === 4 ? ip.startsWith("127.") : ip === "::1";
}

function usable(ip: string): boolean {
  return isIP(ip) !== 0 && !isLoopback(ip) && !isLinkLocal(ip) && ip !== "0.0.0.0" && ip !== "::";
}

export function discoverIps(inputs: Pick<NodeInputs, "instanceIp" | "interfaces" | "excludeInterfaces">): string[] {
  const excluded = new Set(
    inputs.excludeInterfaces
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const excludedIps = new Set<string>();
  const ips: string[] = [];
  if (inputs.instanceIp && isIP(inputs.instanceIp)) ips.push(inputs.instanceIp);
  for (const [name, addrs] of Object.entries(inputs.interfaces)) {
    for (const a of addrs ?? []) {
      const ip = a.address.split("%")[0]!;
      if (excluded.has(name)) {
        excludedIps.add(ip);
        continue;
      }
      if (!a.internal && usable(ip)) ips.push(ip);
    }
  }
  const out: string[] = [];
  for (const ip of ips) if (!excludedIps.has(ip) && !out.includes(ip)) out.push(ip);
  return out.length ? out : ["127.0.0.1", "::1"];
}

export function ipModeOf(ips: readonly string[]): IpMode {
  const v4 = ips.filter((ip) => isIP(ip) === 4).length;
  if (v4 === ips.length) return "ipv4";
  if (v4 === 0) return "ipv6";
  return "dual";
}

export function buildNodeIdentity(inputs: NodeInputs): NodeIdentity {
  const ips = discoverIps(inputs);
  const domain = inputs.domain || `${inputs.podNamespace}.svc.cluster.local`;
  const id = `${inputs.podName}.${inputs.podNamespace}`;
  return {
    type: inputs.type,
    ips,
    ipMode: ipModeOf(ips),
    id,
    domain,
    nodeId: `${inputs.type}~${ips[0]}~${id}~${domain}`,
    podName: inputs.podName,
    podNamespace: inputs.podNamespace,
    serviceAccount: inputs.serviceAccount,
  };
}
