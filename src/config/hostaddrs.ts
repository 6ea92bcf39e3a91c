// The host's interface addresses as Istio reads them through Go's net package: getifaddrs(3)
// (native/ifaddrs.ts), which lists an interface that is up without carrier, and one that is down,
// as Go does. os.networkInterfaces() leaves both out (libuv's filter: up and running only), so a
// veth whose peer is down gave the agent no local IP where Istio's had one. When getifaddrs cannot
// be called (no bun:ffi, no libc found), os.networkInterfaces() is read instead, with a warning.

import { networkInterfaces } from "node:os";
import { IFF_LOOPBACK, IFF_RUNNING, IFF_UP, readIfAddrs, type IfEntry } from "../../native/ifaddrs.ts";
import { formatAddr } from "../lib/ipformat.ts";
import type { InterfaceTable } from "./node.ts";

export interface HostAddress {
  name: string;
  flags: number;
  /** Go's netip.Addr.String(); absent on an interface's link-level entry. */
  address?: string;
  family?: "IPv4" | "IPv6";
}

export interface HostAddresses {
  /** In the kernel's order: interfaces, then IPv4 addresses, then IPv6 (os.networkInterfaces(): by interface). */
  entries: HostAddress[];
  /** Set when getifaddrs could not be used: why, and what that changes. */
  warning?: string;
}

export type ReadIfAddrs = () => IfEntry[] | string;
export type ReadNetworkInterfaces = () => ReturnType<typeof networkInterfaces>;

export function readHostAddresses(read: ReadIfAddrs = readIfAddrs, fallback: ReadNetworkInterfaces = networkInterfaces): HostAddresses {
  const got = read();
  if (typeof got !== "string") {
    return {
      entries: got.map((e) =>
        e.ip ? { name: e.name, flags: e.flags, address: formatAddr(e.ip), family: e.ip.family === 4 ? "IPv4" : "IPv6" } : { name: e.name, flags: e.flags },
      ),
    };
  }
  const entries: HostAddress[] = [];
  for (const [name, list] of Object.entries(fallback())) {
    for (const a of list ?? []) {
      const flags = IFF_UP | IFF_RUNNING | (a.internal ? IFF_LOOPBACK : 0);
      entries.push({ name, flags, address: a.address.replace(/%.*$/, ""), family: a.family === "IPv6" ? "IPv6" : "IPv4" });
    }
  }
  return {
    entries,
    warning: `${got}: the local addresses are read with os.networkInterfaces(), which leaves out interfaces without carrier and interfaces that are down (Istio's agent lists their addresses)`,
  };
}

/**
 * Go's net.Interfaces() with each one's Addrs(), as pilot-agent's GetPrivateIPs walks them: the
 * interfaces that are up (IFF_UP; with or without carrier), each with its addresses; `internal`
 * marks a loopback interface.
 */
export function upInterfaceTable(h: HostAddresses): InterfaceTable {
  const table: InterfaceTable = {};
  for (const e of h.entries) {
    if ((e.flags & IFF_UP) === 0) continue;
    const list = (table[e.name] ??= []);
    if (e.address !== undefined) list.push({ address: e.address, family: e.family ?? "IPv4", internal: (e.flags & IFF_LOOPBACK) !== 0 });
  }
  return table;
}

/** Go's net.InterfaceAddrs(), as istio-iptables' getLocalIP reads it: every address of every interface, up or not, in order. */
export function allAddresses(h: HostAddresses): string[] {
  return h.entries.flatMap((e) => (e.address === undefined ? [] : [e.address]));
}
