// AgentConfig -> the Wasm conversion: the env settings Istio reads (pkg/wasm/options.go,
// pilot/pkg/features) and the data directory under the agent's root.

import { join } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { LogSink } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import { createWasmConversion, type WasmConversion } from "./index.ts";

/** Istio's constants.IstioDataDir, under the agent's root. */
export const WASM_DATA_DIR = "var/lib/istio/data";

export function wasmFromConfig(cfg: AgentConfig, deps: { sink: LogSink; registry: Registry; now?: () => number }): WasmConversion {
  const env = cfg.env;
  return createWasmConversion(
    {
      dir: join(cfg.root, WASM_DATA_DIR),
      insecureRegistries: env.WASM_INSECURE_REGISTRIES,
      moduleExpiryMs: env.WASM_MODULE_EXPIRY,
      purgeIntervalMs: env.WASM_PURGE_INTERVAL,
      httpRequestTimeoutMs: env.WASM_HTTP_REQUEST_TIMEOUT,
      httpRequestMaxRetries: env.WASM_HTTP_REQUEST_MAX_RETRIES,
      blockedCidrs: env.BLOCKED_CIDRS_IN_WASM_FETCH,
      maxBinaryBytes: env.ISTIO_WASM_MAX_BINARY_SIZE_BYTES,
    },
    { log: deps.sink.logger("wasm"), registry: deps.registry, clock: { now: deps.now ?? (() => performance.now()) } },
  );
}
