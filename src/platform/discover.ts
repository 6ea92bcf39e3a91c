// Which cloud the proxy runs on (Istio's platform.Discover): CLOUD_PLATFORM names it (aws, azure,
// gcp, none; any case), otherwise GCP, AWS and Azure are probed at once and the first to say yes
// wins; after 5 s without a yes the platform is unknown. The answer feeds node metadata
// (PLATFORM_METADATA), the locality when no label sets one, and instance labels off Kubernetes.

import type { PlatformInfo } from "../config/metadata.ts";
import { awsPlatform, isAWS } from "./aws.ts";
import { azurePlatform, isAzure } from "./azure.ts";
import { gcpPlatform, isGCP } from "./gcp.ts";
import { GceMetadataClient } from "./gcemetadata.ts";
import type { CloudName, PlatformDeps, PlatformSettings } from "./types.ts";
import { systemClock, type TimerHandle } from "../lib/clock.ts";

/** Istio's detection budget. */
export const DISCOVERY_TIMEOUT_MS = 5_000;

export interface DiscoveredPlatform {
  cloud: CloudName;
  info: PlatformInfo;
}

/** Istio's Unknown platform: no metadata, empty locality, "on Kubernetes" (no instance labels). */
export const UNKNOWN_PLATFORM: PlatformInfo = { metadata: {}, locality: { region: "", zone: "", subZone: "" }, labels: {}, isKubernetes: true };

const NAMED: Record<string, CloudName> = { aws: "aws", azure: "azure", gcp: "gcp", none: "none" };

async function build(cloud: CloudName, s: PlatformSettings, deps: PlatformDeps, gce?: GceMetadataClient): Promise<PlatformInfo> {
  switch (cloud) {
    case "gcp":
      return gcpPlatform(s, deps, gce);
    case "aws":
      return awsPlatform(s, deps);
    case "azure":
      return azurePlatform(deps);
    case "none":
      return UNKNOWN_PLATFORM;
  }
}

export async function discoverPlatform(s: PlatformSettings, deps: PlatformDeps, timeoutMs = DISCOVERY_TIMEOUT_MS): Promise<DiscoveredPlatform> {
  if (s.cloudPlatform !== "") {
    const named = NAMED[s.cloudPlatform.toLowerCase()];
    if (named) {
      deps.log.info(`platform set by CLOUD_PLATFORM=${s.cloudPlatform}`);
      return { cloud: named, info: await build(named, s, deps) };
    }
    deps.log.warn(`CLOUD_PLATFORM="${s.cloudPlatform}" is not one of aws, azure, gcp, none: discovering the platform instead`);
  }
  return discoverWithTimeout(s, deps, timeoutMs);
}

/**
 * The three probes in parallel. As in Istio, a platform counts once its probe said yes and its
 * environment was built (AWS and Azure ask their metadata services while building); GCP's
 * metadata is read after detection, outside the budget, as Istio reads it when it builds the node.
 */
export async function discoverWithTimeout(s: PlatformSettings, deps: PlatformDeps, timeoutMs: number): Promise<DiscoveredPlatform> {
  // One GCE client for detection and metadata: its OnGCE answer is reused, as in Go.
  const gce = new GceMetadataClient(deps, s.gceMetadataHost);
  const probes: [CloudName, () => Promise<boolean>][] = [
    ["gcp", () => isGCP(s, deps, gce)],
    ["aws", () => isAWS(s, deps)],
    ["azure", async () => isAzure(deps)],
  ];
  let timer: TimerHandle | undefined;
  const timedOut = new Promise<"timeout">((r) => (timer = (deps.clock ?? systemClock).timer(timeoutMs, () => r("timeout"))));
  const winner = new Promise<{ cloud: CloudName; info?: PlatformInfo } | undefined>((resolve) => {
    let pending = probes.length;
    const settle = () => {
      if (--pending === 0) resolve(undefined);
    };
    for (const [cloud, probe] of probes) {
      void probe()
        .catch(() => false)
        .then(async (yes) => {
          if (!yes) return settle();
          deps.log.info(`platform detected is ${cloud === "gcp" ? "GCP" : cloud === "aws" ? "AWS" : "Azure"}`);
          if (cloud === "gcp") return resolve({ cloud });
          resolve({ cloud, info: await build(cloud, s, deps) });
        });
    }
  });
  const r = await Promise.race([winner, timedOut]);
  timer?.cancel();
  if (r === "timeout") {
    deps.log.info("timed out waiting for platform detection, treating it as Unknown");
    return { cloud: "none", info: UNKNOWN_PLATFORM };
  }
  if (!r) return { cloud: "none", info: UNKNOWN_PLATFORM };
  return { cloud: r.cloud, info: r.info ?? (await build(r.cloud, s, deps, gce)) };
}
