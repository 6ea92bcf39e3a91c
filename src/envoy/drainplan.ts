// What happens between SIGTERM and Envoy's exit, resolved once from the configuration and logged
// in one line at start (Istio: pkg/envoy/agent.go `terminate`), and the pure parts of the
// EXIT_ON_ZERO_ACTIVE_CONNECTIONS poller: counting downstream_cx_active from Envoy's /stats text.

import { formatGoDuration } from "../lib/duration.ts";
import { SHUTDOWN_BUDGET_MS } from "../lib/drain.ts";

export interface DrainPlan {
  /** `wait`: sleep terminationDrainDuration; `zero-connections`: min drain, then poll. */
  mode: "wait" | "zero-connections";
  /** drain_listeners query: `inboundonly&graceful` for sidecars, `graceful` otherwise. */
  inboundOnly: boolean;
  /** ProxyConfig.terminationDrainDuration (mode `wait`). */
  terminationDrainMs: number;
  /** MINIMUM_DRAIN_DURATION (mode `zero-connections`). */
  minimumDrainMs: number;
  /** Poll period for downstream_cx_active (Istio: 1s). */
  pollIntervalMs: number;
  /** Per-request timeout of the stats poll (Istio: 2s). */
  pollTimeoutMs: number;
  /** Consecutive poll errors tolerated; one more stops waiting (Istio: 4). */
  maxPollErrors: number;
  /** Grace between SIGTERM and SIGKILL when stopping Envoy. */
  stopGraceMs: number;
  /** After Envoy has exited, how long the other components get to stop (the shutdown budget). */
  componentStopMs: number;
  /** TERMINATION_GRACE_PERIOD_SECONDS in ms; undefined when unknown. */
  terminationGraceMs?: number;
  /**
   * Mode `zero-connections` with a known grace period: the polling ends this long after the
   * shutdown began even with connections still open, leaving the pod's grace period room for
   * Envoy's SIGKILL grace and the components' stop (Istio polls without bound, istio#44690).
   */
  pollDeadlineMs?: number;
}

export interface DrainPlanInput {
  sidecar: boolean;
  exitOnZeroActiveConnections: boolean;
  terminationDrainMs: number;
  minimumDrainMs: number;
  pollIntervalMs?: number;
  pollTimeoutMs?: number;
  stopGraceMs?: number;
  /** TERMINATION_GRACE_PERIOD_SECONDS (0 or absent: unknown). */
  terminationGraceSeconds?: number;
}

export function resolveDrainPlan(i: DrainPlanInput): DrainPlan {
  const minimumDrainMs = Math.max(0, i.minimumDrainMs);
  const stopGraceMs = i.stopGraceMs ?? SHUTDOWN_BUDGET_MS;
  const graceMs = i.terminationGraceSeconds ? i.terminationGraceSeconds * 1000 : undefined;
  return {
    mode: i.exitOnZeroActiveConnections ? "zero-connections" : "wait",
    inboundOnly: i.sidecar,
    terminationDrainMs: Math.max(0, i.terminationDrainMs),
    minimumDrainMs,
    pollIntervalMs: i.pollIntervalMs ?? 1000,
    pollTimeoutMs: i.pollTimeoutMs ?? 2000,
    maxPollErrors: 4,
    stopGraceMs,
    componentStopMs: SHUTDOWN_BUDGET_MS,
    ...(graceMs !== undefined ? { terminationGraceMs: graceMs } : {}),
    ...(graceMs !== undefined && i.exitOnZeroActiveConnections ? { pollDeadlineMs: Math.max(minimumDrainMs, graceMs - stopGraceMs - SHUTDOWN_BUDGET_MS) } : {}),
  };
}

/** The admin path of the drain call (Istio's DrainListeners). */
export function drainListenersPath(inboundOnly: boolean, skipExit: boolean): string {
  return `/drain_listeners?${inboundOnly ? "inboundonly&" : ""}graceful${skipExit ? "&skip_exit" : ""}`;
}

/** One line: what SIGTERM will do. */
export function describeDrainPlan(p: DrainPlan): string {
  const drain = `POST ${drainListenersPath(p.inboundOnly, false)}`;
  const wait =
    p.mode === "wait"
      ? `wait terminationDrainDuration ${formatGoDuration(p.terminationDrainMs)}`
      : `wait MINIMUM_DRAIN_DURATION ${formatGoDuration(p.minimumDrainMs)}, then poll downstream_cx_active every ${formatGoDuration(p.pollIntervalMs)} until 0` +
        (p.pollDeadlineMs !== undefined
          ? ` or ${formatGoDuration(p.pollDeadlineMs)} after SIGTERM (TERMINATION_GRACE_PERIOD_SECONDS less the stop budget)`
          : "");
  return `drain plan on SIGTERM: ${drain}; ${wait}; then SIGTERM Envoy, SIGKILL after ${formatGoDuration(p.stopGraceMs)}; a second signal skips the wait`;
}

