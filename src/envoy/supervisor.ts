// EnvoySupervisor: the agent as Envoy's guardian. Starts Envoy, watches it, restarts it when it
// dies abnormally (policy permitting), drains and stops it on shutdown, serves /quitquitquit and
// /drain through LifecycleControl, and optionally hot-restarts it (new epoch) when watched files
// change. The lifecycle is the state machine in state.ts; every transition is logged here.

import { rmSync } from "node:fs";
import { FailureReport, type Component } from "../lib/component.ts";
import { systemClock, type Clock } from "../lib/clock.ts";
import type { LifecycleControl } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import { READINESS, type Blocker, type Readiness } from "../lib/readiness.ts";
import type { EnvoyAdmin } from "./admin.ts";
import { argsForLog, envoyArgs, type EnvoyArgsOptions } from "./args.ts";
import { describeDrainPlan, drainPlanWarning, type DrainPlan } from "./drainplan.ts";
import { waitForDrain } from "./drain.ts";
import { EnvoyError } from "./errors.ts";
import { FileChangeWatcher } from "./filewatch.ts";
import type { EnvoyPidFile } from "./pidfile.ts";
import { bunLauncher, describeExit, exitCodeOf, goExitError, type EnvoyProcess, type ExitStatus, type Launcher } from "./process.ts";
import { ChildReaper, type ChildReaperOptions } from "./reaper.ts";
import { decideRestart, type RestartPolicy } from "./restart.ts";
import { describeEvent, isLive, transition, type SupervisorEvent, type SupervisorState } from "./state.ts";
import { formatGoDuration } from "../lib/duration.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export interface EnvoySupervisorOptions {
  log: Logger;
  readiness: Readiness;
  binaryPath: string;
  /** Everything `envoyArgs` needs except the hot-restart epoch. */
  args: Omit<EnvoyArgsOptions, "hotRestart">;
  env: Record<string, string>;
  runAs?: { uid: number; gid: number };
  admin: EnvoyAdmin;
  drainPlan: DrainPlan;
  /** Istio's own listeners, excluded from the active connection count. */
  knownListeners: ReadonlySet<string>;
  restart: RestartPolicy;
  /** ENVOY_HOT_RESTART: files whose change starts a new epoch. */
  hotRestart?: { watchFiles: readonly string[]; pollIntervalMs?: number; parentShutdownS: number };
  /** Removed when the supervisor ends (envoy-rev.json; never a custom config file). */
  cleanupFiles?: readonly string[];
  /** Reap orphaned zombies (the agent is PID 1). */
  reaper?: Omit<ChildReaperOptions, "log" | "isOwnChild">;
  launcher?: Launcher;
  /** Records the running Envoy; at start, an Envoy left by an earlier run of the agent is stopped. */
  pidFile?: EnvoyPidFile;
  /** Restart history and timed waits (drain, restart backoff, stop grace); tests pass a manual one. */
  clock?: Clock;
}

export interface ShutdownOptions {
  /** Skip the drain wait (second SIGTERM/SIGINT); when already stopping, SIGKILL Envoy now. */
  immediate?: boolean;
}

interface Epoch {
  epoch: number;
  proc: EnvoyProcess;
  /** Resolves when the exit has been processed. */
  done: Promise<void>;
}

export class EnvoySupervisor implements Component, LifecycleControl {
  readonly name = "envoy";
  /** The agent's exit code, once Envoy and everything the supervisor started has ended. */
  readonly exited: Promise<number>;
  private readonly failure = new FailureReport();
  /** Envoy ended on its own (not asked to stop, not restarted): the agent's end, as Istio's. */
  readonly failed = this.failure.failed;

  private stateNow: SupervisorState = "idle";
  private readonly alive = new Map<number, Epoch>();
  private newestEpoch = -1;
  private newestStatus: ExitStatus | undefined;
  private restartHistory: number[] = [];
  /** Restarts scheduled since start (ENVOY_RESTART_POLICY=on-failure). */
  private restartCount = 0;
  private skipDrain = false;
  private terminating: Blocker | undefined;
  private restartBlocker: Blocker | undefined;
  private backoff: AbortController | undefined;
  private drainWait: AbortController | undefined;
  private readonly background = new AbortController();
  private hotRestartChain: Promise<void> = Promise.resolve();
  private resolveExited!: (code: number) => void;
  private readonly launcher: Launcher;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(private readonly opts: EnvoySupervisorOptions) {
    this.exited = new Promise((r) => (this.resolveExited = r));
    this.launcher = opts.launcher ?? bunLauncher;
    this.clock = opts.clock ?? systemClock;
    this.log = opts.log;
  }

