// `agent iptables` (alias `istio-iptables`): the init container's traffic capture, with
// istio-iptables' flags, environment variables, dry-run transcript and exit codes (1 on errors,
// 126 when --run-validation fails, 255 when the command line cannot be parsed).

import { writeFileSync } from "node:fs";
import type { EnvMap } from "../config/envdecl.ts";
import { formatEnvHelp } from "../config/envdecl.ts";
import { FlagError, formatFlagHelp } from "../lib/flags.ts";
import { LogConfigError, LogSink, ids } from "../lib/log.ts";
import { CaptureError, runCapture } from "../iptables/capture.ts";
import { CaptureConfigError, fillFromEnvironment, validateCaptureConfig, type CaptureConfig, type CaptureHost } from "../iptables/config.ts";
import { DryRunXtables, RealXtables, spawnExec, type Exec } from "../iptables/deps.ts";
import { CAPTURE_FLAGS, IPTABLES_ENV, LOG_FLAGS, parseCaptureCommand } from "../iptables/flags.ts";
import { systemHost } from "../iptables/host.ts";
import { realNft, runNftCapture } from "../iptables/nft-capture.ts";
import { configureRoutes } from "../iptables/routes.ts";
import { runValidation, VALIDATION_ERROR_CODE, VALIDATION_FAILED_MESSAGE } from "../iptables/validation.ts";
import { errorMessage } from "../lib/errors.ts";

export interface IptablesIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Host facts (IPv6, resolv.conf, ENVOY_USER); the real machine when absent. */
  host?: CaptureHost;
  /** Process runner for iptables/ip; Bun.spawn when absent. */
  exec?: Exec;
  /** Clock for log timestamps. */
  now?: () => Date;
}

/**
 * Exit status for a command line that cannot be parsed (unknown flag, bad flag value, bad log
 * option): Istio's cobra command fails before running and pilot-agent's main exits -1.
 */
export const FLAG_ERROR_CODE = 255;

const ENV_ONLY = new Set([
  "ISTIO_OUTBOUND_OWNER_GROUPS",
  "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE",
  "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR",
  "ENVOY_USER",
  "DRY_RUN_FILE_PATH",
  "IPTABLES_TRACE_LOGGING",
]);

export const IPTABLES_HELP = `istio-iptables is responsible for setting up port forwarding for Istio Sidecar.

Usage:
  agent iptables [flags]
  agent istio-iptables [flags]

Flags:
${formatFlagHelp([...CAPTURE_FLAGS.map((c) => c.spec), ...LOG_FLAGS])}

Environment variables without a flag:
${formatEnvHelp(IPTABLES_ENV.filter((d) => ENV_ONLY.has(d.name)))}

Every flag marked [env X] can also be set by X; the command line wins. REDIRECT_DNS, DROP_INVALID and
DUAL_STACK are also read from ISTIO_META_DNS_CAPTURE, INVALID_DROP and ISTIO_DUAL_STACK (which win when set).
Exit codes: 0 ok, 1 error, ${VALIDATION_ERROR_CODE} validation failed, ${FLAG_ERROR_CODE} bad command line.
`;

export function iptablesHelp(): string {
  return IPTABLES_HELP;
}

function logWriter(targets: string[], dryRun: boolean, io: IptablesIo): (line: string) => void {
  const writers = targets.map((t): ((l: string) => void) => {
    // In a dry run stdout carries the transcript, so log lines aimed at stdout go to stderr.
    if (t === "stdout") return dryRun ? (l) => io.stderr(l + "\n") : (l) => io.stdout(l + "\n");
    if (t === "stderr") return (l) => io.stderr(l + "\n");
    return (l) => writeFileSync(t, l + "\n", { flag: "a" });
  });
  return (line) => writers.forEach((w) => w(line));
}

/** `nsenter --net=<ns>` in front of every command when --network-namespace is set. */
function inNamespace(exec: Exec, ns: string): Exec {
  if (!ns) return exec;
  return (cmd, args, opts) => exec("nsenter", [`--net=${ns}`, "--", cmd, ...args], opts);
}

