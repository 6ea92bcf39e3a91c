// The child side of the death link (src/envoy/deathlink.ts): `<agent> __envoy-exec <agent pid>
// <envoy> <args...>` arms the parent-death signal and execs Envoy in place. It runs in a fresh copy
// of the agent between the agent's spawn call and Envoy's first instruction, so it is on the start
// path: src/main.ts reaches it before evaluating anything else, and it imports only the FFI glue.

import { execWithParentDeathSignal } from "../../native/pdeathsig.ts";

export const ENVOY_EXEC_COMMAND = "__envoy-exec";

/** Returns an exit code only on failure (on success the process has become Envoy). */
export function runEnvoyExec(args: readonly string[], err: (s: string) => void): number {
  const [ppid, file, ...rest] = args;
  if (!ppid || !/^\d+$/.test(ppid) || !file) {
    err(`${ENVOY_EXEC_COMMAND}: usage: ${ENVOY_EXEC_COMMAND} <agent pid> <envoy binary> [args...]\n`);
    return 2;
  }
  const why = execWithParentDeathSignal(Number(ppid), file, [file, ...rest]);
  err(`${ENVOY_EXEC_COMMAND}: cannot start Envoy ${file}: ${why}\n`);
  return 127;
}
