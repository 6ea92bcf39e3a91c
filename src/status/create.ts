// The status server built from the one AgentConfig: the composition root (src/agent.ts) calls
// createStatusServer; tests build StatusServer directly from StatusServerOptions.

import type { Registry } from "prom-client";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Component } from "../lib/component.ts";
import type { HealthReporter, LifecycleControl } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import type { Readiness } from "../lib/readiness.ts";
import { errorMessage } from "../lib/errors.ts";
import { type HealthCheckConfig, parseReadinessProbe } from "./healthcheck.ts";
import { adminLocalhost, probeSourceAddress, useIPv6Loopback } from "./loopback.ts";
import { StatusServer, type StatusServerOptions } from "./server.ts";
import { statusPortListen } from "./listen.ts";
import type { LogLevelControl } from "./debugroutes.ts";

export interface StatusServerDeps {
  log: Logger;
  registry: Registry;
  readiness: Readiness;
  lifecycle?: LifecycleControl;
  ndsz?: () => unknown;
  /** /debug/config_dump and the /debug/ page. */
  configDump?: () => unknown;
  /** GET/POST /logging. */
  logging?: LogLevelControl;
  /** Where VM health transitions go (the xDS relay); health checks run only when set. */
  health?: HealthReporter;
  envoyEnabled: boolean;
  /** The agent's shutdown signal: readiness then answers `server is terminated`. */
  shutdown?: AbortSignal;
  /** Check GRPC_XDS_BOOTSTRAP in readiness (default true, as Istio). */
  grpcBootstrapCheck?: boolean;
  now?: () => number;
  processStartMs?: number;
  /** Tests only: bind here instead of `[::]:statusPort` (port 0: a free port; statusPort 0 means off). */
  listen?: { hostname: string; port: number };
}

/** Map AgentConfig onto the server's options (pure; exported for tests). */
export function statusOptionsFrom(cfg: AgentConfig, deps: StatusServerDeps): StatusServerOptions {
  const pc = cfg.proxyConfig;
  const ipv6 = useIPv6Loopback(cfg.node.ipMode === "ipv6", cfg.env.INSTANCE_IP);
  const localhost = adminLocalhost(ipv6);
  const legacyLocalhost = cfg.env.REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION;
  const instanceIP = cfg.env.INSTANCE_IP || cfg.node.ips[0] || localhost;
  let workloadHealth: StatusServerOptions["workloadHealth"];
  if (pc.readinessProbe && deps.health) {
    let config: HealthCheckConfig | undefined;
    try {
      config = parseReadinessProbe(pc.readinessProbe, legacyLocalhost ? "localhost" : instanceIP);
    } catch (e) {
      deps.log.error(`VM health checks disabled: ${errorMessage(e)}`);
    }
    if (config) workloadHealth = { config, reporter: deps.health, localHosts: cfg.node.ips };
  }
  return {
    port: deps.listen?.port ?? pc.statusPort ?? 15020,
    ...(deps.listen ? { hostname: deps.listen.hostname } : {}),
    log: deps.log,
    registry: deps.registry,
    readiness: deps.readiness,
    envoy: deps.envoyEnabled
      ? {
          adminHost: localhost,
          adminPort: pc.proxyAdminPort ?? 15000,
          prometheusHost: localhost,
          prometheusPort: cfg.env.ENVOY_PROMETHEUS_PORT,
          mergeStats: cfg.env.PILOT_AGENT_MERGE_ENVOY_STATS,
        }
      : undefined,
    grpcBootstrapPath: deps.grpcBootstrapCheck === false ? undefined : cfg.env.GRPC_XDS_BOOTSTRAP || undefined,
    root: cfg.root,
    appProbers: cfg.env.ISTIO_KUBE_APP_PROBERS,
    probeDestination: legacyLocalhost ? "localhost" : instanceIP,
    probeSourceAddress: probeSourceAddress(ipv6),
    probeKeepAlive: cfg.env.ENABLE_PROBE_KEEPALIVE_CONNECTIONS,
    // Application metrics are merged for sidecars only: 15020 is exposed on gateways' Services.
    prometheusAnnotations: cfg.proxyType === "sidecar" ? cfg.env.ISTIO_PROMETHEUS_ANNOTATIONS || undefined : undefined,
    metricsLocalhostOnly: cfg.env.METRICS_LOCALHOST_ACCESS_ONLY,
    lifecycle: deps.lifecycle,
    ndsz: deps.ndsz,
    ...(deps.configDump ? { configDump: deps.configDump } : {}),
    ...(deps.logging ? { logging: deps.logging } : {}),
    profiling: cfg.flags.profiling,
    workloadHealth,
    shutdown: deps.shutdown,
    now: deps.now,
    processStartMs: deps.processStartMs,
    // The port is served from a thread of its own (native, or a Worker with app probes): probes are
    // answered while the event loop is busy.
    listen: statusPortListen((message) => deps.log.error(message)),
  };
}

export function createStatusServer(
  cfg: AgentConfig,
  deps: StatusServerDeps,
): Component & { port(): number; address(): { hostname: string; port: number }; resetEnvoyReadiness(): void } {
  return new StatusServer(statusOptionsFrom(cfg, deps));
}
