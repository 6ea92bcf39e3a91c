// The agent's own process and runtime metrics. Istio's agent exports the standard Prometheus
// process collector (`istio_agent_process_*`) and Go's runtime collector (`istio_agent_go_*`).
// The process names are runtime-neutral and kept; Go's do not exist here, and nothing is named
// for a runtime we do not run on (prom-client's `nodejs_*` set is not used): the runtime's own
// figures are `istio_agent_bun_*`, read from JavaScriptCore's heap statistics.

import addStartTime from "prom-client/lib/metrics/processStartTime";
import addMemory from "prom-client/lib/metrics/osMemoryHeap";
import addOpenFds from "prom-client/lib/metrics/processOpenFileDescriptors";
import addMaxFds from "prom-client/lib/metrics/processMaxFileDescriptors";
import { Gauge, METRIC_PREFIX, type Registry } from "./metrics.ts";
import { addProcessCpu } from "./processcpu.ts";

export const BUN_PREFIX = `${METRIC_PREFIX}bun_`;

/** The process collectors (`istio_agent_process_*`) and Bun's runtime gauges (`istio_agent_bun_*`) of this runtime. */
export function addProcessMetrics(reg: Registry): Promise<void> {
  return addRuntimeMetrics(reg, typeof Bun !== "undefined" ? Bun.version : "unknown");
}

/** Add the process collectors and the Bun runtime gauges to `reg`. */
export async function addRuntimeMetrics(reg: Registry, runtimeVersion: string): Promise<void> {
  const cfg = { prefix: METRIC_PREFIX };
  addProcessCpu(reg, METRIC_PREFIX);
  for (const add of [addStartTime, addMemory, addOpenFds, addMaxFds]) add(reg, cfg);
  const { heapStats } = await import("bun:jsc");
  const registers = [reg];
  let stats = heapStats();
  // One read per scrape: the first gauge collected refreshes the numbers for the others.
  new Gauge({
    name: `${BUN_PREFIX}heap_size_bytes`,
    help: "Bytes of the JavaScript heap in use (JavaScriptCore heapSize).",
    registers,
    collect() {
      stats = heapStats();
      this.set(stats.heapSize);
    },
  });
  new Gauge({
    name: `${BUN_PREFIX}heap_capacity_bytes`,
    help: "Bytes the JavaScript heap has reserved (JavaScriptCore heapCapacity).",
    registers,
    collect() {
      this.set(stats.heapCapacity);
    },
  });
  new Gauge({
    name: `${BUN_PREFIX}extra_memory_bytes`,
    help: "Bytes held outside the JavaScript heap on its behalf, e.g. buffers (JavaScriptCore extraMemorySize).",
    registers,
    collect() {
      this.set(stats.extraMemorySize);
    },
  });
  new Gauge({
    name: `${BUN_PREFIX}heap_objects`,
    help: "Number of live objects in the JavaScript heap.",
    registers,
    collect() {
      this.set(stats.objectCount);
    },
  });
  new Gauge({ name: `${BUN_PREFIX}info`, help: "The Bun runtime the agent runs on.", labelNames: ["version"], registers }).set({ version: runtimeVersion }, 1);
}
