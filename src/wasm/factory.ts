// AgentConfig -> the Wasm conversion: the env settings Istio reads (pkg/wasm/options.go,
// pilot/pkg/features) and the data directory under the agent's root. Only the ECDS hook (light)
// is built at start; the cache, fetchers and schemas are loaded on the first ECDS response, so an
// agent whose mesh has no WasmPlugin pays nothing for them at start-up.

import { join } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Component } from "../lib/component.ts";
import type { LogSink } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import { EcdsWasmHook } from "./ecds.ts";
import type { WasmConversion } from "./index.ts";

/** Istio's constants.IstioDataDir, under the agent's root. */
export const WASM_DATA_DIR = "var/lib/istio/data";

/** The conversion's hook and purge component, or undefined when ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION is off. */
export function wasmFromConfig(
  cfg: AgentConfig,
  deps: { sink: LogSink; registry: Registry; now?: () => number },
): { hook: EcdsWasmHook; component: Component; snapshot(): WasmCacheSnapshot } | undefined {
  const env = cfg.env;
  if (!env.ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION) return undefined;
  const log = deps.sink.logger("wasm");
  let loaded: Promise<WasmConversion> | undefined;
  /** The module cache once loaded (read by the operator's view). */
  let cache: WasmConversion["cache"] | undefined;
  const now = deps.now ?? (() => performance.now());
  const load = () =>
    (loaded ??= import("./index.ts").then((m) => {
      const w = m.createWasmConversion(
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
        { log, registry: deps.registry, clock: { now } },
      );
      cache = w.cache;
      return w;
    }));
  const hook = new EcdsWasmHook(async () => (await load()).converter, log);
  const component: Component = {
    name: "wasm",
    async start(signal) {
      // Nothing to purge until the first module was fetched (the cache exists only then).
      const t = setInterval(() => {
        if (loaded) void loaded.then((w) => w.cache.purge()).catch((e: Error) => log.error(`Wasm cache purge failed: ${e.message}`));
      }, env.WASM_PURGE_INTERVAL);
      t.unref?.();
      signal.addEventListener("abort", () => clearInterval(t), { once: true });
    },
  };
  const snapshot = (): WasmCacheSnapshot => ({
    dir: join(cfg.root, WASM_DATA_DIR),
    loaded: cache !== undefined,
    modules: (cache?.snapshot() ?? []).map((m) => ({ key: m.key, path: m.modulePath, urls: m.urls, idleSeconds: Math.max(0, (now() - m.lastUsed) / 1000) })),
  });
  return { hook, component, snapshot };
}

/** The module cache for the operator's view (/debug/config_dump). */
export interface WasmCacheSnapshot {
  dir: string;
  /** The conversion's code was loaded (an ECDS response came). */
  loaded: boolean;
  modules: { key: string; path: string; urls: string[]; idleSeconds: number }[];
}
