// Start-up code released once the compiled agent has settled (src/lib/startupmemory.ts): 5 s after
// readiness last cleared (certificate warmed, upstream connected), JavaScriptCore's code is dropped
// once (Bun.shrink, then a collection) and the agent says so (debug log). What runs afterwards is
// compiled again from the binary's bytecode: the relay, the status port and the metrics still serve
// after it (the sentinels). The memory it returns is a benchmark's figure (bench/idle-sidecar.ts).
import { describe, expect, test } from "bun:test";
import { FakeIstiod } from "../support/fake-istiod.ts";
import { until, type Pod } from "../e2e/pod.ts";
import { podBesideIstiod } from "./proxyless-pod.ts";
import { CDS, EnvoyClient } from "../xds/harness.ts";

let istiod: FakeIstiod;
let pod: Pod;

const RELEASED = /start-up code released in [\d.]+ ms: resident [\d.]+ -> [\d.]+ MiB/g;
const releases = () => [...pod.tail(100_000).matchAll(RELEASED)].length;

describe("start-up code released once settled (compiled agent)", () => {
  podBesideIstiod("startup-memory", (s) => ({ pod, istiod } = s));

  test("released once after readiness clears; the relay, status port and metrics serve after it", async () => {
    const status = await until(
      pod,
      "POST /logging",
      async () => (await fetch(`http://127.0.0.1:${pod.statusPort}/logging?level=default:debug`, { method: "POST" })).status,
    );
    expect(status).toBe(200);
    // The upstream connects when a client does: until then "xds connected" is pending and nothing is released.
    expect(releases()).toBe(0);
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: CDS });
    const up = await istiod.nextStream(10_000);
    await up.nextRequest((q) => q.typeUrl === CDS);
    up.send({ typeUrl: CDS, versionInfo: "v1", resources: [{ typeUrl: CDS, value: Buffer.alloc(64, 1) }] });
    await envoy.waitFor(1, 10_000);
    await until(pod, "the release line", () => (releases() > 0 ? true : undefined), 30_000);
    // Sentinels after it: a push relayed, the readiness probe and the metrics answered, still one release.
    up.send({ typeUrl: CDS, versionInfo: "v2", resources: [{ typeUrl: CDS, value: Buffer.alloc(64, 2) }] });
    await envoy.waitFor(2, 10_000);
    expect((await fetch(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${pod.statusPort}/stats/prometheus`)).text();
    expect(metrics).toMatch(/^istio_agent_process_cpu_seconds_total \d/m);
    expect(releases()).toBe(1);
    envoy.close();
  }, 90_000);
});
