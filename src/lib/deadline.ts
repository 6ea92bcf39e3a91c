// A deadline for what the agent waits on from a peer: the istiod dial, a unary call's answer (CSRs),
// a peer's SETTINGS acknowledgement. A plain timer measures wall time, so after the agent was held (a
// long event-loop stall, a stopped process, a VM pause) it fires before the connection could use
// the time it was given: timers run before sockets are read, and a reply that is already waiting
// in the kernel loses to a deadline the agent itself overslept. This one grants the time it fired
// late again (at most the original budget in all), and before it expires it lets one more turn of
// I/O run, so what has arrived is read first.

import type { Clock, TimerHandle } from "./clock.ts";

/** Lateness below this is the ordinary jitter of a loaded machine, not a stall worth re-granting. */
export const STALL_MS = 50;

export function stallTolerantDeadline(clock: Pick<Clock, "now" | "timer">, ms: number, expired: () => void): TimerHandle {
  let grantLeft = ms;
  let handle: TimerHandle;
  let cancelled = false;
  const arm = (d: number) => {
    const due = clock.now() + d;
    handle = clock.timer(d, () => check(due));
  };
  const check = (due: number) => {
    if (cancelled) return;
    const grant = Math.min(clock.now() - due, grantLeft);
    if (grant >= STALL_MS) {
      grantLeft -= grant;
      return arm(grant);
    }
    // One more turn of the loop, so a socket read already due runs before the verdict.
    handle = clock.timer(0, () => {
      if (!cancelled) expired();
    });
  };
  arm(ms);
  return {
    cancel: () => {
      cancelled = true;
      handle.cancel();
    },
  };
}
