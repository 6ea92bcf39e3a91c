// What the platform probes are given: the settings (from the environment, parsed once by the
// config module) and the edges they touch (HTTP, a few small files, DNS, a TCP dial). Tests pass
// fakes or point the endpoints at local servers.

import type { Logger } from "../lib/log.ts";
import type { Clock } from "../lib/clock.ts";
import type { MetadataHttp } from "./http.ts";

export type CloudName = "gcp" | "aws" | "azure" | "none";

export interface PlatformSettings {
  /** CLOUD_PLATFORM as given ("" = probe). */
  cloudPlatform: string;
  /** GCP_METADATA: PROJECT_ID|PROJECT_NUMBER|CLUSTER_NAME|CLUSTER_ZONE. */
  gcpMetadata: string;
  gcpQuotaProject: string;
  gcpZone: string;
  /** GCE_METADATA_HOST: host[:port] of the GCE metadata server; set means "on GCE". */
  gceMetadataHost: string;
  /** KUBERNETES_SERVICE_HOST is present in the environment (even empty). */
  kubernetesServiceHostSet: boolean;
  /** The proxy has an IPv6 address: AWS is asked at [fd00:ec2::254]. */
  ipv6: boolean;
}

/** Base URLs of the link-local endpoints (overridden only by tests without root). */
export interface PlatformEndpoints {
  /** GCE's default metadata host (used when GCE_METADATA_HOST is unset). */
  gceHost: string;
  awsIPv4: string;
  awsIPv6: string;
  azure: string;
  /** Google's Compute API (GCE instance labels). */
  computeApi: string;
}

export const DEFAULT_ENDPOINTS: PlatformEndpoints = {
  gceHost: "169.254.169.254",
  awsIPv4: "http://169.254.169.254",
  awsIPv6: "http://[fd00:ec2::254]",
  azure: "http://169.254.169.254",
  computeApi: "https://compute.googleapis.com",
};

export interface PlatformDeps {
  http: MetadataHttp;
  /** A small system file (sysfs DMI entries, /etc/resolv.conf); undefined when unreadable. */
  readSystemFile(path: string): string | undefined;
  /** Addresses of a host name; rejects on failure or after timeoutMs. */
  lookupHost(name: string, timeoutMs: number): Promise<string[]>;
  /** Whether a TCP connection to host:port opens within timeoutMs. */
  canDial(host: string, port: number, timeoutMs: number): Promise<boolean>;
  log: Logger;
  endpoints?: Partial<PlatformEndpoints>;
  /** Timers of the discovery budget (default: the real clock; tests pass a manual one). */
  clock?: Pick<Clock, "timer">;
}

export function endpointsOf(deps: Pick<PlatformDeps, "endpoints">): PlatformEndpoints {
  return { ...DEFAULT_ENDPOINTS, ...deps.endpoints };
}