  get state(): SupervisorState {
    return this.stateNow;
  }

  /** Pids of the live Envoy epochs, oldest first. */
  get pids(): number[] {
    return [...this.alive.values()].map((e) => e.proc.pid);
  }

  /** Read-only view for the operator (/debug/config_dump). */
  snapshot(): { state: SupervisorState; pids: number[]; epoch: number; restarts: number; restartPolicy: string; lastExit?: string; drainPlan: DrainPlan } {
    const st = this.newestStatus;
    return {
      state: this.stateNow,
      pids: this.pids,
      epoch: this.newestEpoch,
      restarts: this.restartCount,
      restartPolicy: this.opts.restart.mode,
      ...(st ? { lastExit: st.signal !== null ? `signal ${st.signal}` : `exit code ${st.code}` } : {}),
      drainPlan: { ...this.opts.drainPlan },
    };
  }

  /** True for an Envoy process this supervisor spawned and that Bun still waits for. */
  ownsPid(pid: number): boolean {
    for (const e of this.alive.values()) if (e.proc.pid === pid) return true;
    return false;
  }

  async start(signal: AbortSignal): Promise<void> {
    if (this.stateNow !== "idle") throw new EnvoyError(`envoy supervisor already started (state ${this.stateNow})`, "start");
    const o = this.opts;
    this.log.info(describeDrainPlan(o.drainPlan));
    const tooLong = drainPlanWarning(o.drainPlan);
    if (tooLong) this.log.warn(tooLong);
    const r = o.restart;
    this.log.info(
      r.mode === "never"
        ? "restart policy: never (the agent exits when Envoy exits, as Istio's; ENVOY_RESTART_POLICY=on-failure restarts it in-process)"
        : `restart policy: on-failure, backoff ${formatGoDuration(r.baseMs)} doubling to ${formatGoDuration(r.maxMs)}, at most ${r.budget} restarts within ${formatGoDuration(r.windowMs)}`,
    );
    if (o.reaper) {
      new ChildReaper({ ...o.reaper, log: this.log, isOwnChild: (pid) => this.ownsPid(pid) }).start(this.background.signal);
    }
    await o.pidFile?.stopStale();
    this.fire({ type: "start" });
    if ((this.stateNow as SupervisorState) === "exited") {
      throw new EnvoyError(`Envoy did not start: ${this.startError ?? "unknown error"}`, "spawn");
    }
    if (o.hotRestart && o.hotRestart.watchFiles.length > 0) {
      const watcher = new FileChangeWatcher({
        files: o.hotRestart.watchFiles,
        intervalMs: o.hotRestart.pollIntervalMs ?? 1000,
        onChange: (changed) => this.onFilesChanged(changed),
      });
      await watcher.start(this.background.signal);
      this.log.info(`hot restart enabled: a change to ${o.hotRestart.watchFiles.join(", ")} starts a new Envoy epoch`);
    }
    if (signal.aborted) void this.shutdown();
    else signal.addEventListener("abort", () => void this.shutdown(), { once: true });
  }

  stopped(): Promise<void> {
    return this.exited.then(() => undefined);
  }

  /**
   * Graceful shutdown (first SIGTERM/SIGINT): readiness `terminating`, drain_listeners, wait per
   * the drain plan, SIGTERM Envoy, SIGKILL after the grace. `immediate` (second signal) skips the
   * wait. Resolves once Envoy is gone and the bootstrap file removed.
   */
  async shutdown(opts: ShutdownOptions = {}): Promise<void> {
    const immediate = opts.immediate ?? false;
    if (immediate && this.stateNow === "stopping") {
      this.log.warn("second shutdown request while stopping: killing Envoy now");
      this.killAll("SIGKILL");
    } else {
      this.fire({ type: "shutdown", immediate, skipDrain: this.skipDrain });
    }
    await this.exited;
  }

  /** POST /quitquitquit: exit now, without draining. */
  quit(): void {
    this.log.info("quit requested: stopping Envoy without draining");
    this.skipDrain = true;
    this.fire({ type: "quit" });
  }

