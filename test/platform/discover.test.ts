// Platform discovery against fake metadata services on loopback (no root): the endpoints are
// pointed at them, GCP through GCE_METADATA_HOST as an operator would.

import { afterEach, describe, expect, test } from "bun:test";
import { discoverPlatform, discoverWithTimeout } from "../../src/platform/discover.ts";
import { fetchMetadata } from "../../src/platform/http.ts";
import type { PlatformDeps, PlatformSettings } from "../../src/platform/types.ts";
import { memoryLogger, silentLogger } from "../../src/lib/log.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { fakeAws, fakeAzure, fakeGce, type FakeCloud } from "./fake-clouds.ts";

const servers: FakeCloud[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});
const keep = (s: FakeCloud) => (servers.push(s), s);

/** A port nothing listens on: connections are refused at once. */
const DEAD = "http://127.0.0.1:9";

function settings(over: Partial<PlatformSettings> = {}): PlatformSettings {
  return { cloudPlatform: "", gcpMetadata: "", gcpQuotaProject: "", gcpZone: "", gceMetadataHost: "", kubernetesServiceHostSet: false, ipv6: false, ...over };
}

function deps(over: Partial<PlatformDeps> & { files?: Record<string, string> } = {}): PlatformDeps {
  const files = over.files ?? {};
  return {
    http: fetchMetadata,
    readSystemFile: (p) => files[p],
    lookupHost: async () => [],
    canDial: async () => true,
    log: silentLogger(),
    endpoints: { gceHost: "127.0.0.1:9", awsIPv4: DEAD, awsIPv6: DEAD, azure: DEAD },
    ...over,
  };
}

const GCE = {
  projectId: "test-proj",
  numericProjectId: "1234567",
  zone: "us-central1-f",
  instanceName: "vm-1",
  instanceId: "887766",
  attributes: { "instance-template": "tmpl-a", "created-by": "projects/1234567/zones/us-central1-f/instanceGroupManagers/ig" },
};

describe("GCP", () => {
  test("GCE_METADATA_HOST: detected, metadata from the server with Metadata-Flavor, locality from the zone", async () => {
    const gce = keep(fakeGce(GCE));
    const found = await discoverPlatform(settings({ gceMetadataHost: gce.host }), deps());
    expect(found.cloud).toBe("gcp");
    expect(found.info.metadata).toEqual({
      gcp_project: "test-proj",
      gcp_project_number: "1234567",
      gcp_location: "us-central1-f",
      gcp_gce_instance: "vm-1",
      gcp_gce_instance_id: "887766",
      gcp_gce_instance_template: "tmpl-a",
      gcp_gce_instance_created_by: "projects/1234567/zones/us-central1-f/instanceGroupManagers/ig",
    });
    expect(found.info.locality).toEqual({ region: "us-central1", zone: "us-central1-f", subZone: "" });
    // Not GKE and not under Kubernetes: instance labels would be added.
    expect(found.info.isKubernetes).toBe(false);
    const asked = gce.seen.filter((s) => s.path.startsWith("/computeMetadata/v1/"));
    expect(asked.length).toBeGreaterThanOrEqual(8);
    for (const s of asked) expect(s.headers["metadata-flavor"]).toBe("Google");
  });

  test("GKE attributes: cluster name and location give the cluster URL, and mean Kubernetes", async () => {
    const gce = keep(fakeGce({ ...GCE, attributes: { "cluster-name": "prod", "cluster-location": "europe-west1" } }));
    const found = await discoverPlatform(settings({ gceMetadataHost: gce.host, cloudPlatform: "GCP" }), deps());
    expect(found.cloud).toBe("gcp");
    expect(found.info.metadata!.gcp_location).toBe("europe-west1");
    expect(found.info.metadata!.gcp_gke_cluster_name).toBe("prod");
    expect(found.info.metadata!.gcp_gke_cluster_url).toBe("https://container.googleapis.com/v1/projects/test-proj/locations/europe-west1/clusters/prod");
    expect(found.info.isKubernetes).toBe(true);
  });

  test("GCP_METADATA is used as is: the metadata server is never asked", async () => {
    const gce = keep(fakeGce(GCE));
    const s = settings({ gcpMetadata: "static-proj|42|c1|us-east1-b", gcpQuotaProject: "quota-p", gcpZone: "us-east1-b", gceMetadataHost: gce.host });
    const found = await discoverPlatform(s, deps());
    expect(found.cloud).toBe("gcp");
    expect(found.info.metadata).toEqual({
      gcp_project: "static-proj",
      gcp_project_number: "42",
      gcp_gke_cluster_name: "c1",
      gcp_location: "us-east1-b",
      gcp_quota_project: "quota-p",
      gcp_gke_cluster_url: "https://container.googleapis.com/v1/projects/static-proj/locations/us-east1-b/clusters/c1",
      gcp_zone: "us-east1-b",
    });
    expect(found.info.locality).toEqual({ region: "us-east1", zone: "us-east1-b", subZone: "" });
    expect(gce.seen).toEqual([]);
  });

  test("GCP_QUOTA_PROJECT and GCP_ZONE without GCP_METADATA are not static metadata", async () => {
    const found = await discoverPlatform(settings({ cloudPlatform: "gcp", gcpQuotaProject: "q", gcpZone: "us-east1-b" }), deps({ canDial: async () => false }));
    expect(found.cloud).toBe("gcp");
    expect(found.info.metadata).toEqual({});
  });

  test("locality from the pod's resolv.conf search path before the metadata server", async () => {
    const gce = keep(fakeGce(GCE));
    const resolv = "nameserver 10.0.0.10\nsearch ns.svc.cluster.local svc.cluster.local cluster.local asia-east1-a.c.p.internal c.p.internal google.internal\n";
    const found = await discoverPlatform(settings({ cloudPlatform: "gcp", gceMetadataHost: gce.host }), deps({ files: { "/etc/resolv.conf": resolv } }));
    expect(found.info.locality).toEqual({ region: "asia-east1", zone: "asia-east1-a", subZone: "" });
  });

  test("OnGCE without GCE_METADATA_HOST: the metadata IP answering with Metadata-Flavor: Google", async () => {
    const gce = keep(fakeGce(GCE));
    // Without a GCE BIOS the first probe to answer decides: DNS is kept from answering here.
    const found = await discoverPlatform(
      settings(),
      deps({ lookupHost: () => new Promise<never>(() => {}), endpoints: { gceHost: gce.host, awsIPv4: DEAD, azure: DEAD } }),
    );
    expect(found.cloud).toBe("gcp");
    expect(found.info.metadata!.gcp_project).toBe("test-proj");
    // OnGCE is decided once (Go's sync.Once): detection's answer is reused for the metadata.
    expect(gce.seen.filter((s) => s.path === "/")).toEqual([expect.objectContaining({ method: "GET", path: "/" })]);
  });
});

