// The agent's control-plane side: the xDS relay towards istiod (or, in local mode, towards the
// in-process file-backed xDS server). Kept apart from agent.ts so the relay's wiring lives in one
// place.

import type { AgentConfig } from "./config/agentconfig.ts";
import type { Component } from "./lib/component.ts";
import type { HealthReporter, NameTableSink, TrustBundleSink } from "./lib/interfaces.ts";
import type { LogSink } from "./lib/log.ts";
import type { Registry } from "./lib/metrics.ts";
import type { Readiness } from "./lib/readiness.ts";

export interface UpstreamDeps {
  sink: LogSink;
  registry: Registry;
  readiness: Readiness;
  nameTables?: NameTableSink;
  trustBundles?: TrustBundleSink;
  dnsEnabled: boolean;
}

export interface UpstreamSide {
  components: Component[];
  health?: HealthReporter;
}

export function createUpstreamSide(_cfg: AgentConfig, _deps: UpstreamDeps): UpstreamSide {
  return { components: [] };
}
