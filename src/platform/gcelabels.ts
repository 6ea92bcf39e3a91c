// GCE instance labels (Istio's gcpEnv.Labels): on a GCE VM outside Kubernetes the instance's labels,
// read from the Compute API
//   GET https://compute.googleapis.com/compute/v1/projects/<project>/zones/<location>/instances/<name>
// with a compute.readonly access token, become STATIC_LABELS. Istio finds the token with Google's
// default credentials; on a VM those are the metadata server's service account token, which is
// what is asked here (instance/service-accounts/default/token). Everything within Istio's 5 s; any
// failure is a warning and no labels (GOOGLE_APPLICATION_CREDENTIALS and gcloud's files are not read). The access token never reaches the log.

import type { GceMetadataClient } from "./gcemetadata.ts";
import { endpointsOf, type PlatformDeps } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";

export const COMPUTE_READONLY_SCOPE = "https://www.googleapis.com/auth/compute.readonly";
/** Istio's defaultTimeout for the whole lookup. */
export const GCE_LABELS_TIMEOUT_MS = 5_000;
/** An instance resource carries its metadata items (startup scripts...): up to about 512 KiB. */
const INSTANCE_BODY_CAP = 1024 * 1024;

export interface GceInstanceRef {
  project: string;
  /** gcp_location: the zone on a VM. */
  location: string;
  instance: string;
}

/** The labels, or {} after a warning; never longer than GCE_LABELS_TIMEOUT_MS. */
export async function gceInstanceLabels(
  ref: GceInstanceRef,
  client: GceMetadataClient,
  deps: PlatformDeps,
  timeoutMs = GCE_LABELS_TIMEOUT_MS,
): Promise<Record<string, string>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<Record<string, string>>((resolve) => {
    timer = setTimeout(() => {
      deps.log.warn(`context deadline exceeded for instance get request: no labels within ${timeoutMs}ms`);
      resolve({});
    }, timeoutMs);
  });
  try {
    return await Promise.race([lookup(ref, client, deps, timeoutMs), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

async function lookup(ref: GceInstanceRef, client: GceMetadataClient, deps: PlatformDeps, timeoutMs: number): Promise<Record<string, string>> {
  let token: string;
  try {
    const raw = await client.get(`instance/service-accounts/default/token?scopes=${encodeURIComponent(COMPUTE_READONLY_SCOPE)}`, timeoutMs);
    const parsed = JSON.parse(raw) as { access_token?: unknown };
    if (typeof parsed?.access_token !== "string" || parsed.access_token === "") throw new Error("no access_token in the metadata server's answer");
    token = parsed.access_token;
  } catch (e) {
    deps.log.warn(`failed to find default credentials: ${errorMessage(e)}`);
    return {};
  }
  const path = ["projects", ref.project, "zones", ref.location, "instances", ref.instance].map((p) => encodeURIComponent(p)).join("/");
  const url = `${endpointsOf(deps).computeApi.replace(/\/+$/, "")}/compute/v1/${path}`;
  try {
    const res = await deps.http({ url, headers: { Authorization: `Bearer ${token}` }, timeoutMs: timeoutMs, capBytes: INSTANCE_BODY_CAP });
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    const labels = (JSON.parse(res.body) as { labels?: unknown })?.labels;
    if (labels === undefined || labels === null) return {};
    if (typeof labels !== "object" || Array.isArray(labels) || !Object.values(labels).every((v) => typeof v === "string"))
      throw new Error("labels is not a map of strings");
    return { ...(labels as Record<string, string>) };
  } catch (e) {
    deps.log.warn(`unable to retrieve instance labels: ${errorMessage(e)}`);
    return {};
  }
}
