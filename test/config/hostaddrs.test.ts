// The host's addresses as Istio's Go reads them (src/config/hostaddrs.ts): the agent's view (up
// interfaces, carrier or not), the capture's view (every address, in order), and the fallback to
// os.networkInterfaces() with its warning. The reader itself (native/ifaddrs.ts) is compared with
// iproute2's `ip` on this host and in a network namespace with a veth whose peer is down.

import { expect, test } from "bun:test";
import { IFF_LOOPBACK, IFF_RUNNING, IFF_UP, readIfAddrs, type IfEntry } from "../../native/ifaddrs.ts";
import { allAddresses, readHostAddresses, upInterfaceTable } from "../../src/config/hostaddrs.ts";
import { discoverIps } from "../../src/config/node.ts";
import { testRequiring } from "../support/requires.ts";

const v4 = (...b: number[]) => ({ family: 4 as const, bytes: new Uint8Array(b) });
const v6 = (hex: string) => ({ family: 6 as const, bytes: new Uint8Array(hex.match(/../g)!.map((h) => parseInt(h, 16))) });

// What getifaddrs gives in a pod whose eth0 has no carrier and whose net1 is down: the links, then
// the IPv4 addresses, then the IPv6 ones (the kernel's netlink order).
const POD: IfEntry[] = [
  { name: "lo", flags: IFF_UP | IFF_RUNNING | IFF_LOOPBACK },
  { name: "eth0", flags: IFF_UP },
  { name: "net1", flags: 0 },
  { name: "lo", flags: IFF_UP | IFF_RUNNING | IFF_LOOPBACK, ip: v4(127, 0, 0, 1) },
  { name: "eth0", flags: IFF_UP, ip: v4(10, 1, 2, 3) },
  { name: "net1", flags: 0, ip: v4(192, 168, 7, 9) },
  { name: "lo", flags: IFF_UP | IFF_RUNNING | IFF_LOOPBACK, ip: v6("00000000000000000000000000000001") },
  { name: "eth0", flags: IFF_UP, ip: v6("fd000000000000000000000000000005") },
  { name: "eth0", flags: IFF_UP, ip: v6("fe8000000000000000000000000000aa") },
];

test("the agent's view: up interfaces with or without carrier, by interface; a down one is left out", () => {
  const h = readHostAddresses(() => POD);
  expect(h.warning).toBeUndefined();
  expect(upInterfaceTable(h)).toEqual({
    lo: [
      { address: "127.0.0.1", family: "IPv4", internal: true },
      { address: "::1", family: "IPv6", internal: true },
    ],
    eth0: [
      { address: "10.1.2.3", family: "IPv4", internal: false },
      { address: "fd00::5", family: "IPv6", internal: false },
      { address: "fe80::aa", family: "IPv6", internal: false },
    ],
  });
  // pilot-agent's IPs from it: loopback and link-local dropped.
  expect(discoverIps({ instanceIp: "", interfaces: upInterfaceTable(h), excludeInterfaces: "" })).toEqual(["10.1.2.3", "fd00::5"]);
});

test("the capture's view: every address of every interface, up or down, in the kernel's order", () => {
  expect(allAddresses(readHostAddresses(() => POD))).toEqual(["127.0.0.1", "10.1.2.3", "192.168.7.9", "::1", "fd00::5", "fe80::aa"]);
});

test("getifaddrs not callable: os.networkInterfaces() is read, with a warning naming the reason and what is lost", () => {
  const h = readHostAddresses(
    () => "getifaddrs could not be loaded from libc (libc.so.6: not found)",
    () => ({
      lo: [{ address: "127.0.0.1", netmask: "255.0.0.0", family: "IPv4", mac: "00:00:00:00:00:00", internal: true, cidr: "127.0.0.1/8" }],
      eth0: [
        { address: "fe80::1", netmask: "ffff:ffff:ffff:ffff::", family: "IPv6", mac: "02:00:00:00:00:01", internal: false, cidr: "fe80::1/64", scopeid: 2 },
      ],
    }),
  );
  expect(h.warning).toBe(
    "getifaddrs could not be loaded from libc (libc.so.6: not found): the local addresses are read with os.networkInterfaces(), which leaves out interfaces without carrier and interfaces that are down (Istio's agent lists their addresses)",
  );
  expect(upInterfaceTable(h)).toEqual({
    lo: [{ address: "127.0.0.1", family: "IPv4", internal: true }],
    eth0: [{ address: "fe80::1", family: "IPv6", internal: false }],
  });
  expect(allAddresses(h)).toEqual(["127.0.0.1", "fe80::1"]);
});

/** `ip -o addr show` lines as `name address` (iproute2, independent of the reader). */
function ipAddrs(prefix: string[] = []): string[] {
  const out = Bun.spawnSync([...prefix, "ip", "-o", "addr", "show"]).stdout.toString();
  return out
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const f = l.split(/\s+/);
      return `${f[1]!.replace(/@.*$/, "")} ${f[3]!.replace(/\/\d+$/, "")}`;
    });
}

function readerAddrs(): string[] {
  const got = readIfAddrs();
  if (typeof got === "string") throw new Error(got);
  const h = readHostAddresses(() => got);
  return h.entries.flatMap((e) => (e.address ? [`${e.name} ${e.address}`] : []));
}

testRequiring({ tools: ["ip"], apt: ["iproute2"] }, "getifaddrs through bun:ffi lists what `ip addr` lists on this host", () => {
  expect(readerAddrs().sort()).toEqual(ipAddrs().sort());
});

testRequiring(
  { root: true, tools: ["ip", "unshare"], apt: ["iproute2", "util-linux"] },
  "in a namespace: a veth without carrier (peer down) and a down one keep their addresses, with their flags",
  () => {
    const setup =
      "set -e; ip link set lo up; ip link add v0 type veth peer name v1; ip addr add 10.0.0.5/24 dev v0; ip -6 addr add fd00::5/64 dev v0 nodad; ip link set v0 up; " +
      "ip link add d0 type veth peer name d1; ip addr add 10.9.0.1/24 dev d0";
    const script = `${setup}; exec "$@"`;
    const self = `
      import { readIfAddrs } from ${JSON.stringify(`${import.meta.dir}/../../native/ifaddrs.ts`)};
      const r = readIfAddrs();
      console.log(JSON.stringify(typeof r === "string" ? r : r.map((e) => ({ ...e, ip: e.ip ? Array.from(e.ip.bytes).join(".") : undefined }))));`;
    const r = Bun.spawnSync(["unshare", "--net", "--", "sh", "-c", script, "netns", process.execPath, "-e", self], { stderr: "pipe" });
    expect(r.exitCode).toBe(0);
    const entries = JSON.parse(r.stdout.toString()) as { name: string; flags: number; ip?: string }[];
    const flagsOf = (n: string) => entries.find((e) => e.name === n)!.flags;
    // v0: up, not running (iproute2 shows NO-CARRIER); d0: down.
    expect({ v0up: (flagsOf("v0") & IFF_UP) !== 0, v0running: (flagsOf("v0") & IFF_RUNNING) !== 0, d0up: (flagsOf("d0") & IFF_UP) !== 0 }).toEqual({
      v0up: true,
      v0running: false,
      d0up: false,
    });
    expect(entries.filter((e) => e.ip).map((e) => `${e.name} ${e.ip}`)).toEqual([
      "lo 127.0.0.1",
      "v0 10.0.0.5",
      "d0 10.9.0.1",
      "lo 0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1",
      "v0 253.0.0.0.0.0.0.0.0.0.0.0.0.0.0.5",
    ]);
  },
);
