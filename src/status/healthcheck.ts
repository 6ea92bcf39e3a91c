// VM / WorkloadEntry health checks (Istio pkg/istio-agent/health): when ProxyConfig.readinessProbe
// is set, probe the application with its thresholds and period (together with Envoy's readiness
// unless Envoy is off) and report each health transition through the xDS relay (HealthReporter),
// which sends istio.v1.HealthInformation to istiod. Defaults: failureThreshold 1, successThreshold
// 1, timeout 1s, period 10s, initial delay 0; HTTP is healthy on [200,400) with User-Agent
// istio-probe/1.0; the first check runs at once. Unlike Istio's first releases, a workload that is
// unhealthy from the start is reported as such (a tri-state: unknown, healthy, unhealthy).

import type { HealthReporter } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import { systemClock } from "../lib/clock.ts";
import { StatusError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";
import { execProbe } from "./probes/exec.ts";
import { grpcProbe } from "./probes/grpc.ts";
import { httpProbe } from "./probes/http.ts";
import { tcpProbe } from "./probes/tcp.ts";

export type VmProbe =
  | { kind: "httpGet"; host: string; port: number; path: string; scheme: "http" | "https"; headers: [string, string][] }
  | { kind: "tcpSocket"; host: string; port: number }
  | { kind: "exec"; command: string[] }
  | { kind: "grpc"; host: string; port: number; service: string };

export interface HealthCheckConfig {
  initialDelayMs: number;
  timeoutMs: number;
  periodMs: number;
  successThreshold: number;
  failureThreshold: number;
  probe: VmProbe;
}

type Json = Record<string, unknown>;
const WHERE = "ProxyConfig.readinessProbe";

function num(v: unknown, field: string, dflt: number, min = 0): number {
  if (v === undefined || v === null || v === "" || v === 0) return dflt;
  const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min) throw new StatusError(`${field} must be an integer >= ${min}, got ${JSON.stringify(v)}`, WHERE);
  return n;
}

function port(v: unknown, field: string): number {
  const n = num(v, field, 0, 0);
  if (n < 1 || n > 65535) throw new StatusError(`${field} must be a port in 1-65535, got ${JSON.stringify(v)}`, WHERE);
  return n;
}

/** Parse ProxyConfig.readinessProbe (protobuf JSON); undefined when not set. Throws StatusError. */
export function parseReadinessProbe(raw: unknown, defaultHost: string): HealthCheckConfig | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "object" || Array.isArray(raw)) throw new StatusError("must be an object", WHERE);
  const r = raw as Json;
  const methods = (["httpGet", "tcpSocket", "exec", "grpc"] as const).filter((k) => r[k] !== undefined && r[k] !== null);
  if (methods.length !== 1)
    throw new StatusError(`needs exactly one of httpGet, tcpSocket, exec or grpc (found ${methods.length ? methods.join(", ") : "none"})`, WHERE);
  const m = methods[0]!;
  const h = (r[m] ?? {}) as Json;
  let probe: VmProbe;
  switch (m) {
    case "httpGet": {
      const scheme = String(h.scheme || "http").toLowerCase();
      if (scheme !== "http" && scheme !== "https") throw new StatusError(`httpGet.scheme must be HTTP or HTTPS, got ${JSON.stringify(h.scheme)}`, WHERE);
      const path = typeof h.path === "string" && h.path ? (h.path.startsWith("/") ? h.path : `/${h.path}`) : "/";
      const headers = Array.isArray(h.httpHeaders)
        ? (h.httpHeaders as Json[]).map((x): [string, string] => [String(x?.name ?? ""), String(x?.value ?? "")]).filter(([n]) => n)
        : [];
      probe = { kind: "httpGet", host: (h.host as string) || defaultHost, port: port(h.port, "httpGet.port"), path, scheme, headers };
      break;
    }
    case "tcpSocket":
      probe = { kind: "tcpSocket", host: (h.host as string) || defaultHost, port: port(h.port, "tcpSocket.port") };
      break;
    case "exec": {
      const command = h.command;
      if (!Array.isArray(command) || command.length === 0 || command.some((c) => typeof c !== "string"))
        throw new StatusError("exec.command must be a non-empty list of strings", WHERE);
      probe = { kind: "exec", command: command as string[] };
      break;
    }
    default:
      probe = { kind: "grpc", host: defaultHost, port: port(h.port, "grpc.port"), service: typeof h.service === "string" ? h.service : "" };
  }
  return {
    initialDelayMs: num(r.initialDelaySeconds, "initialDelaySeconds", 0) * 1000,
    timeoutMs: num(r.timeoutSeconds, "timeoutSeconds", 1, 1) * 1000,
    periodMs: num(r.periodSeconds, "periodSeconds", 10, 1) * 1000,
    successThreshold: num(r.successThreshold, "successThreshold", 1, 1),
    failureThreshold: num(r.failureThreshold, "failureThreshold", 1, 1),
    probe,
  };
}

