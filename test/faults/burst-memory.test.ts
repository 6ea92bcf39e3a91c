// Burst memory through the compiled agent (src/xds/burstmemory.ts): after istiod pushes 48 MiB and
// goes quiet, the agent runs its two collections once and says so (debug log of the xdsproxy
// scope), naming the burst's size; while pushes keep arriving it does not. The memory figures
// themselves are a benchmark's (bench/burst-ab.ts), not a test's: they depend on the machine.
import { describe, expect, test } from "bun:test";
import { FakeIstiod } from "../support/fake-istiod.ts";
import { until, type Pod } from "../e2e/pod.ts";
import { podBesideIstiod } from "./proxyless-pod.ts";
import { CDS, EnvoyClient } from "../xds/harness.ts";

let istiod: FakeIstiod;
let pod: Pod;

const COLLECTED = /collected after a burst of ([\d.]+) MiB in [\d.]+ ms: resident [\d.]+ -> [\d.]+ -> [\d.]+ MiB/g;
const collections = () => [...pod.tail(100_000).matchAll(COLLECTED)].map((m) => Number(m[1]));

describe("burst memory (compiled agent)", () => {
  podBesideIstiod("burst", (s) => ({ pod, istiod } = s));

  test("48 MiB pushed, then quiet: one burst collected, named by its size", async () => {
    // Debug lines of the relay's scope, set at run time through the status port (as `agent debug` does).
    // The XDS socket listens before the status port opens: retry until it answers.
    const status = await until(
      pod,
      "POST /logging",
      async () => (await fetch(`http://127.0.0.1:${pod.statusPort}/logging?level=xdsproxy:debug`, { method: "POST" })).status,
    );
    expect(status).toBe(200);
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: CDS });
    const up = await istiod.nextStream(10_000);
    await up.nextRequest((q) => q.typeUrl === CDS);
    const value = Buffer.alloc(1 << 20, 7);
    for (let i = 1; i <= 48; i++) {
      if (!up.send({ typeUrl: CDS, versionInfo: `v${i}`, resources: [{ typeUrl: CDS, value }] })) await new Promise((res) => up.call.once("drain", res));
      // Pushes keep coming (every 50 ms, within the agent's 1 s quiet wait): nothing is collected meanwhile.
      if (i % 8 === 0) await Bun.sleep(50);
    }
    await envoy.waitFor(48, 60_000);
    expect(collections()).toEqual([]);
    const got = await until(pod, "the burst's collection line", () => (collections().length > 0 ? collections() : undefined), 15_000);
    expect(got.length).toBe(1);
    expect(got[0]!).toBeGreaterThanOrEqual(48);
    expect(got[0]!).toBeLessThan(49);
    // A sentinel after it: one more small push relayed, still one collection (nothing at rest, nothing for 1 KiB).
    up.send({ typeUrl: CDS, versionInfo: "after", resources: [{ typeUrl: CDS, value: Buffer.alloc(1024) }] });
    await envoy.waitFor(49, 10_000);
    await Bun.sleep(1500);
    expect(collections().length).toBe(1);
    envoy.close();
  }, 90_000);
});
