// The Wasm conversion's metrics, Istio's names and labels (pkg/wasm/monitoring.go), exported with
// the agent's istio_agent_ prefix like every other pkg/monitoring metric.

import { counter, gauge, histogram, type Counter, type Gauge, type Histogram, type Registry } from "../lib/metrics.ts";

/** wasm_remote_fetch_count{result} values. */
export type FetchResult = "success" | "download_failure" | "manifest_failure" | "checksum_mismatched" | "fetch_failure";
/** wasm_config_conversion_count{result} values. */
export type ConversionResult = "success" | "no_remote_load" | "marshal_failure" | "unmarshal_failure" | "fetch_failure" | "miss_remote_fetch_hint";

export interface WasmMetrics {
  cacheEntries: Gauge;
  cacheLookups: Counter<"hit">;
  remoteFetches: Counter<"result">;
  conversions: Counter<"result">;
  /** Milliseconds per ECDS response converted. */
  conversionDuration: Histogram;
}

export function wasmMetrics(reg: Registry): WasmMetrics {
  return {
    cacheEntries: gauge(reg, "istio_agent_wasm_cache_entries", "number of Wasm remote fetch cache entries."),
    cacheLookups: counter(reg, "istio_agent_wasm_cache_lookup_count", "number of Wasm remote fetch cache lookups.", ["hit"]),
    remoteFetches: counter(
      reg,
      "istio_agent_wasm_remote_fetch_count",
      "number of Wasm remote fetches and results, including success, download failure, and checksum mismatch.",
      ["result"],
    ),
    conversions: counter(
      reg,
      "istio_agent_wasm_config_conversion_count",
      "number of Wasm config conversions and results, including success, no remote load, marshal failure, remote fetch failure, miss remote fetch hint.",
      ["result"],
    ),
    conversionDuration: histogram(
      reg,
      "istio_agent_wasm_config_conversion_duration",
      "Total time in milliseconds istio-agent spends on converting remote load in Wasm config.",
      [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    ),
  };
}
