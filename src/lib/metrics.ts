// The agent's metric registry. Istio exports agent metrics only through the status server with
// the prefix `istio_agent_` and no suffix added, so names here are written in full. One registry
// is created by the composition root and passed to every component.

//
// prom-client's classes come from its own modules rather than its index, which also loads the push
// gateway client (node:http/https), cluster aggregation and summaries: a few ms of the agent's
// start. The process collectors (runtime-metrics.ts) are imported by the agent after its start path.

import type * as Prom from "prom-client";
import CounterImpl from "prom-client/lib/counter";
import GaugeImpl from "prom-client/lib/gauge";
import HistogramImpl from "prom-client/lib/histogram";
import RegistryImpl from "prom-client/lib/registry";

export const Counter: typeof Prom.Counter = CounterImpl;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge: typeof Prom.Gauge = GaugeImpl;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram: typeof Prom.Histogram = HistogramImpl;
export type Histogram<T extends string = string> = Prom.Histogram<T>;
export const Registry: typeof Prom.Registry = RegistryImpl;
export type Registry = Prom.Registry;

export const METRIC_PREFIX = "istio_agent_";

/** A registry. The process collectors are runtime-metrics.ts's, loaded by whoever wants them after the start path. */
export function newRegistry(): Registry {
  return new Registry();
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

export function histogram<L extends string = string>(
  reg: Registry,
  name: string,
  help: string,
  buckets: number[],
  labelNames: readonly L[] = [],
): Histogram<L> {
  const existing = reg.getSingleMetric(name);
  if (existing) return existing as Histogram<L>;
  return new Histogram<L>({ name, help, buckets, labelNames: labelNames as L[], registers: [reg] });
}