  /** POST /drain: drain_listeners with skip_exit; a later shutdown stops Envoy without waiting. */
  async drain(): Promise<void> {
    this.skipDrain = true;
    if (!this.fire({ type: "drain" })) return;
    try {
      await this.opts.admin.drainListeners(this.opts.drainPlan.inboundOnly, true);
      this.log.info("Envoy listeners draining (skip_exit); a later SIGTERM stops Envoy immediately");
    } catch (err) {
      this.log.warn(`Error in invoking drain listeners endpoint: ${errorMessage(err)}`);
    }
  }

  // ---- state machine -------------------------------------------------------------------------

  private startError: string | undefined;
  private exitCode = 0;

  /** Apply an event; returns whether it was accepted. */
  private fire(ev: SupervisorEvent): boolean {
    const from = this.stateNow;
    const t = transition(from, ev);
    if (!t.ok) {
      this.log.debug(`envoy: ignored ${ev.type} in state ${from}: ${t.why}`);
      return false;
    }
    if (t.to === from) {
      this.log.debug(`envoy: ${from} (${describeEvent(ev)})`);
      return true;
    }
    this.log.info(`envoy: ${from} -> ${t.to} (${describeEvent(ev)})`);
    this.stateNow = t.to;
    this.enter(t.to);
    return true;
  }

  private enter(s: SupervisorState): void {
    switch (s) {
      case "starting":
        this.spawnEpoch(this.opts.hotRestart ? this.newestEpoch + 1 : 0);
        return;
      case "running":
        this.restartBlocker?.clear();
        return;
      case "restarting":
        return;
      case "drained":
        // POST /drain keeps readiness as is, as Istio's DrainNow: only the shutdown that follows
        // (SIGTERM) makes the agent unready.
        return;
      case "draining":
        this.markTerminating();
        void this.runDrain();
        return;
      case "stopping":
        this.markTerminating();
        this.backoff?.abort();
        this.drainWait?.abort();
        void this.stopAll();
        return;
      case "exited":
        this.finish();
        return;
      case "idle":
        return;
    }
  }

  private markTerminating(): void {
    this.terminating ??= this.opts.readiness.block(READINESS.terminating);
  }

  // ---- processes -----------------------------------------------------------------------------

  private spawnEpoch(epoch: number): void {
    if (this.alive.size === 0) epoch = 0; // a new epoch needs a live parent; after a crash start over
    const hot = this.opts.hotRestart;
    const args = envoyArgs({ ...this.opts.args, ...(hot ? { hotRestart: { epoch, parentShutdownS: hot.parentShutdownS } } : {}) });
    this.log.info(`Envoy command: [${argsForLog(args).join(" ")}]`);
    let proc: EnvoyProcess;
    try {
      proc = this.launcher({ binary: this.opts.binaryPath, args, env: this.opts.env, ...(this.opts.runAs ?? {}) });
    } catch (err) {
      const msg = errorMessage(err);
      this.log.error(msg);
      this.startError = msg;
      this.onSpawnFailed();
      return;
    }
    this.newestEpoch = epoch;
    this.newestStatus = undefined;
    const entry: Epoch = { epoch, proc, done: Promise.resolve() };
    entry.done = proc.exited.then((st) => this.onExit(entry, st));
    this.alive.set(epoch, entry);
    this.opts.pidFile?.record(proc.pid, this.opts.binaryPath);
    this.fire({ type: "spawned", epoch, pid: proc.pid });
  }

  private onSpawnFailed(): void {
    if (this.alive.size > 0) return; // a hot restart failed; the running epoch keeps serving
    // No process came up: account it like a failed process (first start: no restart).
    const first = this.restartHistory.length === 0 && this.newestEpoch < 0;
    const decision = first ? undefined : decideRestart(this.opts.restart, this.restartHistory, this.clock.now());
    if (decision?.restart) {
      this.restartHistory = decision.history;
      this.fire({ type: "exited", epoch: 0, last: true, restart: true, status: "spawn failed" });
      this.scheduleRestart(decision.delayMs, decision.attempt);
      return;
    }
    this.exitCode = 1;
    this.fire({ type: "exited", epoch: 0, last: true, restart: false, status: "spawn failed" });
  }

