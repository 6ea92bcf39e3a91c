// The composition root's entry into src/envoy: build the EnvoySupervisor from the AgentConfig.
// Everything is resolved here once (arguments, drain plan, restart policy, run-as user, admin
// address); the supervisor itself only sees its narrow options.

import { dirname, join, resolve } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import { parseAnyDuration } from "../lib/duration.ts";
import type { Logger } from "../lib/log.ts";
import type { Readiness } from "../lib/readiness.ts";
import { systemClock, type Clock } from "../lib/clock.ts";
import { HttpEnvoyAdmin } from "./admin.ts";
import { bootstrapOverrideToJson } from "../bootstrap/override.ts";
import { envoyEnv, envoyRunsAsProxyUser, parentShutdownSeconds, splitComponentLog } from "./args.ts";
import { knownIstioListeners, resolveDrainPlan } from "./drainplan.ts";
import { parseRestartMode } from "./restart.ts";
import { EnvoySupervisor, type EnvoySupervisorOptions, type ShutdownOptions } from "./supervisor.ts";
import { FILE_LIMITS, readBoundedTextSync } from "../lib/boundedfile.ts";
import { defaultLauncher } from "./deathlink.ts";
import { EnvoyPidFile } from "./pidfile.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export { EnvoySupervisor, type EnvoySupervisorOptions, type ShutdownOptions } from "./supervisor.ts";
export { lifecycleRoutes, isLoopback, type LifecycleHandler } from "./routes.ts";
export { envoyArgs, splitComponentLog } from "./args.ts";
export { EnvoyError } from "./errors.ts";

export interface EnvoyDeps {
  log: Logger;
  readiness: Readiness;
  /** `-c`: the written envoy-rev.json, or ProxyConfig.customConfigFile. */
  bootstrapPath: string;
  /** JSON for `--config-yaml`; default: the ISTIO_BOOTSTRAP_OVERRIDE file, converted as Istio does. */
  configYaml?: string;
  /** Files whose change starts a new epoch with ENVOY_HOT_RESTART=true; default: hotRestartWatchFiles. */
  watchFiles?: string[];
  /** Workload certificate files mounted into the pod (watched for hot restart). */
  certificateFiles?: readonly string[];
  /** Reap orphaned zombies; default: the agent is PID 1. */
  reapOrphans?: boolean;
  /** Grace between SIGTERM and SIGKILL when stopping Envoy (default 5s). */
  stopGraceMs?: number;
  /** The argv prefix that runs the agent again: Envoy is started through it so it dies with the agent. */
  selfCommand?: readonly string[];
  /** Time for the supervisor's waits and restart history (default: the real clock). */
  clock?: Clock;
}

/** Milliseconds from a ProxyConfig duration field, or the default (with a warning) when invalid. */
function durationField(log: Logger, name: string, v: string | undefined, def: number): number {
  if (v === undefined || v === "") return def;
  try {
    return parseAnyDuration(v);
  } catch {
    log.warn(`ProxyConfig.${name}: invalid duration "${v}", using ${def}ms`);
    return def;
  }
}

/**
 * What ENVOY_HOT_RESTART watches (as the README says: Envoy's config and mounted certificates):
 * the bootstrap Envoy is started with (the custom config file, or the rendered envoy-rev.json),
 * the ISTIO_BOOTSTRAP_OVERRIDE file, and the workload certificate files mounted into the pod.
 */
export function hotRestartWatchFiles(f: { bootstrapPath: string; overrideFile?: string | undefined; certificateFiles: readonly string[] }): string[] {
  return [...new Set([f.bootstrapPath, ...(f.overrideFile ? [f.overrideFile] : []), ...f.certificateFiles])];
}

