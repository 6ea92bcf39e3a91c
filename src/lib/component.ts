// The one contract every long-lived part of the agent follows. `agent.ts` starts components in
// order and owns shutdown: it aborts the signal (graceful) and, after a deadline, exits anyway.

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
}
