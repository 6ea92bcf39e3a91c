// Istio's CA client retry policy (grpc-middleware retry interceptor): at most 5 attempts, the
// n-th retry after 100ms·2^(n-1) ±10% jitter, only on transient gRPC codes.

export const CA_MAX_ATTEMPTS = 5;
const BASE_MS = 100;
const JITTER = 0.1;

/** CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE (google.rpc.Code). */
const RETRIABLE = new Set<number>([1, 4, 8, 10, 13, 14]);

export function isRetriable(code: number | undefined): boolean {
  return code !== undefined && RETRIABLE.has(code);
}

/** Delay before attempt `attempt` (0-based; attempt 0 runs at once). `random` in [0,1). */
export function retryDelayMs(attempt: number, random: () => number): number {
  if (attempt <= 0) return 0;
  const base = BASE_MS * 2 ** (attempt - 1);
  return base * (1 + JITTER * (2 * random() - 1));
}
