// `/healthz/ready`: one answer from every check the agent knows, each named. Istio stops at the
// first failing probe and answers 503 with an empty body; we evaluate all of them and name each
// pending one with its last error (ztunnel-style), so "why is my pod not ready" has an answer.
// Only Istio's checks gate (Envoy, gRPC bootstrap, DNS table, terminating); warnings such as an
// overdue certificate renewal are added to a 503 body but never cause one.

import { READINESS, type Readiness } from "../lib/readiness.ts";
import type { EnvoyReadinessProbe } from "./envoyready.ts";
import type { GrpcBootstrapProbe } from "./grpcbootstrap.ts";

export interface PendingCheck {
  name: string;
  error: string;
}

export interface ReadyResult {
  ready: boolean;
  pending: PendingCheck[];
  /** Non-gating conditions (readiness warnings), reported in a not-ready body. */
  warnings: PendingCheck[];
}

export interface ReadyCheckDeps {
  /** The agent's named blockers (xds connected, certificate warmed, dns table received, terminating...). */
  readiness?: Pick<Readiness, "blockers" | "warnings" | "explain">;
  /** Absent when Envoy is disabled (DISABLE_ENVOY). */
  envoy?: Pick<EnvoyReadinessProbe, "check">;
  grpcBootstrap?: Pick<GrpcBootstrapProbe, "check">;
}

export class ReadyCheck {
  constructor(private readonly deps: ReadyCheckDeps) {}

  async check(): Promise<ReadyResult> {
    const pending: PendingCheck[] = [];
    const envoyErr = this.deps.envoy ? this.deps.envoy.check() : Promise.resolve(undefined);
    const readiness = this.deps.readiness;
    for (const b of readiness?.blockers() ?? []) pending.push({ name: b.name, error: readiness!.explain(b) });
    const warnings = (readiness?.warnings() ?? []).map((w) => ({ name: w.name, error: readiness!.explain(w) }));
    const e = await envoyErr;
    if (e) pending.push({ name: READINESS.envoy, error: e });
    const g = this.deps.grpcBootstrap?.check();
    if (g) pending.push({ name: READINESS.grpcBootstrap, error: g });
    return { ready: pending.length === 0, pending, warnings };
  }
}

/** The 503 body: a count, then `name: error` per pending check, then `warning: name: error`. */
export function renderNotReady(pending: PendingCheck[], warnings: PendingCheck[] = []): string {
  const oneLine = (p: PendingCheck) => `${p.name}: ${p.error.replace(/\s*\n\s*/g, " ")}`;
  const lines = [...pending.map(oneLine), ...warnings.map((w) => `warning: ${oneLine(w)}`)];
  return `not ready: ${pending.length} pending\n${lines.join("\n")}\n`;
}
