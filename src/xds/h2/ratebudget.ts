// A token bucket for events a peer may cause only so often: `burst` at once, refilled at
// `perSecond`. The HTTP/2 session spends one token per stream the client resets (the "rapid
// reset" attack, CVE-2023-44487); an empty bucket means the peer is abusive. nghttp2's defaults
// (1000 burst, 33/s) are ours: a well-behaved Envoy resets a handful of streams per reconnect.

export interface RateBudgetOptions {
  burst: number;
  perSecond: number;
}

export const DEFAULT_RESET_BUDGET: RateBudgetOptions = { burst: 1000, perSecond: 33 };

export class RateBudget {
  private tokens: number;
  private last: number;

  constructor(
    private readonly o: RateBudgetOptions,
    private readonly now: () => number,
  ) {
    this.tokens = o.burst;
    this.last = now();
  }

  /** Spend one token; false once the bucket is empty (the event should be refused). */
  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.o.burst, this.tokens + ((t - this.last) / 1000) * this.o.perSecond);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
