// prom-client's own modules, imported one by one by src/lib/metrics.ts (its index also loads the
// push gateway client, cluster aggregation and summaries, which the agent never uses). Same
// classes as the package's index exports.
declare module "prom-client/lib/registry" {
  const Registry: typeof import("prom-client").Registry;
  export default Registry;
}
declare module "prom-client/lib/counter" {
  const Counter: typeof import("prom-client").Counter;
  export default Counter;
}
declare module "prom-client/lib/gauge" {
  const Gauge: typeof import("prom-client").Gauge;
  export default Gauge;
}
declare module "prom-client/lib/histogram" {
  const Histogram: typeof import("prom-client").Histogram;
  export default Histogram;
}
declare module "prom-client/lib/defaultMetrics" {
  const collectDefaultMetrics: typeof import("prom-client").collectDefaultMetrics;
  export default collectDefaultMetrics;
}
declare module "prom-client/lib/metrics/processStartTime" {
  const add: (registry: import("prom-client").Registry, config?: { prefix?: string }) => void;
  export default add;
}
declare module "prom-client/lib/metrics/osMemoryHeap" {
  const add: (registry: import("prom-client").Registry, config?: { prefix?: string }) => void;
  export default add;
}
declare module "prom-client/lib/metrics/processOpenFileDescriptors" {
  const add: (registry: import("prom-client").Registry, config?: { prefix?: string }) => void;
  export default add;
}
declare module "prom-client/lib/metrics/processMaxFileDescriptors" {
  const add: (registry: import("prom-client").Registry, config?: { prefix?: string }) => void;
  export default add;
}
