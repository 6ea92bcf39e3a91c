// OUTPUT_CERTS across a shutdown: key.pem and cert-chain.pem are written one after the other, so
// an agent exiting between them left a new key beside the old chain (a clean-clone run under load
// caught it: "key.pem's public key is not the leaf's"). The cache writes one set at a time, starts
// none after close(), and outputSettled() (what the secret manager's stop waits for) resolves only
// once the set under way is written.

import { beforeAll, expect, test } from "bun:test";
import { OutputCertsWriter, type OutputFiles } from "../../src/sds/output.ts";
import { makeFixtures, setupCache, untilAsync, type Fixtures } from "./cache-rig.ts";

/** A writer that records each call and holds it until the test releases it. */
class HeldWriter extends OutputCertsWriter {
  readonly events: string[] = [];
  private releases: (() => void)[] = [];
  constructor() {
    super("/nonexistent-output-certs", 0o600);
  }
  override async write(files: OutputFiles): Promise<string[]> {
    const n = this.events.filter((e) => e.startsWith("start")).length + 1;
    this.events.push(`start ${n}${files.key ? " key" : ""}${files.chain ? " chain" : ""}`);
    await new Promise<void>((r) => this.releases.push(r));
    this.events.push(`end ${n}`);
    return [];
  }
  held(): number {
    return this.releases.length;
  }
  release(): void {
    this.releases.shift()?.();
  }
}

let fx: Fixtures;
beforeAll(async () => {
  fx = await makeFixtures();
});

test("a stop waits for the set being written, and none starts after it", async () => {
  const writer = new HeldWriter();
  const { cache, updates } = setupCache(fx, { output: writer });
  const issued = cache.get("default");
  await untilAsync(async () => writer.held() === 1, "the first write to start");
  cache.close();
  let settled = false;
  const settling = cache.outputSettled().then(() => {
    settled = true;
    writer.events.push("settled");
  });
  // A root change after close() asks for a write right after it announces ROOTCA (the sentinel):
  // that write must never start, and the stop must still wait for the held one.
  cache.updateTrustBundle([fx.caB.rootPem]);
  await untilAsync(async () => updates.includes("ROOTCA"), "the root change");
  expect(settled).toBe(false);
  writer.events.push("released");
  writer.release();
  await settling;
  await issued;
  await cache.outputSettled();
  expect(writer.events).toEqual(["start 1 key chain", "released", "end 1", "settled"]);
});

test("writes never overlap: the next set starts after the one under way has ended", async () => {
  const writer = new HeldWriter();
  const { cache, updates } = setupCache(fx, { output: writer });
  const issued = cache.get("default");
  await untilAsync(async () => writer.held() === 1, "the first write to start");
  // The root change announces ROOTCA and asks for its write in the same turn: before, that write
  // started beside the held one.
  cache.updateTrustBundle([fx.caB.rootPem]);
  await untilAsync(async () => updates.includes("ROOTCA"), "the root change");
  expect(writer.events).toEqual(["start 1 key chain"]);
  writer.release();
  await issued;
  // The root's write follows once the first has ended.
  await untilAsync(async () => {
    writer.release();
    return writer.events.filter((e) => e.startsWith("end")).length >= 2;
  }, "the queued writes");
  let open = 0;
  for (const e of writer.events) {
    open += e.startsWith("start") ? 1 : -1;
    expect(open).toBeLessThanOrEqual(1);
  }
  expect(writer.events.slice(0, 3)).toEqual(["start 1 key chain", "end 1", "start 2"]);
  cache.close();
  writer.release();
  await cache.outputSettled();
});