describe("AWS", () => {
  const AWS = {
    region: "eu-west-1",
    zone: "eu-west-1b",
    instanceId: "i-0abc",
    iamInfo: '{"Code":"Success","InstanceProfileArn":"arn:aws:iam::123:instance-profile/x"}',
  };

  test("IMDSv2: a session token from PUT /latest/api/token (TTL 60) on every request", async () => {
    const aws = keep(fakeAws({ ...AWS, mode: "v2" }));
    const found = await discoverPlatform(settings(), deps({ endpoints: { gceHost: "127.0.0.1:9", awsIPv4: aws.url, azure: DEAD } }));
    expect(found.cloud).toBe("aws");
    expect(found.info.metadata).toEqual({ aws_region: "eu-west-1", aws_availability_zone: "eu-west-1b", aws_instance_id: "i-0abc" });
    expect(found.info.locality).toEqual({ region: "eu-west-1", zone: "eu-west-1b", subZone: "" });
    const puts = aws.seen.filter((s) => s.method === "PUT");
    expect(puts.length).toBe(2); // one for the probe, one for NewAWS, as Istio
    for (const p of puts) expect(p.headers["x-aws-ec2-metadata-token-ttl-seconds"]).toBe("60");
    for (const g of aws.seen.filter((s) => s.method === "GET")) expect(g.headers["x-aws-ec2-metadata-token"]).toMatch(/^AQAEA\d-token==$/);
  });

  test("IMDSv1 fallback when the token endpoint refuses", async () => {
    const aws = keep(fakeAws({ ...AWS, mode: "v1" }));
    const found = await discoverPlatform(settings({ cloudPlatform: "aws" }), deps({ endpoints: { awsIPv4: aws.url } }));
    expect(found.info.metadata).toEqual({ aws_region: "eu-west-1", aws_availability_zone: "eu-west-1b", aws_instance_id: "i-0abc" });
    for (const g of aws.seen.filter((s) => s.method === "GET")) expect(g.headers["x-aws-ec2-metadata-token"]).toBeUndefined();
  });

  test("iam/info without an IAM ARN is not AWS", async () => {
    const aws = keep(fakeAws({ ...AWS, iamInfo: "{}", mode: "both" }));
    const found = await discoverPlatform(settings(), deps({ endpoints: { gceHost: "127.0.0.1:9", awsIPv4: aws.url, azure: DEAD } }));
    expect(found.cloud).toBe("none");
    expect(found.info.metadata).toEqual({});
  });

  test("a proxy with IPv6 asks the IPv6 endpoint only", async () => {
    const aws = keep(fakeAws({ ...AWS, mode: "both" }));
    const found = await discoverPlatform(settings({ cloudPlatform: "aws", ipv6: true }), deps({ endpoints: { awsIPv4: DEAD, awsIPv6: aws.url } }));
    expect(found.info.metadata!.aws_region).toBe("eu-west-1");
  });
});

