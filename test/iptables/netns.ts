// Network-namespace fixtures for the real-packet tests: a "pod" namespace and a "peer" namespace
// joined by a veth pair (10.250.<n>.2 in the pod; .1 and .3 in the peer). Every address lives in
// namespaces the test creates; nothing touches the host's network.

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const BUN = join(import.meta.dir, "../../node_modules/.bin/bun");
const HELPERS = join(import.meta.dir, "helpers");

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

export function sh(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): { code: number; out: string; err: string } {
  const r = Bun.spawnSync(args, {
    stdin: opts.stdin !== undefined ? new TextEncoder().encode(opts.stdin) : "ignore",
    env: opts.env ? { ...process.env, ...opts.env } : undefined,
  });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}

export function must(args: string[]): string {
  const r = sh(args);
  if (r.code !== 0) throw new Error(`${args.join(" ")} failed (${r.code}): ${r.err || r.out}`);
  return r.out;
}

export function missingTools(tools: string[]): string[] {
  return tools.filter((t) => sh(["sh", "-c", `command -v ${t}`]).code !== 0);
}

export interface Pair {
  pod: string;
  peer: string;
  podIP: string;
  peerIP: string;
  /** A second peer address (for excluded-CIDR checks). */
  peerIP2: string;
  destroy(): void;
}

export function createPair(n: number): Pair {
  const pod = `ipt${process.pid}p${n}`;
  const peer = `ipt${process.pid}q${n}`;
  for (const ns of [pod, peer]) sh(["ip", "netns", "del", ns]);
  must(["ip", "netns", "add", pod]);
  must(["ip", "netns", "add", peer]);
  must(["ip", "-n", pod, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", peer]);
  const base = `10.250.${n}`;
  must(["ip", "-n", pod, "addr", "add", `${base}.2/24`, "dev", "eth0"]);
  must(["ip", "-n", peer, "addr", "add", `${base}.1/24`, "dev", "eth0"]);
  must(["ip", "-n", peer, "addr", "add", `${base}.3/24`, "dev", "eth0"]);
  for (const ns of [pod, peer]) {
    must(["ip", "-n", ns, "link", "set", "lo", "up"]);
    must(["ip", "-n", ns, "link", "set", "eth0", "up"]);
  }
  return {
    pod,
    peer,
    podIP: `${base}.2`,
    peerIP: `${base}.1`,
    peerIP2: `${base}.3`,
    destroy() {
      sh(["ip", "netns", "del", pod]);
      sh(["ip", "netns", "del", peer]);
      rmSync(`/etc/netns/${pod}`, { recursive: true, force: true });
    },
  };
}

/** resolv.conf seen by processes under `ip netns exec <ns>`. */
export function setResolvConf(ns: string, text: string): void {
  mkdirSync(`/etc/netns/${ns}`, { recursive: true });
  writeFileSync(`/etc/netns/${ns}/resolv.conf`, text);
}

/** Run `agent iptables` inside a namespace. */
export function iptables(ns: string, args: string[], env: Record<string, string> = {}): { code: number; out: string; err: string } {
  return sh(["ip", "netns", "exec", ns, BUN, join(HELPERS, "run-iptables.ts"), ...args], { env });
}

export interface Helper {
  lines: string[];
  waitFor(pred: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  kill(): Promise<void>;
}

/** Start a helper script (listen.ts, dns.ts, trace.ts) in a namespace; resolves once it printed "ready". */
export async function startHelper(ns: string, script: string, args: string[], uid?: number): Promise<Helper> {
  const run = [BUN, join(HELPERS, script), ...args];
  const asUser = uid === undefined ? run : ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", ...run];
  const proc = Bun.spawn(["ip", "netns", "exec", ns, ...asUser], { stdout: "pipe", stderr: "inherit" });
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  (async () => {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of proc.stdout) {
      buf += dec.decode(chunk);
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
      wake?.();
    }
  })();
  const h: Helper = {
    lines,
    async waitFor(pred, timeoutMs = 8000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = lines.find(pred);
        if (hit !== undefined) return hit;
        if (Date.now() > deadline) throw new Error(`${script} ${args.join(" ")}: no matching line in ${JSON.stringify(lines)}`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 50);
        });
      }
    },
    async kill() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
  await h.waitFor((l) => l === "ready");
  return h;
}

/** Connect from a namespace, optionally as another uid/gid; returns the server's JSON or "ERR …". */
export function connect(ns: string, host: string, port: number, uid?: number): string {
  const run = [BUN, join(HELPERS, "connect.ts"), host, String(port)];
  const asUser = uid === undefined ? run : ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", ...run];
  return sh(["ip", "netns", "exec", ns, ...asUser]).out.trim();
}

export function parse(answer: string): { local: string; peer: string; orig: string | null; listener: number } {
  if (answer.startsWith("ERR")) throw new Error(`connection failed: ${answer}`);
  return JSON.parse(answer);
}

/** iptables-save without comments and counters, for before/after comparisons. */
export function saveState(ns: string, bin = "iptables-save"): string {
  return must(["ip", "netns", "exec", ns, bin])
    .split("\n")
    .filter((l) => !l.startsWith("#"))
    .map((l) => l.replace(/\[\d+:\d+\]$/, ""))
    .join("\n");
}

/** `nft -s list ruleset` (no counters) in a namespace. */
export function ruleset(ns: string): string {
  return must(["ip", "netns", "exec", ns, "nft", "-s", "list", "ruleset"]);
}

/** Names of the inet tables in a namespace. */
export function inetTables(ns: string): string[] {
  return must(["ip", "netns", "exec", ns, "nft", "list", "tables", "inet"])
    .split("\n")
    .map((l) => l.trim().replace(/^table inet /, ""))
    .filter((l) => l !== "");
}
