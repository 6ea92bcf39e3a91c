// Envoy dies with the agent. Bun.spawn offers no hook between fork and exec, so Envoy is started
// through a short-lived copy of the agent (`<agent> __envoy-exec <agent pid> <envoy> <args>`) that
// arms PR_SET_PDEATHSIG (SIGKILL) and then execs Envoy in place: same pid, same environment, and
// the kernel kills Envoy when the agent dies, even by SIGKILL (the OOM killer), instead of leaving
// it to PID 1 beside the next agent's Envoy. Where the FFI path is missing, Envoy starts directly.

import { accessSync, constants, statSync } from "node:fs";
import { parentDeathSupported } from "../../native/pdeathsig.ts";
import { EnvoyError } from "./errors.ts";
import { bunLauncher, type Launcher } from "./process.ts";
import { errorMessage } from "../lib/errors.ts";
import { ENVOY_EXEC_COMMAND } from "./envoyexec.ts";

export { ENVOY_EXEC_COMMAND, runEnvoyExec } from "./envoyexec.ts";

/** A launcher that starts Envoy through `selfCommand` (the agent's own argv prefix) with the death link armed. */
export function deathLinkedLauncher(selfCommand: readonly string[], agentPid: number, base: Launcher = bunLauncher): Launcher {
  return (spec) => {
    // The copy of the agent would fail later and less clearly: check the binary here, as a direct spawn does.
    try {
      if (!statSync(spec.binary).isFile()) throw new Error("not a regular file");
      accessSync(spec.binary, constants.X_OK);
    } catch (err) {
      throw new EnvoyError(`cannot start Envoy binary ${spec.binary}: ${errorMessage(err)}`, "spawn", { cause: err });
    }
    return base({ ...spec, binary: selfCommand[0]!, args: [...selfCommand.slice(1), ENVOY_EXEC_COMMAND, String(agentPid), spec.binary, ...spec.args] });
  };
}

/** The death-linked launcher when this system supports it, else the plain one. */
export function defaultLauncher(selfCommand: readonly string[] | undefined, agentPid: number): Launcher {
  return selfCommand?.length && parentDeathSupported() ? deathLinkedLauncher(selfCommand, agentPid) : bunLauncher;
}
