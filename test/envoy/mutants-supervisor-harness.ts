// An in-process stand-in for everything EnvoySupervisor touches: a scripted launcher whose fake
// Envoy processes exit when the test says (or on a signal), a scripted admin API, a pid-file
// recorder, the manual clock and an in-memory log. No child process, no port, no real sleep: the
// supervisor's state and order logic runs in milliseconds (npm run mutate -- envoy-supervisor).
// Every call the supervisor makes lands in one ordered event list, so tests assert order.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EnvoyAdmin } from "../../src/envoy/admin.ts";
import { knownIstioListeners, resolveDrainPlan, type DrainPlanInput } from "../../src/envoy/drainplan.ts";
import type { EnvoyPidFile } from "../../src/envoy/pidfile.ts";
import type { EnvoyProcess, ExitStatus, LaunchSpec } from "../../src/envoy/process.ts";
import type { RestartPolicy } from "../../src/envoy/restart.ts";
import { EnvoySupervisor, type EnvoySupervisorOptions } from "../../src/envoy/supervisor.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { LogSink } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";

export const BINARY = "/usr/local/bin/envoy";

/** What a fake Envoy does on SIGTERM: exit 0 (Envoy's own handling), die of the signal, or ignore it. */
export type OnTerm = "exit0" | "signal" | "ignore";

export class FakeEnvoy implements EnvoyProcess {
  readonly exited: Promise<ExitStatus>;
  readonly signals: string[] = [];
  private resolve!: (s: ExitStatus) => void;
  private gone = false;

  constructor(
    readonly pid: number,
    readonly spec: LaunchSpec,
    private readonly events: string[],
    public onTerm: OnTerm,
  ) {
    this.exited = new Promise((r) => (this.resolve = r));
  }

  get alive(): boolean {
    return !this.gone;
  }

  /** The epoch from `--restart-epoch N`, or undefined without hot restart. */
  get epoch(): number | undefined {
    const i = this.spec.args.indexOf("--restart-epoch");
    return i < 0 ? undefined : Number(this.spec.args[i + 1]);
  }

  kill(signal: "SIGTERM" | "SIGKILL" | "SIGINT"): void {
    this.signals.push(signal);
    this.events.push(`${signal} ${this.pid}`);
    if (this.gone) return;
    if (signal === "SIGKILL") this.exit({ code: null, signal: "SIGKILL" });
    else if (this.onTerm === "exit0") this.exit({ code: 0, signal: null });
    else if (this.onTerm === "signal") this.exit({ code: null, signal });
  }

  /** End the process (once; later calls are ignored, as a real process dies once). */
  exit(st: ExitStatus): void {
    if (this.gone) return;
    this.gone = true;
    this.events.push(`exit ${this.pid} ${st.signal ?? st.code}`);
    this.resolve(st);
  }

  crash(code = 3): void {
    this.exit({ code, signal: null });
  }
}

export interface FakeOptions {
  restart?: Partial<RestartPolicy>;
  drain?: Partial<DrainPlanInput>;
  /** Spawn attempts that throw, by attempt number (1-based). */
  failSpawns?: number[];
  onTerm?: OnTerm;
  /** Answers of GET /stats, in order; an Error is a failed call. */
  stats?: (string | Error)[];
  drainError?: Error;
  options?: Partial<EnvoySupervisorOptions>;
}

