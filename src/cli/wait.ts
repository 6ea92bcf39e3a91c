// `agent wait`: poll a readiness URL until it answers 200 (pilot-agent's app/wait.go; the injector
// uses it as a postStart hook with holdApplicationUntilProxyStarts). The first attempt is made
// after one period, as Istio does.

import { parseFlags, type FlagSpec } from "../lib/flags.ts";
import { CliError, type CliIO } from "./io.ts";
import type { Logger } from "../lib/log.ts";
import { systemClock } from "../lib/clock.ts";
import { errorMessage } from "../lib/errors.ts";

export const WAIT_FLAGS: FlagSpec[] = [
  { name: "timeoutSeconds", type: "int", default: 60, usage: "maximum number of seconds to wait for Envoy to be ready" },
  { name: "requestTimeoutMillis", type: "int", default: 500, usage: "number of milliseconds to wait for response" },
  { name: "periodMillis", type: "int", default: 500, usage: "number of milliseconds to wait between attempts" },
  { name: "url", type: "string", default: "http://localhost:15021/healthz/ready", usage: "URL to use in requests" },
];

export async function runWait(argv: string[], io: CliIO, log: Logger, fetchImpl: typeof fetch = fetch): Promise<number> {
  const { values } = parseFlags(argv, WAIT_FLAGS);
  const timeoutSeconds = values.timeoutSeconds as number;
  const period = values.periodMillis as number;
  const requestTimeout = values.requestTimeoutMillis as number;
  const url = values.url as string;
  if (period <= 0) throw new CliError(`--periodMillis must be positive, got ${period}`);
  if (requestTimeout <= 0) throw new CliError(`--requestTimeoutMillis must be positive, got ${requestTimeout}`);
  log.info(`Waiting for Envoy proxy to be ready at ${url} (timeout: ${timeoutSeconds} seconds)...`);
  const deadline = AbortSignal.timeout(timeoutSeconds * 1000);
  let lastError = "<nil>";
  for (;;) {
    if (!(await systemClock.sleep(period, deadline))) break;
    try {
      const res = await fetchImpl(url, { signal: AbortSignal.timeout(requestTimeout) });
      await res.arrayBuffer();
      if (res.status === 200) {
        log.info("Envoy is ready!");
        return 0;
      }
      lastError = `HTTP status code ${res.status}`;
    } catch (e) {
      lastError = errorMessage(e);
    }
    log.debug(`Not ready yet: ${lastError}`);
  }
  throw new CliError(`timeout waiting for Envoy proxy to become ready at ${url}. Last error: ${lastError}`);
}
