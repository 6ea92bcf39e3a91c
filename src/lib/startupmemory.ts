// Start-up code handed back once the agent has settled (issue 29). Most of a settled agent's
// JavaScript heap is code: every function of the start path (config layering, the bootstrap's
// template engine, certificate warming) keeps its compiled bytecode and JIT code after it has run
// once and never runs again. JavaScriptCore drops all of it on request (VM::shrinkFootprintWhenIdle,
// Bun.shrink(): delete all code, then a full collection); what runs later is compiled again from
// the binary's bytecode cache on its next call. So once the start is over the agent releases that
// code once, then (on the next turn, once JavaScriptCore has done it) has the allocator return the
// freed pages (Bun.gc(true)): 1.8 MiB of private memory per sidecar (docs/memory.md). The start is
// over when readiness has been clear (no blocker and no warning: Envoy ready, certificate warmed,
// upstream connected) for QUIET_MS; or when nothing has changed in it for STILL_MS, as in a
// proxyless pod whose application has not connected yet ("xds connected" stays pending) or while a
// CA does not answer; at the latest MAX_WAIT_MS after the start path.

import type { Clock, TimerHandle } from "./clock.ts";
import type { Logger } from "./log.ts";
import type { Readiness } from "./readiness.ts";

/** Readiness must have been clear this long: the start's follow-up work (first pushes, SDS) is over. */
export const QUIET_MS = 5000;
/** Readiness not clear but unchanged this long: nothing is starting any more. */
export const STILL_MS = 20_000;
/** The release runs this long after the start path whatever readiness says (conditions that keep changing). */
export const MAX_WAIT_MS = 60_000;

export interface StartupMemoryOptions {
  readiness: Pick<Readiness, "onChange" | "blockers" | "warnings">;
  clock: Pick<Clock, "timer">;
  /** Drops compiled code and runs a full collection (Bun.shrink): JavaScriptCore does it once no JavaScript is on the stack. */
  shrink: () => void;
  /** A full collection that also has the allocator return free pages (Bun.gc(true)): run on the next turn, after the shrink. */
  collect: () => void;
  /** Resident set size in bytes, for the log line; 0 when unreadable. */
  rss: () => number;
  /** Milliseconds, for the log line's duration. */
  now: () => number;
  log: Logger;
}

const mib = (b: number) => (b / 1048576).toFixed(1);

/** Runs the release once: QUIET_MS after readiness last became clear, STILL_MS after its last change, or MAX_WAIT_MS after start. */
export class StartupMemory {
  private quiet?: TimerHandle;
  private deadline?: TimerHandle;
  private done = false;

  constructor(private readonly o: StartupMemoryOptions) {}

  /** Call once the start path is over; `signal` (the agent stopping) cancels a release not yet run. */
  start(signal: AbortSignal): void {
    if (signal.aborted) return;
    signal.addEventListener("abort", () => this.cancel(), { once: true });
    this.deadline = this.o.clock.timer(MAX_WAIT_MS, () => this.run());
    this.o.readiness.onChange(() => this.check());
    this.check();
  }

  /** Whether the release has run (tests, the operator's view). */
  get released(): boolean {
    return this.done;
  }

  private clear(): boolean {
    return this.o.readiness.blockers().length === 0 && this.o.readiness.warnings().length === 0;
  }

  private check(): void {
    if (this.done) return;
    this.quiet?.cancel();
    this.quiet = this.o.clock.timer(this.clear() ? QUIET_MS : STILL_MS, () => this.run());
  }

  private run(): void {
    if (this.done) return;
    this.cancel();
    this.done = true;
    const before = this.o.rss();
    const t0 = this.o.now();
    this.o.shrink();
    this.o.clock.timer(0, () => {
      this.o.collect();
      this.o.log.debug(`start-up code released in ${(this.o.now() - t0).toFixed(1)} ms: resident ${mib(before)} -> ${mib(this.o.rss())} MiB`);
    });
  }

  private cancel(): void {
    this.quiet?.cancel();
    this.deadline?.cancel();
    this.quiet = this.deadline = undefined;
    this.done = true;
  }
}
