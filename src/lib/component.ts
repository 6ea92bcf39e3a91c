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

/** The longest delay a timer takes (2^31-1 ms, about 24.8 days); a longer one would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Sleep that ends early (resolving false) when the signal aborts. Delays past MAX_TIMER_MS wait that long. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, Math.min(ms, MAX_TIMER_MS));
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
