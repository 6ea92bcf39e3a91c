import { errorMessage } from "../lib/errors.ts";
// The process boundary of the capture: running iptables, iptables-save and iptables-restore.
// `DryRunXtables` records what would run (Istio's DependenciesStub: its transcript is the golden
// files' format); `RealXtables` runs the detected binaries through an injected `Exec`.

export type XtablesCmd = "iptables" | "save" | "restore";

export interface IptablesVersion {
  binary: string;
  saveBinary: string;
  restoreBinary: string;
  /** [major, minor, patch]; [0,0,0] when unknown. */
  version: number[];
  legacy: boolean;
  existingRules: boolean;
}

export class XtablesError extends Error {
  override name = "XtablesError";
  constructor(
    message: string,
    readonly command: string,
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(message);
  }
}

export interface Xtables {
  detect(ipv6: boolean): Promise<IptablesVersion>;
  /** Runs a command; throws XtablesError when it fails. */
  run(cmd: XtablesCmd, ver: IptablesVersion, args: readonly string[], stdin?: string): Promise<string>;
  /** True for real runs: payloads are checked with `iptables-restore --test` before being applied. */
  readonly testsPayloads: boolean;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program (no shell). Rejects only when it cannot be started. */
export type Exec = (cmd: string, args: readonly string[], opts?: { stdin?: string }) => Promise<ExecResult>;

export function commandName(ver: IptablesVersion, cmd: XtablesCmd): string {
  return cmd === "iptables" ? ver.binary : cmd === "save" ? ver.saveBinary : ver.restoreBinary;
}

/** Istio's DependenciesStub: records every command line and every stdin line; outputs are empty. */
export class DryRunXtables implements Xtables {
  readonly transcript: string[] = [];
  readonly testsPayloads = false;
  constructor(private readonly onRecord?: (lines: readonly string[]) => void) {}

  async detect(ipv6: boolean): Promise<IptablesVersion> {
    const b = ipv6 ? "ip6tables" : "iptables";
    return { binary: b, saveBinary: `${b}-save`, restoreBinary: `${b}-restore`, version: [0, 0, 0], legacy: false, existingRules: false };
  }

