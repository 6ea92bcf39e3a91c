// One call to a Google endpoint (STS, IAM credentials) as Istio's token exchange plugin made it:
// a JSON POST with a 5 s timeout per attempt, at most 5 attempts 10 ms apart, retried on transport
// errors and 5xx, never on 4xx. Beyond Istio: the answer is read with a size cap, and a retry
// sends the body again (Go's client sent an empty body on a retry of the same request).

import { readCapped } from "../platform/http.ts";
import { systemClock, type Clock } from "../lib/clock.ts";
import { errorMessage } from "../lib/errors.ts";

/** Istio's httpTimeOutInSec. */
export const CLOUD_CALL_TIMEOUT_MS = 5_000;
/** Istio's maxRequestRetry (attempts in all). */
export const CLOUD_CALL_ATTEMPTS = 5;
export const CLOUD_RETRY_PAUSE_MS = 10;
/** Google's token answers are a few KiB. */
export const CLOUD_BODY_CAP = 64 * 1024;
/** How much of an error body goes into a message. */
const ERROR_BODY_SHOWN = 512;

export interface CloudCallOptions {
  timeoutMs?: number;
  attempts?: number;
  pauseMs?: number;
  capBytes?: number;
  fetch?: typeof fetch;
  /** Waits between attempts (the system clock by default). */
  clock?: Pick<Clock, "sleep">;
}

export class CloudCallError extends Error {
  constructor(
    message: string,
    /** The last HTTP status seen (0: none). */
    readonly status: number,
  ) {
    super(message);
    this.name = "CloudCallError";
  }
}

/** POST `body` as JSON; resolves with the 200 answer's text, rejects with a CloudCallError. */
export async function postJson(url: string, body: unknown, headers: Record<string, string>, opts: CloudCallOptions = {}): Promise<string> {
  const attempts = opts.attempts ?? CLOUD_CALL_ATTEMPTS;
  const timeoutMs = opts.timeoutMs ?? CLOUD_CALL_TIMEOUT_MS;
  const doFetch = opts.fetch ?? fetch;
  const payload = JSON.stringify(body);
  let last = new CloudCallError(`${url}: no attempt made`, 0);
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await (opts.clock ?? systemClock).sleep(opts.pauseMs ?? CLOUD_RETRY_PAUSE_MS);
    const signal = AbortSignal.timeout(timeoutMs);
    let res: Response;
    try {
      res = await doFetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: payload,
        signal,
        redirect: "manual",
        keepalive: false,
      });
    } catch (e) {
      last = new CloudCallError(signal.aborted ? `no answer from ${url} within ${timeoutMs}ms` : `${url}: ${errorMessage(e)}`, 0);
      continue;
    }
    let text: string;
    try {
      text = await readCapped(res, opts.capBytes ?? CLOUD_BODY_CAP);
    } catch (e) {
      if (signal.aborted) {
        last = new CloudCallError(`answer from ${url} not read within ${timeoutMs}ms`, res.status);
        continue;
      }
      // Too large (or cut off): asking again would get the same.
      last = new CloudCallError(`answer from ${url} (HTTP status ${res.status}): ${errorMessage(e)}`, res.status);
      break;
    }
    if (res.status === 200) return text;
    last = new CloudCallError(`HTTP Status ${res.status}, body: ${text.slice(0, ERROR_BODY_SHOWN)}`, res.status);
    if (res.status >= 400 && res.status < 500) break;
  }
  throw last;
}