  private onExit(entry: Epoch, st: ExitStatus): void {
    this.alive.delete(entry.epoch);
    const what = this.opts.hotRestart ? `Envoy epoch ${entry.epoch} (pid ${entry.proc.pid})` : `Envoy (pid ${entry.proc.pid})`;
    const stopping = this.stateNow === "draining" || this.stateNow === "stopping";
    if (st.signal === "SIGKILL" && !this.sigkilled.has(entry.proc.pid)) {
      this.log.warn(`${what} was killed by SIGKILL: possibly OOM-killed; check memory usage and limits`, ids({ pid: entry.proc.pid }));
    } else if (st.signal !== null) {
      this.log[stopping ? "info" : "warn"](`${what} was killed by signal ${st.signal}`, ids({ pid: entry.proc.pid }));
    } else if (st.code === 0) {
      this.log.info(`${what} exited normally`, ids({ pid: entry.proc.pid }));
    } else {
      this.log[stopping ? "warn" : "error"](`${what} exited with ${describeExit(st)}`, ids({ pid: entry.proc.pid }));
    }
    if (entry.epoch === this.newestEpoch) this.newestStatus = st;
    const last = this.alive.size === 0;
    const abnormal = st.signal !== null || st.code !== 0;
    if (!last) {
      if (entry.epoch === this.newestEpoch && abnormal && !stopping) {
        this.log.warn(`newest Envoy epoch failed; stopping the older epochs before starting over`);
        void this.stopAll();
      }
      this.fire({ type: "exited", epoch: entry.epoch, last, restart: false, status: describeExit(st) });
      return;
    }
    const decisive = this.newestStatus ?? st;
    const failed = decisive.signal !== null || decisive.code !== 0;
    const never = this.opts.restart.mode === "never";
    if (stopping || !isLive(this.stateNow) || this.stateNow === "drained" || !failed) {
      if (!stopping) this.logExitAsIstio(decisive);
      if (!stopping && this.stateNow !== "drained") this.failure.report(new EnvoyError(`Envoy exited on its own (${describeExit(decisive)})`, "exit"));
      this.exitCode = stopping || never ? 0 : exitCodeOf(decisive);
      this.fire({ type: "exited", epoch: entry.epoch, last, restart: false, status: describeExit(st) });
      return;
    }
    const decision = decideRestart(this.opts.restart, this.restartHistory, this.clock.now());
    this.restartHistory = decision.history;
    if (!decision.restart) {
      if (never) {
        // Istio's agent: log the exit (with its OOM hint) and exit 0; kubelet restarts the container.
        this.logExitAsIstio(decisive);
        this.exitCode = 0;
      } else {
        this.log.error(`not restarting Envoy: ${decision.reason}`);
        this.exitCode = exitCodeOf(decisive);
      }
      this.failure.report(new EnvoyError(`Envoy exited on its own (${describeExit(decisive)})`, "exit"));
      this.fire({ type: "exited", epoch: entry.epoch, last, restart: false, status: describeExit(st) });
      return;
    }
    this.fire({ type: "exited", epoch: entry.epoch, last, restart: true, status: describeExit(st) });
    this.scheduleRestart(decision.delayMs, decision.attempt);
  }

  /** Istio's lines when Envoy ended on its own (pkg/envoy/agent.go Run). */
  private logExitAsIstio(st: ExitStatus): void {
    if (st.signal === null && st.code === 0) {
      this.log.info("Envoy exited normally");
      return;
    }
    if (st.signal === "SIGKILL") this.log.warn("Envoy may have been out of memory killed. Check memory usage and limits.");
    this.log.error(`Envoy exited with error: ${goExitError(st)}`);
  }

  private scheduleRestart(delayMs: number, attempt: number): void {
    this.restartCount++;
    this.restartBlocker ??= this.opts.readiness.block(READINESS.envoyRestarting);
    this.restartBlocker.reblock();
    this.log.info(
      `restarting Envoy in ${formatGoDuration(delayMs)} (restart ${attempt} of ${this.opts.restart.budget} within ${formatGoDuration(this.opts.restart.windowMs)})`,
    );
    const ac = new AbortController();
    this.backoff = ac;
    void this.clock.sleep(delayMs, ac.signal).then((due) => {
      if (due) this.fire({ type: "restart-due" });
    });
  }

  /** Pids the supervisor SIGKILLed itself (not reported as a possible OOM kill). */
  private readonly sigkilled = new Set<number>();

