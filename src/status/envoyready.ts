// Envoy readiness exactly as Istio checks it (pilot-agent status/ready/probe.go, util/stats.go):
//  1. until first success: CDS and LDS `update_success` > 0, read from
//     `/stats?usedonly&filter=^(cluster_manager\.cds|listener_manager\.lds)\.(update_success|update_rejected)$`;
//  2. until first success: `server.state` is 0 (LIVE) and `listener_manager.workers_started` is 1,
//     read from `/stats?usedonly&filter=^(server\.state|listener_manager\.workers_started)`.
// Both results are cached once true (they do not go back within one Envoy process); call
// `reset()` when Envoy is restarted. The parsing is pure; only `check()` talks to the admin API.

import { errorMessage } from "../lib/errors.ts";
import { joinHostPort } from "./loopback.ts";
import { adminRequest } from "../envoy/admin.ts";

export const UPDATE_STATS_FILTER = String.raw`^(cluster_manager\.cds|listener_manager\.lds)\.(update_success|update_rejected)$`;
export const READY_STATS_FILTER = String.raw`^(server\.state|listener_manager\.workers_started)`;

export interface UpdateStats {
  cdsSuccess: number;
  cdsRejected: number;
  ldsSuccess: number;
  ldsRejected: number;
}

const SERVER_STATES = ["LIVE", "DRAINING", "PRE_INITIALIZING", "INITIALIZING"];

/** Value of the first line starting with `name` in Envoy's `/stats` text output (0 when absent). */
function statValue(text: string, name: string): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const parts = line.split(":");
    if (parts.length !== 2) throw new Error(`envoy stat ${name} missing separator. line:${line}`);
    const raw = parts[1]!.trim();
    if (!/^\d+$/.test(raw)) throw new Error(`failed parsing Envoy stat ${name} (invalid value "${raw}") line: ${line}`);
    return Number(raw);
  }
  return 0;
}

export function parseUpdateStats(text: string): UpdateStats {
  return {
    cdsSuccess: statValue(text, "cluster_manager.cds.update_success"),
    cdsRejected: statValue(text, "cluster_manager.cds.update_rejected"),
    ldsSuccess: statValue(text, "listener_manager.lds.update_success"),
    ldsRejected: statValue(text, "listener_manager.lds.update_rejected"),
  };
}

export function describeUpdateStats(s: UpdateStats): string {
  return `cds updates: ${s.cdsSuccess} successful, ${s.cdsRejected} rejected; lds updates: ${s.ldsSuccess} successful, ${s.ldsRejected} rejected`;
}

/** Istio's verdict on the update stats: undefined when CDS and LDS were both accepted at least once. */
export function updateStatsError(s: UpdateStats): string | undefined {
  const cds = s.cdsSuccess > 0;
  const lds = s.ldsSuccess > 0;
  if (cds && lds) return undefined;
  const d = describeUpdateStats(s);
  if (!cds && !lds) return `config not received from XDS server (is Istiod running?): ${d}`;
  if (s.cdsRejected > 0 || s.ldsRejected > 0) return `config received from XDS server, but was rejected: ${d}`;
  return `config not fully received from XDS server: ${d}`;
}

/** Istio's verdict on `server.state` / `workers_started`: undefined when LIVE with workers started. */
export function serverStateError(text: string): string | undefined {
  const trimmed = text.trim();
  if (!text.includes("server.state")) return `failed to get readiness stats: server.state is not yet updated: ${trimmed}`;
  if (!text.includes("listener_manager.workers_started")) {
    return `failed to get readiness stats: listener_manager.workers_started is not yet updated: ${trimmed}`;
  }
  let state: number;
  let workers: number;
  try {
    state = statValue(text, "server.state");
    workers = statValue(text, "listener_manager.workers_started");
  } catch (e) {
    return `failed to get readiness stats: ${errorMessage(e)}`;
  }
  if (state !== 0) return `server is not live, current state is: ${SERVER_STATES[state] ?? "UNKNOWN"}`;
  if (workers !== 1) return "workers have not yet started";
  return undefined;
}

export type HttpGetText = (url: string, timeoutMs: number) => Promise<string>;

/**
 * GET returning the body of a 200 answer; anything else is an error naming the URL. Over a
 * socket of its own (src/envoy/admin.ts), so downloads holding fetch()'s pool cannot starve it.
 */
export const fetchText: HttpGetText = async (url, timeoutMs) => {
  const res = await adminRequest("GET", url, timeoutMs);
  if (res.status !== 200) throw new Error(`GET ${url}: HTTP ${res.status}: ${res.body.trim().slice(0, 200)}`);
  return res.body;
};

export interface EnvoyReadinessOptions {
  adminHost: string;
  adminPort: number;
  /** When aborted, readiness fails with `server is terminated: <reason>`. */
  shutdown?: AbortSignal;
  get?: HttpGetText;
  /** Timeouts of the two admin queries; Istio's are 1s and 3s. */
  updateTimeoutMs?: number;
  readyTimeoutMs?: number;
  /** Called once, the first time Envoy is fully ready. */
  onFirstReady?: () => void;
}

export class EnvoyReadinessProbe {
  private receivedFirstUpdate = false;
  private atLeastOnceReady = false;
  private firstReadyReported = false;
  private inFlight?: Promise<string | undefined>;
  private readonly get: HttpGetText;

  constructor(private readonly opts: EnvoyReadinessOptions) {
    this.get = opts.get ?? fetchText;
  }

  /** Forget cached successes (Envoy restarted). */
  reset(): void {
    this.receivedFirstUpdate = false;
    this.atLeastOnceReady = false;
  }

  /** undefined when ready, else Istio's error text. Concurrent callers share one admin query. */
  check(): Promise<string | undefined> {
    if (this.opts.shutdown?.aborted) return Promise.resolve(`server is terminated: ${reasonOf(this.opts.shutdown)}`);
    if (this.receivedFirstUpdate && this.atLeastOnceReady) return Promise.resolve(undefined);
    this.inFlight ??= this.run().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private url(filter: string): string {
    return `http://${joinHostPort(this.opts.adminHost, this.opts.adminPort)}/stats?usedonly&filter=${encodeURIComponent(filter)}`;
  }

  private async run(): Promise<string | undefined> {
    try {
      if (!this.receivedFirstUpdate) {
        const text = await this.get(this.url(UPDATE_STATS_FILTER), this.opts.updateTimeoutMs ?? 1000);
        const err = updateStatsError(parseUpdateStats(text));
        if (err) return err;
        this.receivedFirstUpdate = true;
      }
      if (!this.atLeastOnceReady) {
        const text = await this.get(this.url(READY_STATS_FILTER), this.opts.readyTimeoutMs ?? 3000);
        const err = serverStateError(text);
        if (err) return err;
        this.atLeastOnceReady = true;
      }
    } catch (e) {
      return errorMessage(e);
    }
    if (!this.firstReadyReported) {
      this.firstReadyReported = true;
      this.opts.onFirstReady?.();
    }
    return undefined;
  }
}

function reasonOf(signal: AbortSignal): string {
  const r = signal.reason;
  if (r instanceof Error) return r.message;
  return r === undefined ? "shutting down" : String(r);
}
