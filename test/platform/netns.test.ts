// Platform discovery at the real link-local metadata address, 169.254.169.254:80 (and EC2's IPv6
// fd00:ec2::254), inside a network namespace this test creates: nothing reaches the host's network.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { BUN, must, sh } from "../iptables/netns.ts";

const NS = `cloud${process.pid}`;
const PROBE = join(import.meta.dir, "netns-probe.ts");

function probe(mode: string): {
  found: { cloud: string; info: { metadata: Record<string, string>; locality: Record<string, string> } };
  tookMs: number;
  seen: { method: string; path: string; headers: Record<string, string> }[];
} {
  const r = sh(["ip", "netns", "exec", NS, BUN, PROBE, mode]);
  if (r.code !== 0) throw new Error(`probe ${mode} failed (${r.code}): ${r.err || r.out}`);
  return JSON.parse(r.out.trim().split("\n").pop()!);
}

describeRequiring({ root: true, tools: ["ip"], apt: ["iproute2"] }, "platform discovery at 169.254.169.254 in a network namespace", () => {
  beforeAll(() => {
    sh(["ip", "netns", "del", NS]);
    must(["ip", "netns", "add", NS]);
    must(["ip", "-n", NS, "link", "set", "lo", "up"]);
    must(["ip", "-n", NS, "addr", "add", "169.254.169.254/32", "dev", "lo"]);
    must(["ip", "-n", NS, "addr", "add", "fd00:ec2::254/128", "dev", "lo", "nodad"]);
  });
  afterAll(() => {
    sh(["ip", "netns", "del", NS]);
  });

  test("GCP: OnGCE by the metadata IP's Metadata-Flavor answer, values from /computeMetadata/v1", () => {
    const r = probe("gcp");
    expect(r.found.cloud).toBe("gcp");
    expect(r.found.info.metadata).toEqual({
      gcp_project: "ns-proj",
      gcp_project_number: "777",
      gcp_location: "us-west1-a",
      gcp_gce_instance: "ns-vm",
      gcp_gce_instance_id: "99",
    });
    expect(r.found.info.locality).toEqual({ region: "us-west1", zone: "us-west1-a", subZone: "" });
  }, 20_000);

  test("AWS: IMDSv2 token PUT then meta-data GETs with the token", () => {
    const r = probe("aws");
    expect(r.found.cloud).toBe("aws");
    expect(r.found.info.metadata).toEqual({ aws_region: "ap-south-1", aws_availability_zone: "ap-south-1a", aws_instance_id: "i-ns" });
    expect(r.seen.filter((s) => s.method === "PUT").map((s) => s.path)).toEqual(["/latest/api/token", "/latest/api/token"]);
  }, 20_000);

  test("AWS over IPv6: [fd00:ec2::254] when the proxy has an IPv6 address", () => {
    const r = probe("aws6");
    expect(r.found.cloud).toBe("aws");
    expect(r.found.info.metadata.aws_instance_id).toBe("i-ns");
  }, 20_000);

  test("Azure: instance metadata with Metadata: True at the newest API version", () => {
    const r = probe("azure");
    expect(r.found.cloud).toBe("azure");
    expect(r.found.info.metadata).toEqual({ azure_name: "az-vm", azure_location: "eastus", azure_vmId: "id-1" });
    expect(r.seen.at(-1)!.path).toBe("/metadata/instance?api-version=2021-12-13");
  }, 20_000);

  test("a metadata address that accepts and never answers: Unknown within the 5 s budget", () => {
    const r = probe("silent");
    expect(r.found.cloud).toBe("none");
    expect(r.tookMs).toBeLessThan(5_800);
  }, 20_000);
});
