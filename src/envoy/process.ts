// Starting the Envoy process: the one place that calls Bun.spawn. Envoy gets its own session and
// process group (setsid), so a signal sent to the agent's group (a terminal's Ctrl-C, a
// `kill -- -pgid`) reaches only the agent, which then decides how Envoy stops. stdin is
// /dev/null; stdout/stderr are inherited as in Istio.

import { EnvoyError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

export interface LaunchSpec {
  binary: string;
  args: string[];
  env: Record<string, string>;
  /** Run as this uid/gid (Istio: 1337 when root and DNS on :53). */
  uid?: number;
  gid?: number;
}

export interface ExitStatus {
  /** Exit code, or null when killed by a signal. */
  code: number | null;
  /** Signal name (`SIGKILL`), or null. */
  signal: string | null;
}

export interface EnvoyProcess {
  readonly pid: number;
  readonly exited: Promise<ExitStatus>;
  /** Send a signal; never throws (the process may already be gone). */
  kill(signal: "SIGTERM" | "SIGKILL" | "SIGINT"): void;
}

export type Launcher = (spec: LaunchSpec) => EnvoyProcess;

/** The real launcher. Throws EnvoyError (naming the binary) when the process cannot start. */
export const bunLauncher: Launcher = (spec) => {
  let proc: ReturnType<typeof Bun.spawn>;
  try {
    proc = Bun.spawn([spec.binary, ...spec.args], {
      env: spec.env,
      stdio: ["ignore", "inherit", "inherit"],
      detached: true,
      ...(spec.uid !== undefined ? { uid: spec.uid } : {}),
      ...(spec.gid !== undefined ? { gid: spec.gid } : {}),
    });
  } catch (err) {
    throw new EnvoyError(`cannot start Envoy binary ${spec.binary}: ${errorMessage(err)}`, "spawn", { cause: err });
  }
  const exited = proc.exited.then(() => {
    const sig = proc.signalCode;
    return { code: sig === null ? proc.exitCode : null, signal: sig === null ? null : String(sig) };
  });
  return {
    pid: proc.pid,
    exited,
    kill(signal) {
      try {
        proc.kill(signal);
      } catch {
        // already exited
      }
    },
  };
};

/** `exit code 1`, `signal SIGKILL`. */
export function describeExit(s: ExitStatus): string {
  return s.signal !== null ? `signal ${s.signal}` : `exit code ${s.code}`;
}

/** Go's exec.ExitError text, as Istio logs it: `exit status 3`, `signal: killed`. */
export function goExitError(s: ExitStatus): string {
  if (s.signal === null) return `exit status ${s.code ?? -1}`;
  return `signal: ${GO_SIGNAL_NAMES[s.signal] ?? s.signal}`;
}

/** Go's syscall.Signal strings on Linux for the signals an Envoy dies of. */
const GO_SIGNAL_NAMES: Record<string, string> = {
  SIGHUP: "hangup",
  SIGINT: "interrupt",
  SIGQUIT: "quit",
  SIGILL: "illegal instruction",
  SIGTRAP: "trace/breakpoint trap",
  SIGABRT: "aborted",
  SIGBUS: "bus error",
  SIGFPE: "floating point exception",
  SIGKILL: "killed",
  SIGUSR1: "user defined signal 1",
  SIGSEGV: "segmentation fault",
  SIGUSR2: "user defined signal 2",
  SIGPIPE: "broken pipe",
  SIGALRM: "alarm clock",
  SIGTERM: "terminated",
  SIGXCPU: "CPU time limit exceeded",
  SIGXFSZ: "file size limit exceeded",
  SIGSYS: "bad system call",
};

/** Shell convention for the agent's own exit code: the code, or 128 + signal number. */
export function exitCodeOf(s: ExitStatus): number {
  if (s.signal === null) return s.code ?? 1;
  const n = SIGNAL_NUMBERS[s.signal];
  return n === undefined ? 1 : 128 + n;
}

const SIGNAL_NUMBERS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGILL: 4,
  SIGTRAP: 5,
  SIGABRT: 6,
  SIGBUS: 7,
  SIGFPE: 8,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
  SIGXCPU: 24,
  SIGXFSZ: 25,
  SIGSYS: 31,
};