  private kill(e: Epoch, signal: "SIGTERM" | "SIGKILL"): void {
    if (signal === "SIGKILL") this.sigkilled.add(e.proc.pid);
    e.proc.kill(signal);
  }

  private killAll(signal: "SIGTERM" | "SIGKILL"): void {
    for (const e of this.alive.values()) this.kill(e, signal);
  }

  /** SIGTERM every epoch, SIGKILL whatever is left after the grace; resolves when all are gone. */
  private async stopAll(): Promise<void> {
    if (this.alive.size === 0) {
      if (this.stateNow === "stopping") this.fire({ type: "exited", epoch: -1, last: true, restart: false, status: "no Envoy running" });
      return;
    }
    await this.stopEpochs([...this.alive.values()]);
  }

  private async stopEpochs(epochs: Epoch[]): Promise<void> {
    for (const e of epochs) this.kill(e, "SIGTERM");
    const ac = new AbortController();
    const all = Promise.all(epochs.map((e) => e.done));
    const graceOver = this.clock.sleep(this.opts.drainPlan.stopGraceMs, ac.signal);
    const first = await Promise.race([all.then(() => "exited" as const), graceOver.then(() => "grace" as const)]);
    if (first === "grace") {
      const left = epochs.filter((e) => this.alive.has(e.epoch));
      if (left.length > 0) {
        this.log.warn(`Envoy did not exit within ${formatGoDuration(this.opts.drainPlan.stopGraceMs)} of SIGTERM: sending SIGKILL`);
        for (const e of left) this.kill(e, "SIGKILL");
      }
      await all;
    } else {
      ac.abort();
    }
  }

  // ---- drain ---------------------------------------------------------------------------------

  private async runDrain(): Promise<void> {
    const plan = this.opts.drainPlan;
    const startedAt = this.clock.now();
    const ac = new AbortController();
    this.drainWait = ac;
    this.log.info("Agent draining Proxy for termination");
    try {
      await this.opts.admin.drainListeners(plan.inboundOnly, false);
    } catch (err) {
      this.log.warn(`Error in invoking drain listeners endpoint: ${errorMessage(err)}`);
    }
    const why = await waitForDrain(
      plan,
      {
        admin: this.opts.admin,
        knownListeners: this.opts.knownListeners,
        log: this.log,
        sleep: (ms, s) => this.clock.sleep(ms, s),
        now: () => this.clock.now(),
        startedAt,
      },
      ac.signal,
    );
    this.fire({ type: "drain-over", why });
  }

  // ---- hot restart ---------------------------------------------------------------------------

  private onFilesChanged(changed: string[]): void {
    if (this.stateNow !== "running") {
      this.log.info(`ignoring change to ${changed.join(", ")}: Envoy is ${this.stateNow}`);
      return;
    }
    this.hotRestartChain = this.hotRestartChain.then(() => this.hotRestart(changed));
  }

  private async hotRestart(changed: string[]): Promise<void> {
    if (this.stateNow !== "running") return;
    const live = [...this.alive.values()].sort((a, b) => a.epoch - b.epoch);
    if (live.length >= 2) {
      // At most two epochs: retire the oldest before starting the next one.
      this.log.info(`hot restart: stopping epoch ${live[0]!.epoch} first (at most two epochs run at once)`);
      await this.stopEpochs(live.slice(0, live.length - 1));
    }
    if (this.stateNow !== "running" || this.alive.size === 0) return;
    this.log.info(`hot restart: ${changed.join(", ")} changed; starting Envoy epoch ${this.newestEpoch + 1}`);
    this.spawnEpoch(this.newestEpoch + 1);
  }

  // ---- end -----------------------------------------------------------------------------------

  private finish(): void {
    this.backoff?.abort();
    this.drainWait?.abort();
    this.background.abort();
    this.opts.pidFile?.clear();
    for (const f of this.opts.cleanupFiles ?? []) {
      try {
        rmSync(f, { force: true });
      } catch (err) {
        this.log.warn(`Failed to delete config file ${f}: ${errorMessage(err)}`, ids({ path: f }));
      }
    }
    // The agent's own exit code may differ (255 for a start failure): src/cli/proxy.ts logs that one.
    this.log.info(`envoy supervisor done; Envoy exit code ${this.exitCode}`);
    this.resolveExited(this.exitCode);
  }
}
