// Amazon EC2 as Istio's pkg/bootstrap/platform/aws.go sees it: the instance metadata service at
// 169.254.169.254 (or [fd00:ec2::254] when the proxy has IPv6), IMDSv2 first (a PUT for a session
// token, 60 s TTL) and IMDSv1 when no token comes back; every request has 100 ms.

import type { PlatformInfo } from "../config/metadata.ts";
import { endpointsOf, type PlatformDeps, type PlatformSettings } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";

export const AWS_REQUEST_TIMEOUT_MS = 100;

export const AWS_KEYS = { region: "aws_region", availabilityZone: "aws_availability_zone", instanceId: "aws_instance_id" } as const;

function base(s: PlatformSettings, deps: PlatformDeps): string {
  const ep = endpointsOf(deps);
  return s.ipv6 ? ep.awsIPv6 : ep.awsIPv4;
}

/** IMDSv2 session token, or "" (then requests go without it: IMDSv1). */
async function sessionToken(s: PlatformSettings, deps: PlatformDeps): Promise<string> {
  try {
    const res = await deps.http({
      method: "PUT",
      url: `${base(s, deps)}/latest/api/token`,
      headers: { "X-aws-ec2-metadata-token-ttl-seconds": "60" },
      timeoutMs: AWS_REQUEST_TIMEOUT_MS,
    });
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    return res.body;
  } catch (e) {
    deps.log.debug(`error in getting aws token (falling back to IMDSv1): ${errorMessage(e)}`);
    return "";
  }
}

async function headers(s: PlatformSettings, deps: PlatformDeps): Promise<Record<string, string>> {
  const token = await sessionToken(s, deps);
  return token !== "" ? { "X-aws-ec2-metadata-token": token } : {};
}

async function info(path: string, s: PlatformSettings, deps: PlatformDeps, h: Record<string, string>): Promise<string | undefined> {
  try {
    const res = await deps.http({ url: `${base(s, deps)}/latest/meta-data/${path}`, headers: h, timeoutMs: AWS_REQUEST_TIMEOUT_MS });
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    return res.body;
  } catch (e) {
    deps.log.debug(`error in getting aws info for ${path}: ${errorMessage(e)}`);
    return undefined;
  }
}

/** IsAWS: iam/info answers and names an IAM ARN. */
export async function isAWS(s: PlatformSettings, deps: PlatformDeps): Promise<boolean> {
  const body = await info("iam/info", s, deps, await headers(s, deps));
  return body !== undefined && body.includes("arn:aws:iam");
}

/** NewAWS: a fresh token, then region, zone and instance ID in turn. */
export async function awsPlatform(s: PlatformSettings, deps: PlatformDeps): Promise<PlatformInfo> {
  const h = await headers(s, deps);
  const region = (await info("placement/region", s, deps, h)) ?? "";
  const zone = (await info("placement/availability-zone", s, deps, h)) ?? "";
  const instanceId = (await info("instance-id", s, deps, h)) ?? "";
  const metadata: Record<string, string> = {};
  if (zone) metadata[AWS_KEYS.availabilityZone] = zone;
  if (region) metadata[AWS_KEYS.region] = region;
  if (instanceId) metadata[AWS_KEYS.instanceId] = instanceId;
  return { metadata, locality: { region, zone, subZone: "" }, labels: {}, isKubernetes: true };
}
