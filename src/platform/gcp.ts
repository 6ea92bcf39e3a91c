// Google Cloud as Istio's pkg/bootstrap/platform/gcp.go sees it: static metadata from GCP_METADATA
// (then nothing is asked of the metadata server), otherwise the metadata server's values fetched in
// parallel; locality from GCP_ZONE, the pod's resolv.conf search path, or the server's zone.

import type { Locality, PlatformInfo } from "../config/metadata.ts";
import { GceMetadataClient } from "./gcemetadata.ts";
import { gceInstanceLabels } from "./gcelabels.ts";
import type { PlatformDeps, PlatformSettings } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";

export const GCP_KEYS = {
  project: "gcp_project",
  projectNumber: "gcp_project_number",
  cluster: "gcp_gke_cluster_name",
  clusterUrl: "gcp_gke_cluster_url",
  location: "gcp_location",
  instance: "gcp_gce_instance",
  instanceId: "gcp_gce_instance_id",
  instanceTemplate: "gcp_gce_instance_template",
  instanceCreatedBy: "gcp_gce_instance_created_by",
  quotaProject: "gcp_quota_project",
  zone: "gcp_zone",
} as const;

/** GCPStaticMetadata: empty unless GCP_METADATA is set; quota project and zone ride along with it. */
export function gcpStaticMetadata(s: Pick<PlatformSettings, "gcpMetadata" | "gcpQuotaProject" | "gcpZone">): Record<string, string> {
  if (s.gcpMetadata === "") return {};
  const md: Record<string, string> = {};
  const parts = s.gcpMetadata.split("|");
  if (parts.length === 4) {
    md[GCP_KEYS.project] = parts[0]!;
    md[GCP_KEYS.projectNumber] = parts[1]!;
    md[GCP_KEYS.cluster] = parts[2]!;
    md[GCP_KEYS.location] = parts[3]!;
  }
  if (s.gcpQuotaProject !== "") md[GCP_KEYS.quotaProject] = s.gcpQuotaProject;
  const url = gkeClusterUrl(md);
  if (url) md[GCP_KEYS.clusterUrl] = url;
  if (s.gcpZone !== "") md[GCP_KEYS.zone] = s.gcpZone;
  return md;
}

function gkeClusterUrl(md: Record<string, string>): string | undefined {
  const p = md[GCP_KEYS.project];
  const l = md[GCP_KEYS.location];
  const c = md[GCP_KEYS.cluster];
  if (p === undefined || l === undefined || c === undefined) return undefined;
  return `https://container.googleapis.com/v1/projects/${p}/locations/${l}/clusters/${c}`;
}

const ZONE_IN_RESOLV = /^search.* ([^-]+-[^-]+-[^-]+)\.c\.[^.]+\.internal/;

/** The zone in a GKE/GCE resolv.conf search line (`... us-central1-f.c.proj.internal ...`). */
export function zoneFromResolvConf(text: string): string {
  for (const line of text.split("\n")) {
    const m = ZONE_IN_RESOLV.exec(line);
    if (m) return m[1]!;
  }
  return "";
}

const ZONE_RE = /^([^-]+-[^-]+)-[^-]+$/;

/** `us-central1-f` -> `us-central1`; undefined when the zone has another shape. */
export function zoneToRegion(zone: string): string | undefined {
  return ZONE_RE.exec(zone)?.[1];
}

/** Whether Istio's IsGCP holds: static metadata given, or OnGCE. */
export async function isGCP(s: PlatformSettings, deps: PlatformDeps, client = new GceMetadataClient(deps, s.gceMetadataHost)): Promise<boolean> {
  if (Object.keys(gcpStaticMetadata(s)).length > 0) return true;
  return client.onGCE();
}

