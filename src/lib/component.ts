// The one contract every long-lived part of the agent follows. `agent.ts` starts components in
// order and owns shutdown: it aborts the signal (graceful) and, after a deadline, exits anyway.
// A component that stops working after a successful start says so through `failed` (consul's
// xdsServerExited, kuma's component errors); it does not decide what follows: the root does
// (`watchFailures`), per component, as Istio's agent would (exit, terminate, or log and go on).

import { errorMessage } from "./errors.ts";

export interface Component {
  /** Short name used in logs and readiness (`xdsproxy`, `sds`, `dns`, `status`, `envoy`). */
  readonly name: string;
  /**
   * Bring the component up. Resolves once it is serving (sockets bound, first work scheduled);
   * long-running work continues in the background until `signal` aborts. Rejects if it cannot
   * start at all.
   */
  start(signal: AbortSignal): Promise<void>;
  /** Resolves when everything the component started has finished after `signal` aborted. */
  stopped?(): Promise<void>;
  /**
   * Resolves (never rejects) with why the component stopped working after a successful start,
   * e.g. its listener died; stays pending while it works and after a requested stop.
   */
  readonly failed?: Promise<Error>;
}

/** Build a component; an error names it. */
export function building<T>(component: string, build: () => T): T {
  try {
    return build();
  } catch (e) {
    throw new ComponentError(component, e);
  }
}

/** A start step's promise whose rejection names the step (an error already naming one is kept). */
export function named<T>(component: string, p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    throw e instanceof ComponentError ? e : new ComponentError(component, e);
  });
}

/** A component's one-time failure report: `report` resolves `failed` the first time only. */
export class FailureReport {
  readonly failed: Promise<Error>;
  private resolve!: (e: Error) => void;
  private reported = false;

  constructor() {
    this.failed = new Promise((r) => (this.resolve = r));
  }

  /** Report the failure; false (and ignored) when one was reported already. */
  report(e: Error): boolean {
    if (this.reported) return false;
    this.reported = true;
    this.resolve(e);
    return true;
  }
}

/** What the root does when a component fails after start. */
export type FailureDecision =
  /** Stop the agent as a signal would (graceful: Envoy drains). Istio's status server does this. */
  | "terminate"
  /** The component ends the agent itself (Envoy's exit: the supervisor has the exit code). */
  | "exit"
  /** Log and keep serving without it. Istio's DNS, SDS and xDS servers only log. */
  | "degrade";

export interface FailureActions {
  log: { error(msg: string, fields?: Record<string, unknown>): void };
  terminate(): void;
  /** `stopping()` true: the agent is shutting down already, so a failure changes nothing. */
  stopping(): boolean;
}

/**
 * Hear every component's `failed` and act on the decision for it: one error line naming the
 * component and what follows, then terminate (once) or go on. Failures during shutdown are
 * logged only, as Istio's status server does when its context is already cancelled.
 */
export function watchFailures(components: readonly Component[], decide: (name: string) => FailureDecision, act: FailureActions): void {
  for (const c of components) {
    void c.failed?.then((e) => {
      const decision = decide(c.name);
      const fields = { component: c.name, decision };
      if (act.stopping()) {
        act.log.error(`${c.name} failed while the agent is stopping: ${e.message}`, fields);
        return;
      }
      if (decision === "terminate") {
        act.log.error(`${c.name} failed: ${e.message}; terminating the agent`, fields);
        act.terminate();
      } else if (decision === "exit") {
        act.log.error(`${c.name} failed: ${e.message}; the agent exits`, fields);
      } else {
        act.log.error(`${c.name} failed: ${e.message}; the agent keeps serving without it`, fields);
      }
    });
  }
}

/** A component could not start (or, once started, stopped working): names it, keeps the cause. */
export class ComponentError extends Error {
  override name = "ComponentError";
  constructor(
    readonly component: string,
    cause: unknown,
  ) {
    super(`${component}: ${errorMessage(cause)}`, { cause });
  }
}