export async function runIptables(argv: string[], env: EnvMap, io: IptablesIo): Promise<number> {
  let parsed;
  try {
    parsed = parseCaptureCommand(argv, env);
  } catch (e) {
    if (e instanceof FlagError || e instanceof CaptureConfigError) {
      io.stderr(`Error: ${e.message}\nRun 'agent iptables --help' for usage.\n`);
      return e instanceof FlagError ? FLAG_ERROR_CODE : 1;
    }
    throw e;
  }
  if (parsed.help) {
    io.stdout(IPTABLES_HELP);
    return 0;
  }
  let sink: LogSink;
  try {
    sink = new LogSink({
      outputLevels: parsed.log.outputLevels,
      json: parsed.log.json,
      callerScopes: parsed.log.caller,
      write: logWriter(parsed.log.targets, parsed.cfg.DRY_RUN, io),
      now: io.now,
    });
  } catch (e) {
    if (!(e instanceof LogConfigError)) throw e;
    io.stderr(`Error: ${e.message}\n`);
    return FLAG_ERROR_CODE;
  }
  const log = sink.logger();
  let cfg: CaptureConfig;
  try {
    cfg = fillFromEnvironment(parsed.cfg, parsed.envOnly, io.host ?? systemHost({ warn: (m) => log.warn(m) }));
    validateCaptureConfig(cfg);
  } catch (e) {
    log.error(errorMessage(e));
    return 1;
  }
  const exec = inNamespace(io.exec ?? spawnExec, cfg.NETWORK_NAMESPACE);
  if (cfg.NATIVE_NFTABLES && !cfg.SKIP_RULE_APPLY) {
    // Istio's ProgramNftables; a dry run prints the transaction instead of running anything.
    try {
      const program = await runNftCapture(cfg, cfg.DRY_RUN ? undefined : realNft(exec, (m) => log.debug(m)), log);
      if (cfg.DRY_RUN) {
        io.stdout(program);
        log.info("skipping configuring routes due to dry run mode");
      } else await configureRoutes(cfg, exec, log);
    } catch (e) {
      log.error(errorMessage(e));
      return 1;
    }
  } else if (!cfg.SKIP_RULE_APPLY) {
    const dry = cfg.DRY_RUN ? new DryRunXtables() : undefined;
    try {
      if (dry) log.info("running iptables in dry-run mode, no rule changes will be made");
      const xt = dry ?? new RealXtables({ exec, forceBinary: cfg.FORCE_IPTABLES_BINARY, debug: (m) => log.debug(m) });
      await runCapture(cfg, xt, log);
      if (dry) log.info("skipping configuring routes due to dry run mode");
      else await configureRoutes(cfg, exec, log);
    } catch (e) {
      log.error(e instanceof CaptureError ? e.message : `${errorMessage(e)}`);
      return 1;
    } finally {
      if (dry) {
        const text = dry.transcript.join("\n");
        io.stdout(text + "\n");
        if (parsed.dryRunFile) {
          try {
            writeFileSync(parsed.dryRunFile, dry.transcript.map((l) => l + "\n").join(""));
          } catch (e) {
            log.error(`unable to write dry run output file ${parsed.dryRunFile}: ${errorMessage(e)}`, ids({ file: parsed.dryRunFile }));
          }
        }
      }
    }
  }
  if (cfg.RUN_VALIDATION) {
    try {
      await runValidation({
        ipv6: cfg.HOST_IP.includes(":"),
        listenPorts: [Number(cfg.PROXY_PORT), Number(cfg.INBOUND_CAPTURE_PORT)],
        probePort: cfg.IPTABLES_PROBE_PORT,
        timeoutMs: cfg.PROBE_TIMEOUT,
        log,
      });
    } catch (e) {
      log.error(`Validation failed: ${errorMessage(e)}`);
      log.error(VALIDATION_FAILED_MESSAGE);
      return VALIDATION_ERROR_CODE;
    }
  }
  return 0;
}
