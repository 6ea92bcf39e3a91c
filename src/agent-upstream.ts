// The agent's control-plane side: the xDS relay towards istiod or, in local mode
// (LOCAL_XDS_PATH), towards the in-process file-backed xDS server. Kept apart from agent.ts so
// the relay's wiring lives in one place.

import type { AgentConfig } from "./config/agentconfig.ts";
import type { Component } from "./lib/component.ts";
import type { HealthReporter, NameTableSink, TrustBundleSink } from "./lib/interfaces.ts";
import type { LogSink } from "./lib/log.ts";
import type { Registry } from "./lib/metrics.ts";
import type { Readiness } from "./lib/readiness.ts";
import { createXdsProxy } from "./xds/proxy.ts";

export interface UpstreamDeps {
  sink: LogSink;
  registry: Registry;
  readiness: Readiness;
  nameTables?: NameTableSink;
  trustBundles?: TrustBundleSink;
  dnsEnabled: boolean;
}

export interface UpstreamSide {
  /** Started in order by the composition root. */
  components: Component[];
  /** Where VM health transitions go. */
  health: HealthReporter;
}

export function createUpstreamSide(cfg: AgentConfig, deps: UpstreamDeps): UpstreamSide {
  const xds = createXdsProxy(cfg, {
    log: deps.sink.logger("xdsproxy"),
    registry: deps.registry,
    readiness: deps.readiness,
    nameTables: deps.nameTables,
    trustBundles: deps.trustBundles,
    dnsEnabled: deps.dnsEnabled,
  });
  return { components: [xds], health: xds };
}
