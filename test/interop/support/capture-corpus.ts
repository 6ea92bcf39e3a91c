// The generated corpus of `istio-iptables --dry-run` inputs for the capture differential, and
// the extraction of the comparable transcript from either agent's output.

import type { Rng } from "./seeded.ts";

export interface CaptureCase {
  args: string[];
  env: Record<string, string>;
}

const PORTS = ["15001", "15002", "8000"];
const INBOUND_PORTS = ["", "*", "80", "80,443", "8080,9090,9091"];
const EXCLUDE_PORTS = ["", "22", "22,15090", "15020,15021"];
const CIDRS = ["", "*", "10.0.0.0/8", "10.0.0.0/8,172.16.0.0/12", "10.96.0.0/12,fd00::/8", "fd00::/8"];
const EXCLUDE_CIDRS = ["", "10.1.0.0/16", "169.254.169.254/32", "10.1.0.0/16,fd00:1::/64"];
const IFACES = ["", "eth1", "eth1,eth2"];
const OUT_PORTS = ["", "3306", "3306,5432", "8080"];
const GROUPS = ["", "*", "1001", "1001,1002", "nogroup"];
const BAD: [string, string][] = [
  ["-p", "notaport"],
  ["-m", "SOMETIMES"],
  ["-i", "10.0.0.0/33"],
  ["-x", "not-a-cidr"],
  ["-u", "-5"],
  ["-t", "x"],
];

/** One generated case: each flag is present with some probability, values from small tables. */
export function captureCase(r: Rng): CaptureCase {
  const args = ["--dry-run"];
  const env: Record<string, string> = {};
  const flag = (p: number, name: string, values: readonly string[]): void => {
    if (r.chance(p)) args.push(name, r.pick(values));
  };
  flag(0.3, "-p", PORTS);
  flag(0.2, "-z", ["15006", "15016"]);
  flag(0.1, "-e", ["15008", "15009"]);
  flag(0.3, "-u", ["1337", "1000", "0"]);
  flag(0.3, "-g", ["1337", "1000"]);
  flag(0.4, "-m", ["REDIRECT", "TPROXY"]);
  flag(0.6, "-b", INBOUND_PORTS);
  flag(0.4, "-d", EXCLUDE_PORTS);
  flag(0.3, "-c", IFACES);
  flag(0.6, "-i", CIDRS);
  flag(0.4, "-x", EXCLUDE_CIDRS);
  flag(0.3, "-q", OUT_PORTS);
  flag(0.3, "-o", OUT_PORTS);
  flag(0.2, "-k", IFACES);
  flag(0.1, "-t", ["1337", "1338"]);
  flag(0.1, "-r", ["133", "134"]);
  for (const b of ["--redirect-dns", "--capture-all-dns", "--drop-invalid", "--dual-stack"]) if (r.chance(0.3)) args.push(b);
  if (r.chance(0.15)) env.ISTIO_META_DNS_CAPTURE = r.pick(["true", "false"]);
  if (r.chance(0.1)) env.INVALID_DROP = "true";
  if (r.chance(0.1)) env.ISTIO_DUAL_STACK = "true";
  if (r.chance(0.2)) env.ISTIO_OUTBOUND_OWNER_GROUPS = r.pick(GROUPS);
  if (r.chance(0.1)) env.ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE = r.pick(GROUPS);
  if (r.chance(0.1)) env.ISTIO_SERVICE_CIDR = r.pick(CIDRS);
  if (r.chance(0.1)) env.ISTIO_INBOUND_PORTS = r.pick(INBOUND_PORTS);
  if (r.chance(0.06)) args.push(...r.pick(BAD));
  return { args, env };
}

const shq = (s: string): string => (/^[\w./:,=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** The exact command line that reproduces a case with `bin`. */
export function reproduce(c: CaptureCase, bin: string): string {
  const env = Object.entries(c.env).map(([k, v]) => `${k}=${shq(v)}`);
  return ["env", "-i", `PATH=${shq(process.env.PATH ?? "")}`, ...env, bin, "istio-iptables", ...c.args.map(shq)].join(" ");
}

/**
 * The nftables transaction of a `--native-nftables --dry-run`: Istio logs it after "nftables
 * rules programmed:" (having run it, so it must run in a throwaway network namespace); we print
 * it on stdout and run nothing.
 */
export function istioNftTranscript(log: string): string | undefined {
  const lines = log.split("\n");
  const i = lines.findIndex((l) => LOG_LINE.test(l) && l.endsWith("nftables rules programmed:"));
  if (i < 0) return undefined;
  const body: string[] = [];
  // The dump ends at a whitespace-only line (or the next log line).
  for (let k = i + 1; k < lines.length && !LOG_LINE.test(lines[k]!) && lines[k]!.trim() !== ""; k++) body.push(lines[k]!);
  return body.join("\n");
}

const LOG_LINE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z\t/;

export interface Transcript {
  /** "<command>\n<input>" for each restore run, in order. */
  restores: string[];
  /** The "Istio config:" block, one KEY=value a line. */
  config: string[];
}

/**
 * The comparable part of a dry run's log: every iptables-restore input the run would have fed,
 * with the command that would have read it, and the effective config block.
 */
export function transcriptOf(log: string): Transcript {
  const lines = log.split("\n");
  const restores: string[] = [];
  let config: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const head = /Running (\S+) restore with: (\S+) and the following input:$/.exec(lines[i]!);
    if (head) {
      const body: string[] = [];
      while (i + 1 < lines.length && !LOG_LINE.test(lines[i + 1]!)) body.push(lines[++i]!);
      restores.push([head[2], ...body].join("\n").trimEnd());
      continue;
    }
    if (LOG_LINE.test(lines[i]!) && lines[i]!.endsWith("Istio config:")) {
      const body: string[] = [];
      while (i + 1 < lines.length && lines[i + 1] !== "" && !LOG_LINE.test(lines[i + 1]!)) body.push(lines[++i]!);
      config = body;
    }
  }
  return { restores, config };
}
