// The Envoy pid file: `<configPath>/envoy.pid` holds "<pid> <start time> <binary>" of the Envoy this
// agent runs. An agent killed outright (SIGKILL, OOM) cannot stop its Envoy; the next agent finds
// the file at start and stops that Envoy before starting its own, so two never run side by side
// fighting over ports. The start time (field 22 of /proc/<pid>/stat) and the command line guard
// against a pid reused by an unrelated process: only the very process recorded is signalled.

import { readFileSync, rmSync } from "node:fs";
import { atomicWriteFileSync } from "../lib/atomicwrite.ts";
import { readBoundedTextSync } from "../lib/boundedfile.ts";
import type { Logger } from "../lib/log.ts";
import { SHUTDOWN_BUDGET_MS } from "../lib/drain.ts";
import { parseProcStat } from "./reaper.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export interface EnvoyPidFileDeps {
  log: Logger;
  procRoot?: string;
  /** Send a signal; false when the process is gone. */
  kill(pid: number, signal: "SIGTERM" | "SIGKILL"): boolean;
  sleep(ms: number): Promise<void>;
  /** How long a stale Envoy gets after SIGTERM before SIGKILL. */
  graceMs?: number;
}

interface Recorded {
  pid: number;
  startTime: string;
  binary: string;
}

export class EnvoyPidFile {
  constructor(
    readonly path: string,
    private readonly deps: EnvoyPidFileDeps,
  ) {}

  /** Record the Envoy just started (best effort: a failure is logged, Envoy keeps running). */
  record(pid: number, binary: string): void {
    const startTime = this.startTimeOf(pid);
    if (startTime === undefined) return;
    try {
      atomicWriteFileSync(this.path, `${pid} ${startTime} ${binary}\n`, 0o644);
    } catch (e) {
      this.deps.log.warn(`cannot record Envoy's pid in ${this.path}: ${errorMessage(e)}`, ids({ path: this.path }));
    }
  }

  clear(): void {
    rmSync(this.path, { force: true });
  }

  /** Stop the Envoy an earlier run of the agent left behind, if it is still running. Returns its pid. */
  async stopStale(): Promise<number | undefined> {
    const rec = this.read();
    this.clear();
    if (!rec || !this.isSameProcess(rec)) return undefined;
    const { log, kill, sleep } = this.deps;
    log.warn(`stopping Envoy (pid ${rec.pid}) left running by an earlier run of the agent (${this.path})`, ids({ pid: rec.pid, path: this.path }));
    kill(rec.pid, "SIGTERM");
    const deadline = this.deps.graceMs ?? SHUTDOWN_BUDGET_MS;
    for (let waited = 0; waited < deadline; waited += 50) {
      if (!this.isSameProcess(rec)) return rec.pid;
      await sleep(50);
    }
    log.warn(`Envoy (pid ${rec.pid}) ignored SIGTERM for ${deadline} ms; sending SIGKILL`, ids({ pid: rec.pid }));
    kill(rec.pid, "SIGKILL");
    for (let waited = 0; waited < 2000 && this.isSameProcess(rec); waited += 50) await sleep(50);
    return rec.pid;
  }

  private read(): Recorded | undefined {
    let text: string;
    try {
      text = readBoundedTextSync(this.path, 4096);
    } catch {
      return undefined;
    }
    const m = /^(\d+) (\d+) (.+)\n?$/.exec(text);
    if (!m) {
      this.deps.log.warn(`ignoring ${this.path}: not "<pid> <start time> <binary>"`, ids({ path: this.path }));
      return undefined;
    }
    return { pid: Number(m[1]), startTime: m[2]!, binary: m[3]! };
  }

  private startTimeOf(pid: number): string | undefined {
    try {
      const e = parseProcStat(readFileSync(`${this.deps.procRoot ?? "/proc"}/${pid}/stat`, "utf8"));
      // A zombie is already dead: nothing to stop.
      return e && e.state !== "Z" ? e.startTime : undefined;
    } catch {
      return undefined;
    }
  }

  private isSameProcess(rec: Recorded): boolean {
    if (this.startTimeOf(rec.pid) !== rec.startTime) return false;
    try {
      // argv[0] is the binary; for a script it is the interpreter, with the script right after.
      const argv = readFileSync(`${this.deps.procRoot ?? "/proc"}/${rec.pid}/cmdline`, "utf8").split("\0");
      return argv.slice(0, 3).includes(rec.binary);
    } catch {
      return false;
    }
  }
}
