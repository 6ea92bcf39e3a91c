// Microsoft Azure as Istio's pkg/bootstrap/platform/azure.go sees it: detected by the DMI system
// vendor, then the instance metadata service (`Metadata: True`) asked for its newest API version
// (never older than 2019-08-15) and for the instance document at that version.

import type { PlatformInfo } from "../config/metadata.ts";
import { endpointsOf, type PlatformDeps } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";

export const AZURE_DEFAULT_API_VERSION = "2019-08-15";
export const AZURE_REQUEST_TIMEOUT_MS = 5_000;
const PREFIX = "azure_";

/** IsAzure: /sys/class/dmi/id/sys_vendor names Microsoft. */
export function isAzure(deps: PlatformDeps): boolean {
  return (deps.readSystemFile("/sys/class/dmi/id/sys_vendor") ?? "").includes("Microsoft Corporation");
}

async function request(deps: PlatformDeps, query: string): Promise<Record<string, unknown>> {
  const url = `${endpointsOf(deps).azure}/metadata/instance?${query}`;
  let body: string;
  try {
    const res = await deps.http({ url, headers: { Metadata: "True" }, timeoutMs: AZURE_REQUEST_TIMEOUT_MS });
    if (res.status !== 200) deps.log.debug(`${url}: status ${res.status}`);
    body = res.body;
  } catch (e) {
    deps.log.debug(`Azure metadata request failed: ${errorMessage(e)}`);
    return {};
  }
  try {
    const v = JSON.parse(body);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : {};
  } catch (e) {
    deps.log.warn(`Could not unmarshal Azure metadata answer from ${url}: ${errorMessage(e)}`);
    return {};
  }
}

/** The newest of the versions the service lists, never older than the default. */
export function newestApiVersion(listing: Record<string, unknown>): string {
  let v = AZURE_DEFAULT_API_VERSION;
  const newest = listing["newest-versions"];
  if (Array.isArray(newest)) for (const x of newest) if (typeof x === "string" && x > v) v = x;
  return v;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

/** azure_name, azure_location, azure_vmId and one azure_<tag> per tag (tagsList, else `tags`). */
export function azureMetadata(compute: Record<string, unknown>): Record<string, string> {
  const md: Record<string, string> = {};
  if (str(compute.name)) md[`${PREFIX}name`] = str(compute.name);
  if (str(compute.location)) md[`${PREFIX}location`] = str(compute.location);
  if (str(compute.vmId)) md[`${PREFIX}vmId`] = str(compute.vmId);
  if (Array.isArray(compute.tagsList)) {
    for (const t of compute.tagsList) {
      if (typeof t === "object" && t !== null) md[PREFIX + str((t as Record<string, unknown>).name)] = str((t as Record<string, unknown>).value);
    }
  } else if (str(compute.tags) !== "") {
    for (const tag of str(compute.tags).split(";")) {
      const i = tag.indexOf(":");
      if (i < 0) md[PREFIX + tag] = "";
      else md[PREFIX + tag.slice(0, i)] = tag.slice(i + 1);
    }
  }
  return md;
}

/** NewAzure: API version, instance document, then metadata and locality. */
export async function azurePlatform(deps: PlatformDeps): Promise<PlatformInfo> {
  const version = newestApiVersion(await request(deps, ""));
  const doc = await request(deps, `api-version=${version}`);
  const compute = typeof doc.compute === "object" && doc.compute !== null ? (doc.compute as Record<string, unknown>) : {};
  return {
    metadata: azureMetadata(compute),
    locality: { region: str(compute.location), zone: str(compute.zone), subZone: "" },
    labels: {},
    isKubernetes: true,
  };
}
