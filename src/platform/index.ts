// Platform discovery for the agent: settings from the AgentConfig, the real edges, one call.

import type { AgentConfig } from "../config/agentconfig.ts";
import type { Logger } from "../lib/log.ts";
import { discoverPlatform, type DiscoveredPlatform } from "./discover.ts";
import { systemPlatformDeps } from "./system.ts";
import type { PlatformDeps, PlatformSettings } from "./types.ts";

export { discoverPlatform, discoverWithTimeout, UNKNOWN_PLATFORM, DISCOVERY_TIMEOUT_MS, type DiscoveredPlatform } from "./discover.ts";
export type { PlatformDeps, PlatformSettings, PlatformEndpoints, CloudName } from "./types.ts";

export function platformSettingsFrom(cfg: AgentConfig): PlatformSettings {
  const e = cfg.env;
  return {
    cloudPlatform: e.CLOUD_PLATFORM,
    gcpMetadata: e.GCP_METADATA,
    gcpQuotaProject: e.GCP_QUOTA_PROJECT,
    gcpZone: e.GCP_ZONE,
    gceMetadataHost: e.GCE_METADATA_HOST,
    kubernetesServiceHostSet: cfg.rawEnv.KUBERNETES_SERVICE_HOST !== undefined,
    // Istio's proxy.SupportsIPv6(): any of the proxy's addresses is IPv6.
    ipv6: cfg.node.ips.some((ip) => ip.includes(":")),
  };
}

/** Discover the platform the agent runs on (never rejects: failures mean Unknown). */
export function discoverAgentPlatform(cfg: AgentConfig, log: Logger, deps?: PlatformDeps): Promise<DiscoveredPlatform> {
  return discoverPlatform(platformSettingsFrom(cfg), deps ?? systemPlatformDeps(log));
}
