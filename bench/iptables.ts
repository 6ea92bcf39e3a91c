// Benchmark: wall time of a real apply of the default sidecar capture (IPv4 + IPv6, each backend:
// nft and legacy) beside a bare `iptables-restore --noflush` of the same payloads, and of the
// native nftables mode (the whole `agent iptables --native-nftables` process) beside a bare
// `nft -f` of the same program, in one run, inside a throwaway network namespace. Needs root;
// otherwise returns a note saying it was skipped.

import { runCapture } from "../src/iptables/capture.ts";
import { buildRestore } from "../src/iptables/builder.ts";
import { defaultCaptureConfig, type CaptureConfig } from "../src/iptables/config.ts";
import { RealXtables, spawnExec, type Exec } from "../src/iptables/deps.ts";
import { configureRoutes } from "../src/iptables/routes.ts";
import { generateRules } from "../src/iptables/rules.ts";
import { renderCleanupProgram } from "../src/iptables/nft-builder.ts";
import { nftProgram } from "../src/iptables/nft-capture.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { silentLogger } from "../src/lib/log.ts";

const ROUNDS = 5;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function sh(args: string[]): void {
  const r = Bun.spawnSync(args);
  if (r.exitCode !== 0) throw new Error(`${args.join(" ")}: ${r.stderr.toString()}`);
}

export async function run(): Promise<string> {
  if (process.getuid?.() !== 0) return "## iptables apply\n\nSkipped: needs root (creates a network namespace).\n";
  const ns = `iptbench${process.pid}`;
  Bun.spawnSync(["ip", "netns", "del", ns]);
  sh(["ip", "netns", "add", ns]);
  try {
    sh(["ip", "-n", ns, "link", "set", "lo", "up"]);
    sh(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"]);
    sh(["ip", "-n", ns, "link", "set", "eth1", "up"]);
    sh(["ip", "-n", ns, "addr", "add", "10.250.200.2/24", "dev", "eth0"]);
    sh(["ip", "-n", ns, "addr", "add", "fd00:250::2/64", "dev", "eth0", "nodad"]);
    sh(["ip", "-n", ns, "link", "set", "eth0", "up"]);
    const exec: Exec = (cmd, args, opts) => spawnExec("ip", ["netns", "exec", ns, cmd, ...args], opts);
    // Injector defaults: -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020
    const cfg: CaptureConfig = {
      ...defaultCaptureConfig(),
      PROXY_UID: "1337",
      PROXY_GID: "1337",
      INBOUND_INTERCEPTION_MODE: "REDIRECT",
      OUTBOUND_IPRANGES_INCLUDE: "*",
      INBOUND_PORTS_INCLUDE: "*",
      INBOUND_PORTS_EXCLUDE: "15090,15021,15020",
      ENABLE_INBOUND_IPV6: true,
    };
    const rb = generateRules(cfg).builder;
    const payloads: [string, string][] = [
      ["iptables", buildRestore(rb.rules("v4"))],
      ["ip6tables", buildRestore(rb.rules("v6"))],
    ];
    const rows: string[] = [];
    for (const backend of ["nft", "legacy"] as const) {
      const cleanup = async () => {
        const c = { ...cfg, CLEANUP_ONLY: true, FORCE_IPTABLES_BINARY: backend };
        await runCapture(c, new RealXtables({ exec, forceBinary: backend }), silentLogger());
      };
      const agent: number[] = [];
      const bare: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        await cleanup();
        let t = performance.now();
        await runCapture({ ...cfg, FORCE_IPTABLES_BINARY: backend }, new RealXtables({ exec, forceBinary: backend }), silentLogger());
        await configureRoutes(cfg, exec, silentLogger());
        agent.push(performance.now() - t);
        await cleanup();
        t = performance.now();
        for (const [bin, data] of payloads) {
          const r = await exec(`${bin}-${backend}-restore`, ["--noflush"], { stdin: data });
          if (r.code !== 0) throw new Error(`${bin}-${backend}-restore: ${r.stderr}`);
        }
        bare.push(performance.now() - t);
      }
      await cleanup();
      const a = median(agent);
      const b = median(bare);
      rows.push(`| ${backend} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a / b).toFixed(1)}x |`);
    }
    const nftRows = await nativeNftables(ns, exec, cfg);
    return [
      "## iptables apply",
      "",
      `Default sidecar capture (injector flags), IPv4 + IPv6, in a fresh network namespace; median of ${ROUNDS} rounds.`,
      "The agent's apply = binary detection (3 probes per family), state check, `iptables-restore --test`, apply, final save and `::6` on lo;",
      "the bare column is `iptables-restore --noflush` of the same two payloads. Every command runs through `ip netns exec` in both columns.",
      "",
      "| backend | agent apply (ms) | bare restore (ms) | ratio |",
      "|---|---|---|---|",
      ...rows,
      "",
      ...nftRows,
    ].join("\n");
  } finally {
    Bun.spawnSync(["ip", "netns", "del", ns]);
  }
}