  async run(cmd: XtablesCmd, ver: IptablesVersion, args: readonly string[], stdin?: string): Promise<string> {
    if (stdin !== undefined) {
      // bufio.Scanner lines: split on \n, drop a trailing \r, no final empty line.
      const lines = stdin.split("\n");
      if (lines[lines.length - 1] === "") lines.pop();
      this.transcript.push(...lines.map((l) => l.replace(/\r$/, "")));
    } else {
      this.transcript.push([commandName(ver, cmd), ...args].join(" "));
    }
    this.onRecord?.(this.transcript);
    return "";
  }
}

/** Legacy iptables >= 1.6.2 takes the xtables lock; nft needs none. */
export function needsLock(ver: IptablesVersion): boolean {
  return ver.legacy && compareVersion(ver.version, [1, 6, 2]) >= 0;
}

export function compareVersion(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

const EXIT_TYPES: Record<number, string> = {
  1: "xtables other problem",
  2: "xtables parameter problem",
  3: "xtables version problem",
  4: "xtables resource problem",
};

/** Istio's transformToXTablesErrorMessage: name the xtables exit type and keep the hint after `prog: `. */
export function xtablesErrorMessage(stderr: string, code: number): string {
  const type = EXIT_TYPES[code];
  if (!type) return stderr.trim() || `exit status ${code}`;
  const colon = stderr.indexOf(":");
  return `${type}: ${(colon >= 0 ? stderr.slice(colon + 1) : stderr).trim()}`;
}

export interface RealXtablesOptions {
  exec: Exec;
  /** FORCE_IPTABLES_BINARY: "", "legacy" or "nft". */
  forceBinary: string;
  /** Seconds passed as --wait to writes of legacy iptables (Istio: 30). */
  lockWaitSeconds?: number;
  debug?: (msg: string) => void;
}

/**
 * Whether a save dump holds rules. Istio counts >= 3 lines, which also matches the empty built-in
 * chains that its own detection probe leaves behind in the legacy nat table, so a second run would
 * switch to legacy; counting rule lines keeps re-runs on the backend that holds the rules.
 */
export function hasRules(save: string): boolean {
  return /^-A /m.test(save);
}

/** Probe that needs kernel support of the nat table; 255 is an unused protocol, so it never matches. */
const PROBE_RULE = ["-t", "nat", "-A", "INPUT", "-p", "255", "-j", "RETURN"];

export class RealXtables implements Xtables {
  readonly testsPayloads = true;
  constructor(private readonly opts: RealXtablesOptions) {}

  /** Istio's detection: legacy when it works and has rules, else nft, else the plain binary. */
  async detect(ipv6: boolean): Promise<IptablesVersion> {
    const p = ipv6 ? "ip6tables" : "iptables";
    const force = this.opts.forceBinary;
    if (force === "legacy" || force === "nft") return this.probe(`${p}-${force}`);
    if (force !== "") throw new XtablesError(`iptables binary "${force}" unsupported (want legacy or nft)`, p, 1, "");
    const errors: string[] = [];
    try {
      const legacy = await this.probe(`${p}-legacy`);
      if (legacy.existingRules) return legacy;
    } catch (e) {
      errors.push(errorMessage(e));
    }
    try {
      return await this.probe(`${p}-nft`);
    } catch (e) {
      errors.push(errorMessage(e));
    }
    try {
      return await this.probe(p);
    } catch (e) {
      errors.push(errorMessage(e));
      throw new XtablesError(`no usable ${p} binary found: ${errors.join("; ")}`, p, 1, "");
    }
  }

  private async probe(bin: string): Promise<IptablesVersion> {
    const { exec } = this.opts;
    const save = `${bin}-save`;
    const dump = await exec(save, []).catch((e: unknown) => ({ code: 127, stdout: "", stderr: errorMessage(e) }));
    if (dump.code !== 0)
      throw new XtablesError(`failed to execute ${save}: ${(dump.stderr || dump.stdout).trim() || `exit status ${dump.code}`}`, save, dump.code, dump.stderr);
    const verOut = await exec(save, ["--version"]).catch(() => ({ code: 1, stdout: "", stderr: "" }));
    let version = [0, 0, 0];
    let legacy = true;
    if (verOut.code === 0 && !verOut.stderr.includes("unrecognized option")) {
      const m = /v(\d+(?:\.\d+)+)/.exec(verOut.stdout);
      if (!m) throw new XtablesError(`iptables version ${JSON.stringify(verOut.stdout)} is not a valid version string`, save, 1, "");
      version = m[1]!.split(".").map(Number);
      legacy = !verOut.stdout.includes("nf_tables");
    }
    const ver: IptablesVersion = { binary: bin, saveBinary: save, restoreBinary: `${bin}-restore`, version, legacy, existingRules: hasRules(dump.stdout) };
    const wait = needsLock(ver) ? [`--wait=${this.opts.lockWaitSeconds ?? 30}`] : [];
    const add = await exec(bin, [...PROBE_RULE, ...wait]).catch((e: unknown) => ({ code: 127, stdout: "", stderr: errorMessage(e) }));
    if (add.code !== 0 || add.stderr.includes("does not exist")) {
      throw new XtablesError(`iptables binary ${bin} has no loaded kernel support and cannot be used: ${add.stderr.trim()}`, bin, add.code, add.stderr);
    }
    const del = [...PROBE_RULE, ...wait];
    del[2] = "-D";
    await exec(bin, del).catch(() => undefined);
    this.opts.debug?.(`detected ${bin} v${version.join(".")} (${legacy ? "legacy" : "nf_tables"}), existing rules: ${ver.existingRules}`);
    return ver;
  }

  async run(cmd: XtablesCmd, ver: IptablesVersion, args: readonly string[], stdin?: string): Promise<string> {
    const bin = commandName(ver, cmd);
    const full = cmd !== "save" && needsLock(ver) ? [...args, `--wait=${this.opts.lockWaitSeconds ?? 30}`] : [...args];
    this.opts.debug?.(`running ${bin} ${full.join(" ")}`);
    const r = await this.opts.exec(bin, full, stdin !== undefined ? { stdin } : {}).catch((e: unknown) => ({ code: 127, stdout: "", stderr: errorMessage(e) }));
    if (r.code !== 0) {
      throw new XtablesError(`${bin} ${full.join(" ")}: ${xtablesErrorMessage(r.stderr, r.code)}`, bin, r.code, r.stderr);
    }
    return r.stdout;
  }
}

/** Cap on what a command may print (stdout and stderr each): a ruleset dump of a pod is far smaller. */
export const MAX_COMMAND_OUTPUT_BYTES = 32 * 1024 * 1024;

/** Reads a stream as text; rejects (after calling `onOverflow`) once it passes `max` bytes. */
export async function readCapped(stream: ReadableStream<Uint8Array>, max: number, what: string, onOverflow: () => void): Promise<string> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += chunk.byteLength;
    if (total > max) {
      onOverflow();
      throw new Error(`${what} printed more than ${max} bytes`);
    }
    chunks.push(chunk);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** The real `Exec`: Bun.spawn, no shell, stdin written then closed, output capped. */
export const spawnExec: Exec = async (cmd, args, opts = {}) => {
  const proc = Bun.spawn([cmd, ...args], {
    stdin: opts.stdin !== undefined ? new TextEncoder().encode(opts.stdin) : "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const kill = () => proc.kill();
  const [stdout, stderr, code] = await Promise.all([
    readCapped(proc.stdout, MAX_COMMAND_OUTPUT_BYTES, cmd, kill),
    readCapped(proc.stderr, MAX_COMMAND_OUTPUT_BYTES, cmd, kill),
    proc.exited,
  ]);
  return { code, stdout, stderr };
};