/** Thresholds and transitions, pure: feed each probe result, get the event to send (if any). */
export class HealthStateMachine {
  private state: "unknown" | "healthy" | "unhealthy" = "unknown";
  private successes = 0;
  private failures = 0;

  constructor(
    private readonly successThreshold: number,
    private readonly failureThreshold: number,
  ) {}

  /** Returns `{ error }` (error undefined = healthy) when the state changes, else undefined. */
  observe(error: string | undefined): { error: string | undefined } | undefined {
    if (error === undefined) {
      this.successes++;
      this.failures = 0;
      if (this.successes >= this.successThreshold && this.state !== "healthy") {
        this.state = "healthy";
        this.successes = 0;
        return { error: undefined };
      }
    } else {
      this.failures++;
      this.successes = 0;
      if (this.failures >= this.failureThreshold && this.state !== "unhealthy") {
        this.state = "unhealthy";
        this.failures = 0;
        return { error };
      }
    }
    return undefined;
  }
}

export interface WorkloadHealthCheckerOptions {
  config: HealthCheckConfig;
  reporter: HealthReporter;
  log: Logger;
  /** Envoy's readiness, checked first (absent without Envoy). */
  envoy?: { check(): Promise<string | undefined> };
  /** Source address for HTTP/TCP/gRPC probes to local targets (127.0.0.6 / ::6). */
  sourceAddress?: string;
  /** Hosts that are this machine (probes to them leave from sourceAddress). */
  localHosts?: string[];
  /** Injected timer: resolves false when the signal aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<boolean>;
  /** Injected prober (tests); default runs config.probe. */
  probe?: (timeoutMs: number) => Promise<string | undefined>;
}

export class WorkloadHealthChecker {
  private readonly machine: HealthStateMachine;

  constructor(private readonly opts: WorkloadHealthCheckerOptions) {
    this.machine = new HealthStateMachine(opts.config.successThreshold, opts.config.failureThreshold);
  }

  /** Runs until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const sleep = this.opts.sleep ?? systemClock.sleep;
    const c = this.opts.config;
    this.opts.log.info(`starting health check for ${c.probe.kind} in ${c.initialDelayMs / 1000}s (period ${c.periodMs / 1000}s)`);
    if (c.initialDelayMs > 0 && !(await sleep(c.initialDelayMs, signal))) return;
    while (!signal.aborted) {
      const err = await this.checkOnce();
      if (signal.aborted) return;
      const ev = this.machine.observe(err);
      if (ev) {
        if (ev.error === undefined) this.opts.log.info("success threshold hit, marking as healthy");
        else this.opts.log.info(`failure threshold hit, marking as unhealthy: ${ev.error}`);
        this.opts.reporter.reportHealth(ev.error);
      }
      if (!(await sleep(c.periodMs, signal))) return;
    }
  }

  /** One aggregated probe: Envoy first, then the application. undefined = healthy. */
  async checkOnce(): Promise<string | undefined> {
    try {
      const envoyErr = await this.opts.envoy?.check();
      if (envoyErr) return `envoy not ready: ${envoyErr}`;
      return await (this.opts.probe ?? ((t) => this.probeApp(t)))(this.opts.config.timeoutMs);
    } catch (e) {
      return errorMessage(e);
    }
  }

  private sourceFor(host: string): string | undefined {
    const local = host === "localhost" || host.startsWith("127.") || host === "::1" || (this.opts.localHosts ?? []).includes(host);
    return local ? this.opts.sourceAddress : undefined;
  }

  private async probeApp(timeoutMs: number): Promise<string | undefined> {
    const p = this.opts.config.probe;
    switch (p.kind) {
      case "httpGet": {
        const headers: Record<string, string> = { "user-agent": "istio-probe/1.0" };
        for (const [k, v] of p.headers) headers[k.toLowerCase()] = v;
        const res = await httpProbe({ scheme: p.scheme, host: p.host, port: p.port, path: p.path, headers, timeoutMs, localAddress: this.sourceFor(p.host) });
        return res.status >= 200 && res.status < 400 ? undefined : `HTTP probe ${res.url} answered ${res.status}`;
      }
      case "tcpSocket":
        return tcpProbe({ host: p.host, port: p.port, timeoutMs, localAddress: this.sourceFor(p.host) });
      case "grpc":
        return grpcProbe({ host: p.host, port: p.port, service: p.service, timeoutMs, localAddress: this.sourceFor(p.host), userAgent: "istio-probe/1.0" });
      case "exec":
        return execProbe({ command: p.command, timeoutMs });
    }
  }
}
