// The Prometheus process collector's CPU counters (`process_cpu_user_seconds_total`,
// `process_cpu_system_seconds_total`, `process_cpu_seconds_total`), as Istio's agent exports them.
// prom-client ships them too, but its module requires @opentelemetry/api (51 modules evaluated in
// every pod, for trace exemplars the agent never enables), so they are written here: each scrape
// adds the CPU time used since the previous one, read from the injected `cpuUsage`.

import { Counter, type Registry } from "./metrics.ts";

/** Microseconds of user and system CPU time since the process started (process.cpuUsage). */
export type CpuUsage = () => { user: number; system: number };

/** Adds the three CPU counters, named `${prefix}process_cpu_*`, to `reg`. */
export function addProcessCpu(reg: Registry, prefix: string, cpuUsage: CpuUsage = () => process.cpuUsage()): void {
  const registers = [reg];
  let last = cpuUsage();
  // One read per scrape: this counter's collect advances all three (as prom-client's collector does).
  new Counter({
    name: `${prefix}process_cpu_user_seconds_total`,
    help: "Total user CPU time spent in seconds.",
    registers,
    collect() {
      const now = cpuUsage();
      const u = Math.max(0, now.user - last.user) / 1e6;
      const s = Math.max(0, now.system - last.system) / 1e6;
      last = now;
      this.inc(u);
      system.inc(s);
      total.inc(u + s);
    },
  });
  const system = new Counter({ name: `${prefix}process_cpu_system_seconds_total`, help: "Total system CPU time spent in seconds.", registers });
  const total = new Counter({ name: `${prefix}process_cpu_seconds_total`, help: "Total user and system CPU time spent in seconds.", registers });
}
