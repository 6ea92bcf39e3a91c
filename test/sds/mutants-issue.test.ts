// The secret cache's issuing, continued from mutants.test.ts (mutation testing, npm run mutate --
// sds): the structured fields of the "issued" log line, the CA's root written to OUTPUT_CERTS with
// the first certificate, and a successful renewal without a readiness blocker. Literals: the
// certificate is issued at 2026-11-21T00:00:00Z for one hour; the root is the local CA's own PEM.

import { beforeAll, describe, expect, test } from "bun:test";
import type { OutputCertsWriter, OutputFiles } from "../../src/sds/output.ts";
import { until } from "./fake-clock.ts";
import { ISSUED, makeFixtures, setupCache, START, type Fixtures } from "./cache-rig.ts";

let fx: Fixtures;
beforeAll(async () => {
  fx = await makeFixtures();
}, 60_000);

/** An OUTPUT_CERTS writer that records what it was asked to write. */
function recordingOutput() {
  const calls: OutputFiles[] = [];
  const output = { dir: "/nonexistent/output-certs", write: async (f: OutputFiles) => (calls.push(f), [] as string[]) } as unknown as OutputCertsWriter;
  return { output, calls };
}

describe("SecretCache: issuing", () => {
  test("the issued line carries the resource, the expiry and the SPIFFE identity as fields", async () => {
    const s = setupCache(fx);
    await s.cache.get("default");
    expect(s.messages().filter((m) => m.startsWith(ISSUED))).toEqual([
      `${ISSUED}\tresource=default\texpires=2026-11-21T01:00:00.000Z\tspiffe=spiffe://cluster.local/ns/default/sa/app`,
    ]);
    s.cache.close();
  });

  test("OUTPUT_CERTS gets the key, the chain and the CA's root with the first certificate", async () => {
    const o = recordingOutput();
    const s = setupCache(fx, { output: o.output });
    const item = await s.cache.get("default");
    expect(o.calls).toHaveLength(1);
    expect(o.calls[0]!.key).toBe(fx.pair.keyPem);
    expect(o.calls[0]!.chain).toBe(item.certificateChain!);
    expect(o.calls[0]!.root).toBe(fx.caA.rootPem);
    s.cache.close();
  });

  test("without a readiness blocker, a successful renewal is not counted as a failure", async () => {
    const o = recordingOutput();
    const s = setupCache(fx, { output: o.output }, undefined, false);
    await s.cache.get("default");
    s.clock.advance(1_800_000); // rotation: renewed at once
    await until(() => o.calls.length === 2, "renewal written");
    expect(s.clock.nextAt()).toBe(START + 3_600_000);
    s.clock.advance(1_800_000); // the next rotation, strictly after the first renewal finished: the sentinel
    await until(() => o.calls.length === 3, "second renewal written");
    expect(s.messages().filter((m) => m.startsWith("renewing the workload certificate failed"))).toEqual([]);
    expect(s.keygens()).toBe(3);
    s.cache.close();
  });
});