/** NewGCP + Metadata/Locality/Labels/IsKubernetes, resolved once (labels only off Kubernetes, as Istio asks for them). */
export async function gcpPlatform(s: PlatformSettings, deps: PlatformDeps, client = new GceMetadataClient(deps, s.gceMetadataHost)): Promise<PlatformInfo> {
  const metadata = await gcpMetadata(s, deps, client);
  const locality = await gcpLocality(s, deps, client);
  const isKubernetes = s.kubernetesServiceHostSet || (metadata?.[GCP_KEYS.cluster] ?? "") !== "";
  const md = metadata ?? {};
  // Off Kubernetes, Istio adds the instance's Compute API labels to STATIC_LABELS.
  const labels = isKubernetes
    ? {}
    : await gceInstanceLabels(
        { project: md[GCP_KEYS.project] ?? "", location: md[GCP_KEYS.location] ?? "", instance: md[GCP_KEYS.instance] ?? "" },
        client,
        deps,
      );
  return { metadata: md, locality, labels, isKubernetes };
}

async function gcpMetadata(s: PlatformSettings, deps: PlatformDeps, client: GceMetadataClient): Promise<Record<string, string> | undefined> {
  const stat = gcpStaticMetadata(s);
  if (Object.keys(stat).length > 0) return stat;
  const [host, port] = splitHostPort(client.host, 80);
  const fill = (await client.onGCE()) && (await deps.canDial(host, port, 5_000));
  if (!fill) {
    deps.log.warn(`cannot reach the Google Instance metadata endpoint ${host}:${port}`);
    return undefined;
  }
  const attr = (name: string) => client.get(`instance/attributes/${name}`);
  const suppliers: [string, () => Promise<string>][] = [
    [GCP_KEYS.project, () => client.getTrimmed("project/project-id")],
    [GCP_KEYS.projectNumber, () => client.getTrimmed("project/numeric-project-id")],
    [GCP_KEYS.location, () => attr("cluster-location").catch(() => client.zone())],
    [GCP_KEYS.cluster, () => attr("cluster-name")],
    [GCP_KEYS.instance, () => client.getTrimmed("instance/name")],
    [GCP_KEYS.instanceId, () => client.getTrimmed("instance/id")],
    [GCP_KEYS.instanceTemplate, () => attr("instance-template")],
    [GCP_KEYS.instanceCreatedBy, () => attr("created-by")],
  ];
  const md: Record<string, string> = {};
  await Promise.all(
    suppliers.map(async ([key, fn]) => {
      try {
        md[key] = await fn();
      } catch (e) {
        deps.log.debug(`Error fetching GCP Metadata property ${key}: ${errorMessage(e)}`);
      }
    }),
  );
  const url = gkeClusterUrl(md);
  if (url) md[GCP_KEYS.clusterUrl] = url;
  return md;
}

async function gcpLocality(s: PlatformSettings, deps: PlatformDeps, client: GceMetadataClient): Promise<Locality> {
  let zone = gcpStaticMetadata(s)[GCP_KEYS.zone] ?? "";
  if (zone === "") zone = zoneFromResolvConf(deps.readSystemFile("/etc/resolv.conf") ?? "");
  if (zone === "") {
    try {
      zone = await client.zone(10_000);
    } catch (e) {
      deps.log.warn(`Error fetching GCP zone from the metadata server: ${errorMessage(e)}`);
      return { region: "", zone: "", subZone: "" };
    }
  }
  const region = zoneToRegion(zone);
  if (region === undefined) {
    deps.log.warn(`Error fetching GCP region from zone ${zone}: unable to extract region`);
    return { region: "", zone: "", subZone: "" };
  }
  return { region, zone, subZone: "" };
}

/** `host`, `host:port`, `[v6]:port` -> [host, port]. */
export function splitHostPort(hostPort: string, defaultPort: number): [string, number] {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(hostPort);
  if (v6) return [v6[1]!, v6[2] ? Number(v6[2]) : defaultPort];
  const i = hostPort.lastIndexOf(":");
  if (i > 0 && hostPort.indexOf(":") === i) return [hostPort.slice(0, i), Number(hostPort.slice(i + 1)) || defaultPort];
  return [hostPort, defaultPort];
}
