// The answer to `/healthz/ready`, as Istio's status server gives it: 200 with an empty body when
// every check passes, else 503 naming what is pending (readycheck.ts). Logs the transitions once
// each ("Envoy proxy is ready", "Envoy proxy is NOT ready: …" when the reasons change) and, the
// first time, how long readiness took (istio_agent_startup_duration_seconds). Used by the
// status server on the agent's event loop and by the status thread (statusthread.worker.ts).

import { formatGoDuration } from "../lib/duration.ts";
import { type ReadyCheck, renderNotReady } from "./readycheck.ts";

export interface ReadyAnswerDeps {
  check: Pick<ReadyCheck, "check">;
  info(message: string): void;
  warn(message: string): void;
  /** Called once, the first time the agent is ready, with the seconds since the process started. */
  firstReady(seconds: number): void;
  now: () => number;
  processStartMs: number;
}

export class ReadyAnswer {
  private lastReady?: string;
  private everReady = false;

  constructor(private readonly deps: ReadyAnswerDeps) {}

  async answer(): Promise<Response> {
    const r = await this.deps.check.check();
    if (r.ready) {
      if (!this.everReady) {
        this.everReady = true;
        const elapsedMs = this.deps.now() - this.deps.processStartMs;
        this.deps.firstReady(elapsedMs / 1000);
        this.deps.info(`Readiness succeeded in ${formatGoDuration(elapsedMs)}`);
      }
      if (this.lastReady !== "") this.deps.info("Envoy proxy is ready");
      this.lastReady = "";
      return new Response("", { status: 200 });
    }
    const body = renderNotReady(r.pending, r.warnings);
    if (body !== this.lastReady) this.deps.warn(`Envoy proxy is NOT ready: ${r.pending.map((p) => `${p.name}: ${p.error}`).join("; ")}`);
    this.lastReady = body;
    return new Response(body, { status: 503, headers: { "content-type": "text/plain; charset=utf-8" } });
  }
}
