// The local IP when an interface is up without carrier (a veth whose peer is down) or down, ours
// against Istio's pilot-agent in the same network namespace. Istio reads Go's net package: the
// agent's IPs (no INSTANCE_IP) come from net.Interfaces() that are up, carrier or not;
// istio-iptables' local IP from net.InterfaceAddrs(), every address of every interface. Ours reads
// getifaddrs(3) (native/ifaddrs.ts, src/config/hostaddrs.ts). Before, ours read
// os.networkInterfaces(), which lists only interfaces that are up and running: with no carrier the
// agent fell back to 127.0.0.1 and the nftables capture failed with "no valid local IP address
// found" where Istio's went on. Expected values are literals (the addresses the namespace was
// given) and Istio's own binary.

import { expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { istioNftTranscript } from "./support/capture-corpus.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A network namespace of its own for the command after the script: loopback up, then `setup`. */
const inNetns = (setup: string): string[] => ["unshare", "--net", "--", "sh", "-c", `set -e; ip link set lo up; ${setup}; exec "$@"`, "netns"];

// v0 up with both addresses, its peer v1 left down: v0 is UP, NO-CARRIER (not RUNNING).
const NO_CARRIER =
  "ip link add v0 type veth peer name v1; ip addr add 10.0.0.5/24 dev v0; ip -6 addr add fd00::5/64 dev v0 nodad; ip link set v0 up; ip link show v0 | grep -q NO-CARRIER";
// v0 administratively down with an IPv4 address (the kernel keeps IPv4 addresses on a down link).
const DOWN = "ip link add v0 type veth peer name v1; ip addr add 10.0.0.5/24 dev v0";

interface Run {
  /** null: stopped once `done` held. */
  code: number | null;
  stdout: string;
  /** stdout and stderr. */
  out: string;
}

/** Runs `bin args` in a fresh directory inside the namespace until `done(output)` or its exit; then it is killed. */
async function runIn(setup: string, bin: string, args: string[], done: (out: string) => boolean = () => false): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), "agent-local-ip-"));
  const p = Bun.spawn([...inNetns(setup), bin, ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin", HOME: dir },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  let stdout = "";
  const pump = async (s: ReadableStream<Uint8Array>, isStdout: boolean) => {
    const dec = new TextDecoder();
    for await (const c of s) {
      const text = dec.decode(c);
      out = (out + text).slice(-200_000);
      if (isStdout) stdout = (stdout + text).slice(-200_000);
      if (done(out)) p.kill("SIGKILL");
    }
  };
  const timer = setTimeout(() => p.kill("SIGKILL"), 20_000);
  try {
    await Promise.all([pump(p.stdout as ReadableStream<Uint8Array>, true), pump(p.stderr as ReadableStream<Uint8Array>, false), p.exited]);
    return { code: done(out) ? null : p.exitCode, stdout, out };
  } finally {
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The IPs of the agent's "Proxy role" line: ours `ips=a,b`, Istio's `ips=[a b]`. */
function roleIps(out: string): string[] | undefined {
  const m = /Proxy role\s+ips=(\[[^\]]*\]|\S+)/.exec(out);
  if (!m) return undefined;
  return m[1]!
    .replace(/^\[|\]$/g, "")
    .split(/[ ,]/)
    .filter(Boolean);
}

const hasRole = (out: string) => /Proxy role\s+ips=/.test(out);

async function proxyIps(setup: string, bin: string): Promise<string[]> {
  const r = await runIn(setup, bin, ["proxy", "sidecar"], hasRole);
  const ips = roleIps(r.out);
  if (!ips) throw new Error(`${bin}: no "Proxy role" line (exit ${r.code}):\n${r.out.slice(-3000)}`);
  return ips;
}

describeRequiring(
  { root: true, tools: ["unshare", "ip", "nft"], apt: ["util-linux", "iproute2", "nftables"], check: () => interopUnmet(["pilot-agent"]) },
  "local IP with an interface without carrier or down: ours as Istio's (Go's net package)",
  () => {
    for (const [name, setup, expected] of [
      ["no carrier: the agent's IPs are the interface's", NO_CARRIER, ["10.0.0.5", "fd00::5"]],
      ["down: the agent leaves the interface out (127.0.0.1, ::1)", DOWN, ["127.0.0.1", "::1"]],
    ] as const) {
      test(`${name}, as Istio's`, async () => {
        requireBinary();
        const [theirs, ours] = await Promise.all([proxyIps(setup, PILOT_AGENT), proxyIps(setup, DIST_AGENT)]);
        expect(theirs).toEqual([...expected]);
        expect(ours).toEqual(theirs);
      }, 60_000);
    }

    for (const [name, setup] of [
      ["no carrier", NO_CARRIER],
      ["down", DOWN],
    ] as const) {
      test(`${name}: the nftables capture finds the local IP and programs what Istio's does`, async () => {
        requireBinary();
        const args = ["istio-iptables", "--native-nftables", "--dry-run"];
        const [theirs, ours] = await Promise.all([runIn(setup, PILOT_AGENT, args), runIn(setup, DIST_AGENT, args)]);
        expect({ code: theirs.code, noLocalIp: theirs.out.includes("no valid local IP address found") }).toEqual({ code: 0, noLocalIp: false });
        expect({ code: ours.code, noLocalIp: ours.out.includes("no valid local IP address found") }).toEqual({ code: 0, noLocalIp: false });
        expect(ours.stdout.trim()).toBe(istioNftTranscript(theirs.out) ?? "(Istio logged no transaction)");
      }, 60_000);
    }
  },
);
