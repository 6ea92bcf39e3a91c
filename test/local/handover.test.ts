// Requests that reach the local xDS server before it can answer them: before its code and schemas
// have loaded (`initAfter` still pending: the agent's start path is not over) and before the file's
// first good load. Each is answered once the server is ready, in the order sent, never lost. The
// clients are grpc-js (an independent implementation) over loopback TCP (the relay's way) and Unix.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { memoryLogger } from "../../src/lib/log.ts";
import { createLocalXdsServer } from "../../src/local/index.ts";
import { CDS, fixtureYaml, LDS } from "./fixtures.ts";
import { decodeAs, envoyRoot, RawAds, tempDir, writeText } from "./support.ts";

let envoy: protobuf.Root;
const tmp = tempDir();
const file = join(tmp.dir, "xds.yaml");

beforeAll(async () => {
  envoy = await envoyRoot();
  writeText(file, fixtureYaml());
});
afterAll(() => tmp.cleanup());

function req(typeUrl: string): Uint8Array {
  const T = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  return T.encode(T.fromObject({ node: { id: "handover" }, type_url: typeUrl })).finish();
}

const typeOf = (b: Buffer) => decodeAs(envoy, "envoy.service.discovery.v3.DiscoveryResponse", b).type_url as string;

/** A gate the test opens: the server's `initAfter`. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

for (const listen of ["127.0.0.1:0", "unix"]) {
  test(`${listen}: a request sent while the server's code is not loaded yet (initAfter pending) is answered once it is`, async () => {
    const g = gate();
    const log = memoryLogger("all:debug");
    const addr = listen === "unix" ? `unix://${join(tmp.dir, "handover.sock")}` : listen;
    const s = createLocalXdsServer({ path: file, listen: addr, log: log.log, pollMs: 0, initAfter: g.promise });
    const ctl = new AbortController();
    await s.start(ctl.signal);
    const ads = new RawAds(s.address(), "StreamAggregatedResources");
    try {
      ads.send(req(LDS));
      ads.send(req(CDS));
      // The stream is open and both requests are on the wire: the server has seen the stream.
      for (let i = 0; i < 250 && !log.lines.some((l) => l.includes("stream 1 opened")); i++) await Bun.sleep(20);
      expect(log.lines.some((l) => l.includes("SotW stream 1 opened"))).toBe(true);
      expect(log.lines.some((l) => l.includes("local xDS: serving"))).toBe(false);
      g.open();
      expect(typeOf(await ads.next(10_000))).toBe(LDS);
      expect(typeOf(await ads.next(10_000))).toBe(CDS);
    } finally {
      ads.close();
      ctl.abort();
      await s.stopped();
    }
  }, 30_000);
}

test("a connection made and a request sent in the same turn as start() returns (nothing loaded yet) is answered", async () => {
  const s = createLocalXdsServer({ path: file, listen: "127.0.0.1:0", log: memoryLogger().log, pollMs: 0 });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  const ads = new RawAds(s.address(), "DeltaAggregatedResources");
  try {
    const T = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
    ads.send(T.encode(T.fromObject({ node: { id: "early" }, type_url: CDS })).finish());
    const r = decodeAs(envoy, "envoy.service.discovery.v3.DeltaDiscoveryResponse", await ads.next(10_000));
    expect(r.type_url).toBe(CDS);
    expect(r.resources.map((x: { name: string }) => x.name)).toEqual(["a", "b"]);
  } finally {
    ads.close();
    ctl.abort();
    await s.stopped();
  }
}, 30_000);
