// The agent's metric registry. Istio exports agent metrics only through the status server with
// the prefix `istio_agent_` and no suffix added, so names here are written in full. One registry
// is created by the composition root and passed to every component.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export { Counter, Gauge, Histogram, Registry };

export const METRIC_PREFIX = "istio_agent_";

export function newRegistry(opts: { processMetrics?: boolean } = {}): Registry {
  const r = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: r, prefix: METRIC_PREFIX });
  return r;
}

/** Get-or-create, so two components sharing a metric name share the series. */
export function counter<L extends string = string>(reg: Registry, name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  const existing = reg.getSingleMetric(name);
  if (existing) return existing as Counter<L>;
  return new Counter<L>({ name, help, labelNames: labelNames as L[], registers: [reg] });
}

export function gauge<L extends string = string>(reg: Registry, name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  const existing = reg.getSingleMetric(name);
  if (existing) return existing as Gauge<L>;
  return new Gauge<L>({ name, help, labelNames: labelNames as L[], registers: [reg] });
}

export function histogram<L extends string = string>(reg: Registry, name: string, help: string, buckets: number[], labelNames: readonly L[] = []): Histogram<L> {
  const existing = reg.getSingleMetric(name);
  if (existing) return existing as Histogram<L>;
  return new Histogram<L>({ name, help, buckets, labelNames: labelNames as L[], registers: [reg] });
}
