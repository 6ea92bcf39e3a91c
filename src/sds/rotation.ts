// When to rotate and how long to back off: pure functions of times and a random draw.
// Rotation (Istio's secret cache): at expire − r·(expire − created), r = clamp(ratio + U(0,jitter)·±1, 0..1)
// so a fleet issued together does not renew together (#52102). Backoff (beyond Istio, as ztunnel):
// capped exponential with ±jitter, for warm-up and failed renewals.

export interface RotationPolicy {
  /** SECRET_GRACE_PERIOD_RATIO */
  ratio: number;
  /** SECRET_GRACE_PERIOD_RATIO_JITTER */
  jitter: number;
}

/** The grace ratio with jitter applied; `random` in [0,1). */
export function jitteredRatio(p: RotationPolicy, random: () => number): number {
  const sign = random() < 0.5 ? -1 : 1;
  const r = p.ratio + sign * random() * p.jitter;
  return Math.min(1, Math.max(0, r));
}

/** Milliseconds from `now` until rotation (never negative). */
export function rotationDelayMs(createdMs: number, expireMs: number, nowMs: number, ratio: number): number {
  const lifetime = Math.max(0, expireMs - createdMs);
  return Math.max(0, expireMs - ratio * lifetime - nowMs);
}

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  /** Fraction, e.g. 0.1 = ±10%. */
  jitter: number;
}

/** Warm-up backoff as Istio (500ms doubling to 60s). */
export const WARM_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 60_000, jitter: 0.1 };
/** Renewal retry backoff (1s doubling to 60s): the valid certificate keeps being served meanwhile. */
export const RENEW_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 60_000, jitter: 0.1 };

/** Delay before retry number `failures` (1 = after the first failure). */
export function backoffMs(failures: number, p: BackoffPolicy, random: () => number): number {
  const base = Math.min(p.maxMs, p.initialMs * 2 ** Math.max(0, failures - 1));
  return Math.max(0, base * (1 + p.jitter * (2 * random() - 1)));
}

/** True once less than `fraction` of the lifetime remains (readiness then reports renewal trouble). */
export function closeToExpiry(createdMs: number, expireMs: number, nowMs: number, fraction = 0.1): boolean {
  return expireMs - nowMs < fraction * Math.max(0, expireMs - createdMs);
}