/**
 * A warning when the drain plan's longest run (its wait, Envoy's SIGKILL grace, the components'
 * stop) is longer than the pod's termination grace period, after which kubelet SIGKILLs the pod;
 * undefined when it fits or the grace period is unknown. With EXIT_ON_ZERO_ACTIVE_CONNECTIONS the
 * polling ends by the grace period (pollDeadlineMs), so only MINIMUM_DRAIN_DURATION is counted.
 */
export function drainPlanWarning(p: DrainPlan): string | undefined {
  if (p.terminationGraceMs === undefined) return undefined;
  const wait = p.mode === "wait" ? p.terminationDrainMs : p.minimumDrainMs;
  const waitName = p.mode === "wait" ? "terminationDrainDuration" : "MINIMUM_DRAIN_DURATION";
  const total = wait + p.stopGraceMs + p.componentStopMs;
  if (total <= p.terminationGraceMs) return undefined;
  return (
    `drain plan needs up to ${formatGoDuration(total)} (${waitName} ${formatGoDuration(wait)} + SIGKILL grace ${formatGoDuration(p.stopGraceMs)} + component stop ${formatGoDuration(p.componentStopMs)}), ` +
    `more than TERMINATION_GRACE_PERIOD_SECONDS ${formatGoDuration(p.terminationGraceMs)}: kubelet may kill the pod before the drain ends`
  );
}

export interface ListenerPorts {
  envoyStatusPort: number;
  envoyPrometheusPort: number;
  secureMetricsPort?: number;
  secureMergedMetricsPort?: number;
}

/**
 * Listeners whose connections do not hold the drain open: Istio's health, Prometheus and
 * admin listeners. Istio names only the IPv4 wildcard (`0.0.0.0_<port>`); the IPv6 wildcard form
 * (`[__]_<port>`, Envoy's stat-name spelling of `[::]`) is added for IPv6-only pods.
 */
export function knownIstioListeners(p: ListenerPorts): Set<string> {
  const ports = [p.envoyStatusPort, p.envoyPrometheusPort];
  if (p.secureMetricsPort) ports.push(p.secureMetricsPort);
  if (p.secureMergedMetricsPort) ports.push(p.secureMergedMetricsPort);
  const out = new Set(["listener.admin.downstream_cx_active", "listener.admin.main_thread.downstream_cx_active"]);
  for (const port of ports) {
    out.add(`listener.0.0.0.0_${port}.downstream_cx_active`);
    out.add(`listener.[__]_${port}.downstream_cx_active`);
  }
  return out;
}

/** A uint64 gauge at or above 2^63 has wrapped below zero (no listener holds 2^63 connections). */
const GAUGE_UNDERFLOW = 2n ** 63n;

export interface ActiveConnections {
  /** Sum over client-facing listeners; -1 when Envoy returned no stats at all. */
  count: number;
  /** Lines that could not be parsed (logged by the caller). */
  problems: string[];
}

/**
 * Sum `listener.*.downstream_cx_active` from `/stats?usedonly&filter=downstream_cx_active$`,
 * skipping per-worker stats, Envoy internal listeners (`listener.envoy_internal_*`, ambient HBONE
 * plumbing) and Istio's own listeners (Istio's activeProxyConnections).
 */
export function countActiveConnections(stats: string, known: ReadonlySet<string>): ActiveConnections {
  if (stats.length === 0) return { count: -1, problems: [] };
  let count = 0;
  const problems: string[] = [];
  for (const line of stats.split("\n")) {
    const parts = line.split(":");
    if (parts.length !== 2) {
      if (line.trim() !== "") problems.push(`envoy stat line is missing separator: ${line}`);
      continue;
    }
    const name = parts[0]!;
    if (!name.startsWith("listener.") || name.includes("worker_")) continue;
    if (name.startsWith("listener.envoy_internal_")) continue;
    if (known.has(name)) continue;
    const raw = parts[1]!.trim();
    if (!/^\d+$/.test(raw)) {
      problems.push(`failed parsing Envoy stat ${name}: ${raw}`);
      continue;
    }
    // Envoy's gauges are uint64: one decremented below zero reads 2^64-1 (istio#49229). Istio's
    // agent converts it to a negative int and waits on a negative total; it counts as 0 here.
    if (raw.length >= 19 && BigInt(raw) >= GAUGE_UNDERFLOW) {
      problems.push(`Envoy stat ${name} is ${raw}, a gauge gone below zero in Envoy: counted as 0`);
      continue;
    }
    count += Number(raw);
  }
  return { count, problems };
}
