// GCE instance labels off Kubernetes (Istio's gcpEnv.Labels): the VM's service account token from
// the metadata server, then the Compute API's instance resource, both served by a fake on loopback
// speaking their REST shapes; only off Kubernetes; every failure a warning and no labels.

import { afterEach, describe, expect, test } from "bun:test";
import { discoverPlatform } from "../../src/platform/discover.ts";
import { gceInstanceLabels } from "../../src/platform/gcelabels.ts";
import { GceMetadataClient } from "../../src/platform/gcemetadata.ts";
import { fetchMetadata } from "../../src/platform/http.ts";
import type { PlatformDeps, PlatformSettings } from "../../src/platform/types.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { fakeGce, type FakeCloud, type GceValues } from "./fake-clouds.ts";

const servers: FakeCloud[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});

const VM: GceValues = {
  projectId: "vm-proj",
  numericProjectId: "42",
  zone: "us-central1-f",
  instanceName: "vm-1",
  instanceId: "7",
  attributes: {},
  accessToken: "ya29.metadata-SA-TOKEN",
  instanceLabels: { env: "prod", team: "mesh" },
};

function start(v: Partial<GceValues> = {}) {
  const gce = fakeGce({ ...VM, ...v });
  servers.push(gce);
  const mem = memoryLogger();
  const deps: PlatformDeps = {
    http: fetchMetadata,
    readSystemFile: () => undefined,
    lookupHost: async () => [],
    canDial: async () => true,
    log: mem.log,
    endpoints: { gceHost: "127.0.0.1:9", awsIPv4: "http://127.0.0.1:9", awsIPv6: "http://127.0.0.1:9", azure: "http://127.0.0.1:9", computeApi: gce.url },
  };
  const settings: PlatformSettings = {
    cloudPlatform: "gcp",
    gcpMetadata: "",
    gcpQuotaProject: "",
    gcpZone: "",
    gceMetadataHost: gce.host,
    kubernetesServiceHostSet: false,
    ipv6: false,
  };
  return { gce, deps, settings, mem };
}

describe("GCE instance labels", () => {
  test("a VM off Kubernetes gets its Compute API labels, asked with a compute.readonly token from the metadata server", async () => {
    const { gce, deps, settings, mem } = start();
    const found = await discoverPlatform(settings, deps);
    expect(found.info.isKubernetes).toBe(false);
    expect(found.info.labels).toEqual({ env: "prod", team: "mesh" });
    const tokenAsk = gce.seen.find((s) => s.path.startsWith("/computeMetadata/v1/instance/service-accounts/default/token"));
    expect(tokenAsk?.path).toBe(
      "/computeMetadata/v1/instance/service-accounts/default/token?scopes=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcompute.readonly",
    );
    expect(tokenAsk?.headers["metadata-flavor"]).toBe("Google");
    const computeAsk = gce.seen.find((s) => s.path.startsWith("/compute/v1/"));
    expect(computeAsk?.path).toBe("/compute/v1/projects/vm-proj/zones/us-central1-f/instances/vm-1");
    expect(computeAsk?.headers["authorization"]).toBe("Bearer ya29.metadata-SA-TOKEN");
    mem.log.info("sentinel after discovery");
    const text = mem.lines.join("\n");
    expect(text).toContain("sentinel after discovery");
    expect(text).not.toContain("ya29.metadata-SA-TOKEN");
  });

  test("on GKE (a cluster name) or under Kubernetes (KUBERNETES_SERVICE_HOST) nothing is asked", async () => {
    const gke = start({ attributes: { "cluster-name": "prod", "cluster-location": "us-central1" } });
    expect((await discoverPlatform(gke.settings, gke.deps)).info.labels).toEqual({});
    const k8s = start();
    expect((await discoverPlatform({ ...k8s.settings, kubernetesServiceHostSet: true }, k8s.deps)).info.labels).toEqual({});
    for (const g of [gke.gce, k8s.gce]) {
      expect(g.seen.some((s) => s.path.includes("/service-accounts/default/token"))).toBe(false);
      expect(g.seen.some((s) => s.path.startsWith("/compute/"))).toBe(false);
    }
  });

  test("no service account on the VM: a warning, no labels, and the Compute API is not asked", async () => {
    const { gce, deps, settings, mem } = start({ accessToken: undefined });
    expect((await discoverPlatform(settings, deps)).info.labels).toEqual({});
    expect(mem.lines.join("\n")).toContain("failed to find default credentials");
    expect(gce.seen.some((s) => s.path.startsWith("/compute/"))).toBe(false);
  });

  test("an instance without labels, or a refusal of the Compute API: no labels", async () => {
    const none = start({ instanceLabels: undefined });
    expect((await discoverPlatform(none.settings, none.deps)).info.labels).toEqual({});
    // A Compute API that does not accept the VM's token (another fake, another token).
    const refused = start();
    const other = start({ accessToken: "ya29.someone-else" });
    refused.deps.endpoints!.computeApi = other.gce.url;
    expect((await discoverPlatform(refused.settings, refused.deps)).info.labels).toEqual({});
    expect(refused.mem.lines.join("\n")).toContain("unable to retrieve instance labels: status 401");
  });

  test("a Compute API that does not answer is given up after the deadline", async () => {
    const { gce, deps } = start({ instanceLabels: "slow" });
    const mem = memoryLogger();
    const t0 = performance.now();
    const labels = await gceInstanceLabels(
      { project: "vm-proj", location: "us-central1-f", instance: "vm-1" },
      new GceMetadataClient(deps, gce.host),
      { ...deps, log: mem.log },
      300,
    );
    expect(labels).toEqual({});
    expect(performance.now() - t0).toBeLessThan(3_000);
    expect(mem.lines.join("\n")).toContain("context deadline exceeded for instance get request");
  });
});
