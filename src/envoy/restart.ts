// The restart policy. `never` (default) is Istio's behaviour: Envoy's exit is logged and the agent
// exits 0, so kubelet restarts the container and counts it. `on-failure` (opt-in, beyond Istio)
// restarts a crashed Envoy in-process with exponential backoff up to a budget of restarts within a
// sliding window, then gives up with Envoy's exit code.
// Pure: the caller passes the times of earlier restarts and the current time.

import { formatGoDuration } from "../lib/duration.ts";

export interface RestartPolicy {
  /** `never` (default: Istio's behaviour) or `on-failure` (opt-in). */
  mode: "on-failure" | "never";
  /** ENVOY_RESTART_BACKOFF_BASE: the first delay, doubled per restart in the window. */
  baseMs: number;
  /** ENVOY_RESTART_BACKOFF_MAX. */
  maxMs: number;
  /** ENVOY_RESTART_BUDGET: restarts allowed within the window. */
  budget: number;
  /** ENVOY_RESTART_WINDOW. */
  windowMs: number;
}

export type RestartDecision = { restart: true; delayMs: number; attempt: number; history: number[] } | { restart: false; reason: string; history: number[] };

/** Parse ENVOY_RESTART_POLICY; an unknown value yields the default (never) plus a problem naming it. */
export function parseRestartMode(raw: string): { mode: RestartPolicy["mode"]; problem?: string } {
  const v = raw.trim().toLowerCase();
  if (v === "on-failure" || v === "onfailure") return { mode: "on-failure" };
  if (v === "" || v === "never" || v === "no") return { mode: "never" };
  return { mode: "never", problem: `ENVOY_RESTART_POLICY="${raw}" is not one of never, on-failure; using never (Istio's behaviour)` };
}

/**
 * Decide what to do after Envoy exited abnormally at `now`, given the times of earlier restarts.
 * The delay is base * 2^(restarts still inside the window), capped at max.
 */
export function decideRestart(p: RestartPolicy, history: readonly number[], now: number): RestartDecision {
  const recent = history.filter((t) => now - t < p.windowMs);
  if (p.mode === "never") return { restart: false, reason: "ENVOY_RESTART_POLICY=never", history: recent };
  if (recent.length >= p.budget) {
    return {
      restart: false,
      reason: `restart budget exhausted: ${recent.length} restarts within ${formatGoDuration(p.windowMs)} (ENVOY_RESTART_BUDGET=${p.budget})`,
      history: recent,
    };
  }
  const delayMs = Math.min(p.maxMs, p.baseMs * 2 ** recent.length);
  return { restart: true, delayMs, attempt: recent.length + 1, history: [...recent, now] };
}
