// The wait between drain_listeners and stopping Envoy (Istio: pkg/envoy/agent.go `terminate`):
// either terminationDrainDuration, or, with EXIT_ON_ZERO_ACTIVE_CONNECTIONS, MINIMUM_DRAIN_DURATION
// followed by polling downstream_cx_active every interval until it reaches 0, the stats are empty
// (-1), more than `maxPollErrors` consecutive polls fail, or (beyond Istio, whose polling has no
// bound, istio#44690) the plan's pollDeadlineMs after the shutdown began passes, so Envoy is
// stopped before kubelet's SIGKILL. The signal ends the wait early (Envoy exited, or a second
// SIGTERM). Resolves with why the wait ended, for the transition log.

import { systemClock } from "../lib/clock.ts";
import { formatGoDuration } from "../lib/duration.ts";
import type { Logger } from "../lib/log.ts";
import type { EnvoyAdmin } from "./admin.ts";
import { countActiveConnections, type DrainPlan } from "./drainplan.ts";
import { errorMessage } from "../lib/errors.ts";

export interface DrainWaitDeps {
  admin: EnvoyAdmin;
  knownListeners: ReadonlySet<string>;
  log: Logger;
  /** Waits `ms` unless `signal` aborts (false); tests pass a manual one. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<boolean>;
  /** The clock the poll deadline is measured on, and when the shutdown began on it. */
  now?: () => number;
  startedAt?: number;
}

const CANCELLED = "drain wait cancelled";

export async function waitForDrain(plan: DrainPlan, deps: DrainWaitDeps, signal: AbortSignal): Promise<string> {
  const { log } = deps;
  const sleep = deps.sleep ?? systemClock.sleep;
  const now = deps.now ?? systemClock.now;
  const startedAt = deps.startedAt ?? now();
  if (signal.aborted) return CANCELLED;
  if (plan.mode === "wait") {
    log.info(`Graceful termination period is ${formatGoDuration(plan.terminationDrainMs)}, starting...`);
    return (await sleep(plan.terminationDrainMs, signal)) ? "graceful termination period complete" : CANCELLED;
  }
  log.info(`Agent draining proxy for ${formatGoDuration(plan.minimumDrainMs)}, then waiting for active connections to terminate...`);
  if (!(await sleep(plan.minimumDrainMs, signal))) return CANCELLED;
  log.info("Checking for active connections...");
  let errors = 0;
  let last = -1;
  while (await sleep(plan.pollIntervalMs, signal)) {
    if (plan.pollDeadlineMs !== undefined && now() - startedAt >= plan.pollDeadlineMs) {
      const open = last > 0 ? `${last} connections still active` : "connections still active";
      log.warn(`Stopping Envoy with ${open}: the pod's termination grace period leaves only the stop budget`);
      return `pod's termination grace period nearly over (${open})`;
    }
    let stats: string;
    try {
      stats = await deps.admin.stats("downstream_cx_active$", plan.pollTimeoutMs);
    } catch (err) {
      errors++;
      log.error(`unable to get listener stats from Envoy: ${errorMessage(err)}`);
      if (errors > plan.maxPollErrors) return `error while obtaining downstream_cx_active stat (max retry ${errors} exceeded)`;
      log.warn(`Retrying (${errors} attempt) to obtain active connections...`);
      continue;
    }
    if (signal.aborted) break;
    const { count, problems } = countActiveConnections(stats, deps.knownListeners);
    for (const p of problems) log.warn(p);
    if (count === -1) return "downstream_cx_active not available (no connections yet or stats disabled)";
    if (count === 0) return "no more active connections";
    log.info(`There are still ${count} active connections`);
    last = count;
    errors = 0;
  }
  return CANCELLED;
}
