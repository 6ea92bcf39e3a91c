// Run inside a network namespace where 169.254.169.254 (and fd00:ec2::254) sit on loopback:
// starts the fake metadata service of one cloud at the real link-local address, port 80, runs the
// agent's platform discovery with the real edges (fetch, DNS, TCP, no endpoint overrides) and
// prints what it found and what the fake service was asked, as JSON.
//   bun netns-probe.ts gcp|aws|aws6|azure|silent

import { discoverPlatform } from "../../src/platform/discover.ts";
import { systemPlatformDeps } from "../../src/platform/system.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { fakeAws, fakeAzure, fakeGce, type FakeCloud } from "./fake-clouds.ts";

const mode = process.argv[2] ?? "";
const at = { hostname: "169.254.169.254", port: 80 };
let cloud: FakeCloud | undefined;
let sysFiles: Record<string, string> = {};
let silent: { stop(force?: boolean): void } | undefined;
switch (mode) {
  case "gcp":
    cloud = fakeGce({ projectId: "ns-proj", numericProjectId: "777", zone: "us-west1-a", instanceName: "ns-vm", instanceId: "99", attributes: {} }, at);
    // A GCE BIOS: OnGCE waits for the metadata IP rather than a failed DNS lookup.
    sysFiles = { "/sys/class/dmi/id/product_name": "Google Compute Engine\n" };
    break;
  case "aws":
  case "aws6":
    cloud = fakeAws(
      { region: "ap-south-1", zone: "ap-south-1a", instanceId: "i-ns", iamInfo: '{"InstanceProfileArn":"arn:aws:iam::1:instance-profile/p"}', mode: "v2" },
      mode === "aws6" ? { hostname: "fd00:ec2::254", port: 80 } : at,
    );
    break;
  case "azure":
    cloud = fakeAzure({ newestVersions: ["2021-12-13"], compute: { name: "az-vm", location: "eastus", zone: "1", vmId: "id-1" } }, at);
    sysFiles = { "/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n" };
    break;
  case "silent":
    // Accepts connections at the metadata address and never answers; the BIOS says GCE.
    silent = Bun.listen({ hostname: "169.254.169.254", port: 80, socket: { data() {} } });
    sysFiles = { "/sys/class/dmi/id/product_name": "Google\n" };
    break;
  default:
    throw new Error(`unknown mode ${mode}`);
}
const real = systemPlatformDeps(silentLogger());
// The fake service and the discovery share this freshly started process: its first HTTP exchange
// compiles Bun's fetch and the fake's handler. AWS's requests have 100 ms each (Istio's), and in a
// CI run beside other work (r26) that first exchange took longer, so AWS over IPv6 read "none".
// One exchange first, outside the discovery, and forgotten: the test is about where the agent
// asks and what it reads, not about this process's start.
if (cloud) {
  await fetch(`${cloud.url}/warm-up`, { signal: AbortSignal.timeout(5000) }).catch(() => {});
  cloud.seen.length = 0;
}
const t0 = performance.now();
const found = await discoverPlatform(
  { cloudPlatform: "", gcpMetadata: "", gcpQuotaProject: "", gcpZone: "", gceMetadataHost: "", kubernetesServiceHostSet: false, ipv6: mode === "aws6" },
  { ...real, readSystemFile: (p) => sysFiles[p] ?? (p === "/etc/resolv.conf" ? "" : undefined) },
);
const tookMs = Math.round(performance.now() - t0);
console.log(JSON.stringify({ found, tookMs, seen: cloud?.seen ?? [] }));
cloud?.stop();
silent?.stop(true);
process.exit(0);