/** Map the AgentConfig to the supervisor's options. Exposed for tests and `--dry-run` style printing. */
export function envoyOptionsFromConfig(cfg: AgentConfig, deps: EnvoyDeps): EnvoySupervisorOptions {
  const log = deps.log.child("envoy");
  const clock = deps.clock ?? systemClock;
  const pc = cfg.proxyConfig;
  const env = cfg.env;
  const drainDurationMs = durationField(log, "drainDuration", pc.drainDuration, 45_000);
  const terminationDrainMs = durationField(log, "terminationDrainDuration", pc.terminationDrainDuration, 5000);
  const fileFlushIntervalMs = pc.fileFlushInterval ? durationField(log, "fileFlushInterval", pc.fileFlushInterval, 1000) : undefined;
  const concurrency = cfg.flags.concurrency !== 0 ? cfg.flags.concurrency : (pc.concurrency ?? 0);

  const { dropped } = splitComponentLog(cfg.flags.proxyLogLevel);
  for (const d of dropped) log.warn(`--proxyLogLevel: dropping invalid log level: ${d}`);

  let configYaml = deps.configYaml;
  if (configYaml === undefined && env.ISTIO_BOOTSTRAP_OVERRIDE !== "") {
    const file = resolve(cfg.root, env.ISTIO_BOOTSTRAP_OVERRIDE);
    try {
      configYaml = bootstrapOverrideToJson(readBoundedTextSync(file, FILE_LIMITS.config), env.HOST_IP, file);
    } catch (err) {
      log.warn(`Failed to read bootstrap override ISTIO_BOOTSTRAP_OVERRIDE=${file}: ${errorMessage(err)}`, ids({ path: file }));
    }
  }

  const restartMode = parseRestartMode(env.ENVOY_RESTART_POLICY);
  if (restartMode.problem) log.warn(restartMode.problem);

  const bootstrapPath = resolve(cfg.root, deps.bootstrapPath);
  const custom = pc.customConfigFile ? resolve(cfg.root, pc.customConfigFile) : undefined;
  const adminHost = cfg.node.ipMode === "ipv6" ? "::1" : "127.0.0.1";
  const adminPort = pc.proxyAdminPort ?? 15000;
  const overrideFile = env.ISTIO_BOOTSTRAP_OVERRIDE !== "" ? resolve(cfg.root, env.ISTIO_BOOTSTRAP_OVERRIDE) : undefined;
  const watchFiles =
    deps.watchFiles ?? hotRestartWatchFiles({ bootstrapPath, overrideFile, certificateFiles: (deps.certificateFiles ?? []).map((f) => resolve(cfg.root, f)) });

  return {
    log,
    clock,
    readiness: deps.readiness,
    binaryPath: pc.binaryPath ?? "/usr/local/bin/envoy",
    args: {
      bootstrapPath: deps.bootstrapPath,
      drainDurationMs,
      nodeIps: cfg.node.ips,
      ...(fileFlushIntervalMs !== undefined ? { fileFlushIntervalMs } : {}),
      ...(pc.fileFlushMinSizeKb ? { fileFlushMinSizeKb: pc.fileFlushMinSizeKb } : {}),
      proxyLogLevel: cfg.flags.proxyLogLevel,
      proxyComponentLogLevel: cfg.flags.proxyComponentLogLevel,
      skipDeprecatedLogs: env.ENVOY_SKIP_DEPRECATED_LOGS,
      enableCoreDump: env.ISTIO_ENVOY_ENABLE_CORE_DUMP,
      ...(configYaml !== undefined ? { configYaml } : {}),
      concurrency: concurrency ?? 0,
    },
    env: envoyEnv(cfg.rawEnv, env.COMPLIANCE_POLICY),
    ...(envoyRunsAsProxyUser(cfg.uid, env.DNS_PROXY_ADDR) ? { runAs: { uid: 1337, gid: 1337 } } : {}),
    admin: new HttpEnvoyAdmin(adminHost, adminPort),
    drainPlan: resolveDrainPlan({
      sidecar: cfg.proxyType === "sidecar",
      exitOnZeroActiveConnections: env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS,
      terminationDrainMs,
      minimumDrainMs: env.MINIMUM_DRAIN_DURATION,
      terminationGraceSeconds: env.TERMINATION_GRACE_PERIOD_SECONDS,
      ...(deps.stopGraceMs !== undefined ? { stopGraceMs: deps.stopGraceMs } : {}),
    }),
    knownListeners: knownIstioListeners({
      envoyStatusPort: env.ENVOY_STATUS_PORT,
      envoyPrometheusPort: env.ENVOY_PROMETHEUS_PORT,
      secureMetricsPort: env.ENVOY_SECURE_METRICS_PORT,
      secureMergedMetricsPort: env.ENVOY_SECURE_MERGED_METRICS_PORT,
    }),
    restart: {
      mode: restartMode.mode,
      baseMs: env.ENVOY_RESTART_BACKOFF_BASE,
      maxMs: env.ENVOY_RESTART_BACKOFF_MAX,
      budget: env.ENVOY_RESTART_BUDGET,
      windowMs: env.ENVOY_RESTART_WINDOW,
    },
    ...(env.ENVOY_HOT_RESTART ? { hotRestart: { watchFiles, parentShutdownS: parentShutdownSeconds(drainDurationMs) } } : {}),
    // Istio removes the file it rendered, never a user's custom config file.
    cleanupFiles: custom === bootstrapPath ? [] : [bootstrapPath],
    ...((deps.reapOrphans ?? process.pid === 1) ? { reaper: { selfPid: process.pid } } : {}),
    launcher: defaultLauncher(deps.selfCommand, process.pid, log),
    pidFile: new EnvoyPidFile(join(dirname(bootstrapPath), "envoy.pid"), {
      log,
      kill: (pid, sig) => {
        try {
          process.kill(pid, sig);
          return true;
        } catch {
          return false;
        }
      },
      sleep: (ms) => clock.sleep(ms).then(() => undefined),
    }),
  };
}

export type EnvoyComponent = EnvoySupervisor & { shutdown(opts?: ShutdownOptions): Promise<void>; readonly exited: Promise<number> };

/** The factory `src/agent.ts` calls. */
export function createEnvoySupervisor(cfg: AgentConfig, deps: EnvoyDeps): EnvoyComponent {
  return new EnvoySupervisor(envoyOptionsFromConfig(cfg, deps));
}