export function fakeSupervisor(o: FakeOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), "envoy-mut-"));
  const bootstrap = join(dir, "envoy-rev.json");
  writeFileSync(bootstrap, "{}");
  const clock = new ManualClock();
  // JSON lines: the structured fields (the pid or path a line names) are asserted too.
  const raw: string[] = [];
  const sink = new LogSink({ outputLevels: "all:debug", json: true, write: (l) => raw.push(l) });
  const readiness = new Readiness(() => clock.now());
  const events: string[] = [];
  const procs: FakeEnvoy[] = [];
  const stats = [...(o.stats ?? [])];
  let attempts = 0;
  const admin: EnvoyAdmin = {
    async drainListeners(inboundOnly, skipExit) {
      events.push(`drain_listeners inboundOnly=${inboundOnly} skipExit=${skipExit}`);
      if (o.drainError) throw o.drainError;
      return "OK";
    },
    async stats(filter) {
      events.push(`stats ${filter}`);
      const s = stats.shift();
      if (s === undefined) throw new Error("test script ran out of stats answers");
      if (s instanceof Error) throw s;
      return s;
    },
    async ready() {
      return { status: 200, body: "LIVE" };
    },
  };
  const pidFile = {
    async stopStale() {
      events.push("pidfile stopStale");
      return undefined;
    },
    record(pid: number, binary: string) {
      events.push(`pidfile record ${pid} ${binary}`);
    },
    clear() {
      events.push("pidfile clear");
    },
  } as unknown as EnvoyPidFile;
  const sup = new EnvoySupervisor({
    log: sink.logger("envoy"),
    readiness,
    binaryPath: BINARY,
    args: {
      bootstrapPath: bootstrap,
      drainDurationMs: 45_000,
      nodeIps: ["10.0.0.1"],
      proxyLogLevel: "warning",
      proxyComponentLogLevel: "misc:error",
      skipDeprecatedLogs: false,
      enableCoreDump: false,
      concurrency: 2,
    },
    env: { FAKE: "1" },
    admin,
    drainPlan: resolveDrainPlan({
      sidecar: true,
      exitOnZeroActiveConnections: false,
      terminationDrainMs: 5000,
      minimumDrainMs: 1000,
      pollIntervalMs: 1000,
      pollTimeoutMs: 2000,
      stopGraceMs: 1500,
      ...o.drain,
    }),
    knownListeners: knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090 }),
    restart: { mode: "on-failure", baseMs: 1000, maxMs: 8000, budget: 3, windowMs: 60_000, ...o.restart },
    cleanupFiles: [bootstrap],
    pidFile,
    clock,
    launcher: (spec) => {
      attempts++;
      if (o.failSpawns?.includes(attempts)) {
        events.push(`spawn failed ${attempts}`);
        throw new Error(`cannot start Envoy binary ${spec.binary}: attempt ${attempts} failed`);
      }
      const p = new FakeEnvoy(1000 + procs.length + 1, spec, events, o.onTerm ?? "exit0");
      procs.push(p);
      events.push(`spawn ${p.pid}`);
      return p;
    },
    ...o.options,
  });
  const records = () => raw.map((l) => JSON.parse(l) as { level: string; msg: string } & Record<string, unknown>);
  /** Log lines as `level message`. */
  const lines = () => records().map((r) => `${r.level} ${r.msg}`);
  return {
    sup,
    clock,
    readiness,
    events,
    procs,
    dir,
    bootstrap,
    lines,
    /** The structured fields of the first line starting with `msg` (without time, level, scope, msg). */
    fields: (msg: string) => {
      const r = records().find((x) => x.msg.startsWith(msg));
      if (!r) return undefined;
      const { time: _t, level: _l, scope: _s, msg: _m, ...rest } = r;
      return rest;
    },
    has: (line: string) => lines().includes(line),
    blockers: () => readiness.blockers().map((b) => b.name),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export type Fake = ReturnType<typeof fakeSupervisor>;

/**
 * A fake supervisor started and running: `keep` receives it first (the test file's slot that its
 * afterEach cleans up, so a failed start is cleaned up too), then its state is checked.
 */
export async function startRunning(o: FakeOptions, keep: (f: Fake) => void): Promise<Fake> {
  const f = fakeSupervisor(o);
  keep(f);
  await f.sup.start(new AbortController().signal);
  if (f.sup.state !== "running") throw new Error(`the fake supervisor is ${f.sup.state} after start(), not running`);
  return f;
}

/** Wait (real time, bounded) for promises to settle until `cond` holds. */
export async function until(cond: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** Whether a promise has settled; call only after a sentinel that comes after it would have. */
export async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}