describe("Azure", () => {
  const compute = {
    name: "vm-az",
    location: "westeurope",
    zone: "2",
    vmId: "0a1b-2c",
    tagsList: [
      { name: "env", value: "prod" },
      { name: "team", value: "mesh" },
    ],
    tags: "ignored:yes",
  };

  test("sys_vendor names Microsoft; newest API version; Metadata: True; tags", async () => {
    const az = keep(fakeAzure({ newestVersions: ["2018-10-01", "2021-02-01", "2020-09-01"], compute }));
    const found = await discoverPlatform(
      settings(),
      deps({ files: { "/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n" }, endpoints: { gceHost: "127.0.0.1:9", awsIPv4: DEAD, azure: az.url } }),
    );
    expect(found.cloud).toBe("azure");
    expect(found.info.metadata).toEqual({ azure_name: "vm-az", azure_location: "westeurope", azure_vmId: "0a1b-2c", azure_env: "prod", azure_team: "mesh" });
    expect(found.info.locality).toEqual({ region: "westeurope", zone: "2", subZone: "" });
    expect(az.seen.map((s) => s.path)).toEqual(["/metadata/instance", "/metadata/instance?api-version=2021-02-01"]);
    for (const s of az.seen) expect(s.headers.metadata).toBe("True");
  });

  test("older listed versions keep 2019-08-15; `tags` string when there is no tagsList", async () => {
    const az = keep(fakeAzure({ newestVersions: ["2018-10-01"], compute: { name: "n", tags: "a:1;b;c:x:y" } }));
    const found = await discoverPlatform(settings({ cloudPlatform: "azure" }), deps({ endpoints: { azure: az.url } }));
    expect(az.seen[1]!.path).toBe("/metadata/instance?api-version=2019-08-15");
    expect(found.info.metadata).toEqual({ azure_name: "n", azure_a: "1", azure_b: "", azure_c: "x:y" });
  });
});

describe("discovery", () => {
  test("CLOUD_PLATFORM=none asks nothing, even where a cloud would answer", async () => {
    const gce = keep(fakeGce(GCE));
    const asked: string[] = [];
    const d = deps({ files: { "/sys/class/dmi/id/sys_vendor": "Microsoft Corporation" }, endpoints: { gceHost: gce.host, awsIPv4: gce.url, azure: gce.url } });
    const found = await discoverPlatform(settings({ cloudPlatform: "None" }), {
      ...d,
      http: (r) => (asked.push(r.url), d.http(r)),
      lookupHost: async (n) => (asked.push(n), []),
    });
    expect(found).toEqual({ cloud: "none", info: { metadata: {}, locality: { region: "", zone: "", subZone: "" }, labels: {}, isKubernetes: true } });
    expect(asked).toEqual([]);
    expect(gce.seen).toEqual([]);
  });

  test("no cloud answers: Unknown as soon as every probe said no", async () => {
    const t0 = performance.now();
    const found = await discoverPlatform(settings(), deps());
    expect(found.cloud).toBe("none");
    expect(performance.now() - t0).toBeLessThan(1_000);
  });

  test("a cloud that never answers does not delay past the 5 s budget", async () => {
    const hang = () => new Promise<never>(() => {});
    const clock = new ManualClock(0);
    const { log, lines } = memoryLogger();
    // The BIOS says GCE (so OnGCE waits for its probes), the metadata IP and DNS never answer.
    const d = deps({ files: { "/sys/class/dmi/id/product_name": "Google Compute Engine\n" }, http: hang, lookupHost: hang, clock, log });
    const found = discoverPlatform(settings(), d);
    await clock.whenPending(5_000);
    clock.advance(4_999);
    expect(clock.pendingMs()).toEqual([5_000]); // the budget has not run out yet
    clock.advance(1);
    expect(clock.pending()).toBe(0);
    expect((await found).cloud).toBe("none");
    expect(lines.join("\n")).toContain("timed out waiting for platform detection, treating it as Unknown");
  });

  test("the first cloud to say yes wins without waiting for a probe that hangs", async () => {
    const aws = keep(fakeAws({ region: "r", zone: "r-a", instanceId: "i", iamInfo: "arn:aws:iam::1:x", mode: "both" }));
    const d = deps({
      files: { "/sys/class/dmi/id/product_name": "Google" },
      lookupHost: () => new Promise<never>(() => {}),
      endpoints: { gceHost: "127.0.0.1:9", awsIPv4: aws.url, azure: DEAD },
    });
    const t0 = performance.now();
    const found = await discoverWithTimeout(settings(), d, 5_000);
    expect(found.cloud).toBe("aws");
    expect(performance.now() - t0).toBeLessThan(2_000);
  });

  test("an unknown CLOUD_PLATFORM is named in a warning and discovery runs", async () => {
    const { log, lines } = (await import("../../src/lib/log.ts")).memoryLogger();
    const found = await discoverPlatform(settings({ cloudPlatform: "openstack" }), deps({ log }));
    expect(found.cloud).toBe("none");
    expect(lines.join("\n")).toContain('CLOUD_PLATFORM="openstack" is not one of aws, azure, gcp, none');
  });
});
