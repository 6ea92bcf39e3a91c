// Envoy dies with the agent. Bun.spawn offers no hook between fork and exec, so Envoy is started
// through a launcher that arms PR_SET_PDEATHSIG (SIGKILL) and then execs Envoy in place: same pid,
// same environment, and the kernel kills Envoy when the agent dies, even by SIGKILL (the OOM
// killer), instead of leaving it to PID 1 beside the next agent's Envoy. The launcher is the native
// one embedded in the binary (native/envoylauncher.c: a few system calls) when this build carries
// it and the system runs it; else a short-lived copy of the agent (`<agent> __envoy-exec <agent
// pid> <envoy> <args>`, a second start of the runtime and bundle). Where the FFI path is missing,
// Envoy starts directly.

import { accessSync, constants, statSync } from "node:fs";
import { parentDeathSupported } from "../../native/pdeathsig.ts";
import { nativeLauncher } from "../../native/envoylauncher.ts";
import { EnvoyError } from "./errors.ts";
import { bunLauncher, type Launcher } from "./process.ts";
import { errorMessage } from "../lib/errors.ts";
import type { Logger } from "../lib/log.ts";
import { ENVOY_EXEC_COMMAND } from "./envoyexec.ts";

export { ENVOY_EXEC_COMMAND, runEnvoyExec } from "./envoyexec.ts";

/** Envoy's binary must be a regular executable file: the launchers would fail later and less clearly. */
function checkEnvoyBinary(binary: string): void {
  try {
    if (!statSync(binary).isFile()) throw new Error("not a regular file");
    accessSync(binary, constants.X_OK);
  } catch (err) {
    throw new EnvoyError(`cannot start Envoy binary ${binary}: ${errorMessage(err)}`, "spawn", { cause: err });
  }
}

/** A launcher that starts Envoy through `selfCommand` (the agent's own argv prefix) with the death link armed. */
export function deathLinkedLauncher(selfCommand: readonly string[], agentPid: number, base: Launcher = bunLauncher): Launcher {
  return (spec) => {
    checkEnvoyBinary(spec.binary);
    return base({ ...spec, binary: selfCommand[0]!, args: [...selfCommand.slice(1), ENVOY_EXEC_COMMAND, String(agentPid), spec.binary, ...spec.args] });
  };
}

/**
 * A launcher that starts Envoy through the native launcher at `launcherPath` with the death link
 * armed; when that cannot be spawned (a kernel refusing to execute memory files), `fallback` starts it.
 */
export function nativeLinkedLauncher(launcherPath: string, agentPid: number, fallback: Launcher, base: Launcher = bunLauncher): Launcher {
  return (spec) => {
    checkEnvoyBinary(spec.binary);
    try {
      return base({ ...spec, binary: launcherPath, args: [String(agentPid), spec.binary, ...spec.args] });
    } catch {
      return fallback(spec);
    }
  };
}

/**
 * The death-linked launcher when this system supports it (native when available, else the copy of
 * the agent), else the plain one. `native` is consulted only when a death link is wanted.
 */
export function defaultLauncher(
  selfCommand: readonly string[] | undefined,
  agentPid: number,
  log?: Pick<Logger, "debug">,
  native: () => { path: string } | string = nativeLauncher,
): Launcher {
  if (!selfCommand?.length || !parentDeathSupported()) return bunLauncher;
  const copy = deathLinkedLauncher(selfCommand, agentPid);
  const n = native();
  if (typeof n !== "string") return nativeLinkedLauncher(n.path, agentPid, copy);
  log?.debug(`Envoy is started through a copy of the agent (no native launcher: ${n})`);
  return copy;
}