const AGENT = join(import.meta.dir, "..", "dist", "agent");
const INJECTOR_ARGS = [
  "-p",
  "15001",
  "-z",
  "15006",
  "-u",
  "1337",
  "-g",
  "1337",
  "-m",
  "REDIRECT",
  "-i",
  "*",
  "-x",
  "",
  "-b",
  "*",
  "-d",
  "15090,15021,15020",
  "--dual-stack",
];

/** The nftables mode: the whole agent process (dist/agent) vs bare `nft -f` of the program it prints in a dry run. */
async function nativeNftables(ns: string, exec: Exec, cfg: CaptureConfig): Promise<string[]> {
  const head = ["### native nftables (`--native-nftables`)", ""];
  if (!existsSync(AGENT)) return [...head, "Skipped: dist/agent is missing (build it with `bun build.ts --host`).", ""];
  const agent = (extra: string[]) => Bun.spawnSync(["ip", "netns", "exec", ns, AGENT, "iptables", "--native-nftables", ...INJECTOR_ARGS, ...extra]);
  const dry = agent(["--dry-run"]);
  const program = nftProgram(cfg, silentLogger());
  if (dry.exitCode !== 0 || dry.stdout.toString() !== program)
    throw new Error(`agent --native-nftables --dry-run did not print the expected program: ${dry.stderr.toString()}`);
  const cleanup = async () => {
    const r = await exec("nft", ["-f", "-"], { stdin: renderCleanupProgram() });
    if (r.code !== 0) throw new Error(`nft cleanup: ${r.stderr}`);
  };
  const whole: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    await cleanup();
    let t = performance.now();
    const r = agent([]);
    whole.push(performance.now() - t);
    if (r.exitCode !== 0) throw new Error(`agent iptables --native-nftables: ${r.stderr.toString()}`);
    await cleanup();
    t = performance.now();
    const b = await exec("nft", ["-f", "-"], { stdin: program });
    bare.push(performance.now() - t);
    if (b.code !== 0) throw new Error(`nft -f: ${b.stderr}`);
  }
  await cleanup();
  const a = median(whole);
  const b = median(bare);
  return [
    ...head,
    `Same capture and namespace; median of ${ROUNDS} rounds. The agent column is the whole \`dist/agent iptables --native-nftables\` process`,
    "(start-up, config, `nft --version`, `nft -c -f -`, `nft -f -`, `nft -j list ruleset inet` read-back, `::6` on lo); the bare column is one `nft -f -` of the same program.",
    "",
    "| mode | agent process (ms) | bare nft -f (ms) | ratio |",
    "|---|---|---|---|",
    `| native nftables | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a / b).toFixed(1)}x |`,
    "",
  ];
}

if (import.meta.main) console.log(await run());
