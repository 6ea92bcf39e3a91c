// The Wasm remote-load conversion as the composition root builds it (ISTIO_AGENT_ENABLE_WASM_
// REMOTE_LOAD_CONVERSION): the module cache under /var/lib/istio/data with its HTTP and OCI
// fetchers and SSRF guard, the converter, the relay's ECDS hook, and a component whose only
// background work is the periodic purge.

import { lookup } from "node:dns/promises";
import type { Component } from "../lib/component.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import { ModuleCache } from "./cache.ts";
import type { Clock } from "./clock.ts";
import { WasmConverter } from "./convert.ts";
import { GcMeter } from "./gcmeter.ts";
import { EcdsWasmHook } from "./ecds.ts";
import { HttpFetcher } from "./http-fetcher.ts";
import { wasmMetrics } from "./metrics.ts";
import { OciFetcher } from "./oci.ts";
import { WasmSchema } from "./schema.ts";
import { AddressGuard, parseBlockedCidrs, type Lookup } from "./ssrf.ts";

export interface WasmSettings {
  /** Where modules are written (Istio: /var/lib/istio/data). */
  dir: string;
  insecureRegistries: string;
  moduleExpiryMs: number;
  purgeIntervalMs: number;
  httpRequestTimeoutMs: number;
  httpRequestMaxRetries: number;
  blockedCidrs: string;
  maxBinaryBytes: number;
}

export interface WasmDeps {
  log: Logger;
  registry: Registry;
  clock: Clock;
  lookup?: Lookup;
  /** A synchronous garbage collection; Bun's by default. */
  collectGarbage?: () => void;
}

export interface WasmConversion {
  converter: WasmConverter;
  hook: EcdsWasmHook;
  cache: ModuleCache;
  component: Component;
}

const DEFAULTS = {
  moduleExpiryMs: 86_400_000,
  purgeIntervalMs: 3_600_000,
  httpRequestTimeoutMs: 15_000,
  httpRequestMaxRetries: 5,
  maxBinaryBytes: 268_435_456,
};

/**
 * Wasm downloads running at once. Each holds one connection of fetch()'s per-process pool, a few
 * 16 KiB chunks (and zlib's window) in memory, and at most two scratch files of up to
 * ISTIO_WASM_MAX_BINARY_SIZE_BYTES on disk; further downloads queue within their own deadline.
 */
export const MAX_CONCURRENT_DOWNLOADS = 4;

/** Bytes streamed by all Wasm downloads between two requested garbage collections (gcmeter.ts). */
export const GC_EVERY_BYTES = 8 * 1024 * 1024;

const systemLookup: Lookup = async (host) => lookup(host, { all: true, verbatim: true });

/** A setting out of its range is reported by name and replaced by Istio's default. */
function ranged(log: Logger, name: string, v: number, min: number, max: number, def: number): number {
  if (Number.isFinite(v) && v >= min && v <= max) return v;
  log.warn(`${name}=${v} is outside ${min}..${max}; using ${def}`);
  return def;
}

export function createWasmConversion(s: WasmSettings, deps: WasmDeps): WasmConversion {
  const log = deps.log;
  const day = 86_400_000;
  const expiry = ranged(log, "WASM_MODULE_EXPIRY", s.moduleExpiryMs, 1, 365 * day, DEFAULTS.moduleExpiryMs);
  const purgeEvery = ranged(log, "WASM_PURGE_INTERVAL", s.purgeIntervalMs, 1000, 365 * day, DEFAULTS.purgeIntervalMs);
  const timeout = ranged(log, "WASM_HTTP_REQUEST_TIMEOUT", s.httpRequestTimeoutMs, 1, day, DEFAULTS.httpRequestTimeoutMs);
  const retries = ranged(log, "WASM_HTTP_REQUEST_MAX_RETRIES", s.httpRequestMaxRetries, 1, 100, DEFAULTS.httpRequestMaxRetries);
  const maxBytes = ranged(log, "ISTIO_WASM_MAX_BINARY_SIZE_BYTES", s.maxBinaryBytes, 8, 4 * 1024 ** 3, DEFAULTS.maxBinaryBytes);
  const { cidrs, problems } = parseBlockedCidrs(s.blockedCidrs);
  for (const p of problems) log.warn(`${p}; entry ignored, the other ranges apply`);
  const guard = new AddressGuard(cidrs, deps.lookup ?? systemLookup);
  const metrics = wasmMetrics(deps.registry);
  const insecure = new Set(
    s.insecureRegistries
      .split(",")
      .map((h) => h.trim())
      .filter(Boolean),
  );
  const cache = new ModuleCache(
    { dir: s.dir, moduleExpiryMs: expiry, insecureRegistries: insecure, maxConcurrentDownloads: MAX_CONCURRENT_DOWNLOADS },
    {
      http: new HttpFetcher({ requestTimeoutMs: timeout, maxAttempts: retries, maxBytes, guard, log }),
      oci: new OciFetcher({ guard, maxBytes, log }),
      metrics,
      log,
      clock: deps.clock,
      meter: new GcMeter(GC_EVERY_BYTES, deps.collectGarbage ?? (() => Bun.gc(true))),
    },
  );
  const converter = new WasmConverter({ cache, schema: new WasmSchema(), metrics, log, clock: deps.clock });
  const hook = new EcdsWasmHook(async () => converter, log);
  const component: Component = {
    name: "wasm",
    async start(signal) {
      const t = setInterval(() => void cache.purge().catch((e: Error) => log.error(`Wasm cache purge failed: ${e.message}`)), purgeEvery);
      t.unref?.();
      signal.addEventListener("abort", () => clearInterval(t), { once: true });
    },
  };
  return { converter, hook, cache, component };
}
