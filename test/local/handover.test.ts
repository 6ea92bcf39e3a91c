// Requests that reach the local xDS server before it can answer them: before its code and schemas
// have loaded (`initAfter` still pending: the agent's start path is not over) and before the file's
// first good load. Each is answered once the server is ready, in the order sent, never lost. The
// clients are grpc-js (an independent implementation) over loopback TCP (the relay's way) and Unix.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { connect } from "node:net";
import { memoryLogger } from "../../src/lib/log.ts";
import { createLocalXdsServer } from "../../src/local/index.ts";
import { headerValue } from "../../src/xds/h2/hpack.ts";
import { H2Session } from "../../src/xds/h2/session.ts";
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
      g.open(); // shutdown waits for the load it was held behind
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

test("requests waiting for the load are bounded by the stream's window: it is not credited until the load, then all are answered", async () => {
  const g = gate();
  const s = createLocalXdsServer({ path: file, listen: "127.0.0.1:0", log: memoryLogger().log, pollMs: 0, initAfter: g.promise });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  const [host, port] = s.address().split(":") as [string, string];
  const sock = connect({ host, port: Number(port) });
  await new Promise<void>((r, j) => sock.once("connect", r).once("error", j));
  const session = new H2Session(sock, { role: "client" });
  const headers: [string, string][] = [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"],
    [":authority", "local"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
  ];
  try {
    const st = session.request(headers);
    let received = Buffer.alloc(0);
    st.handlers = { onData: (c) => (received = Buffer.concat([received, c])) };
    // 40 CDS requests of 64 KiB each (version_info padded): 2.5 MiB, over the server's 1 MiB stream window.
    const T = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
    const m = T.encode(T.fromObject({ node: { id: "bounded" }, type_url: CDS, version_info: "v".repeat(64 * 1024) })).finish();
    const framed = Buffer.alloc(5 + m.length);
    framed.writeUInt32BE(m.length, 1);
    framed.set(m, 5);
    for (let i = 0; i < 40; i++) st.write(framed);
    // Until the window's 1 MiB has left this process (the session's writer may send a HEADERS
    // frame ahead of DATA it still holds): then the probe below reaches the server after it.
    // Until the server's SETTINGS arrive the stream may send only the default 65,535 octets, so
    // the window running out is not enough: wait for the 1 MiB to have gone.
    const writer = (session as unknown as { writer: { idle: boolean } }).writer;
    const heldBack = 40 * framed.length - 1024 * 1024;
    for (let i = 0; i < 500 && (st.bufferedBytes > heldBack || st.sendWindow > 0 || !writer.idle || sock.writableLength > 0); i++) await Bun.sleep(10);
    expect(st.sendWindow).toBe(0);
    expect(st.bufferedBytes).toBe(heldBack);
    // Sentinel: a later stream's response headers come after any credit the server gave the first.
    const probe = session.request(headers);
    let answered = false;
    probe.handlers = { onHeaders: (h) => (answered = headerValue(h, ":status") === "200") };
    for (let i = 0; i < 500 && !answered; i++) await Bun.sleep(10);
    expect(answered).toBe(true);
    expect(st.sendWindow).toBe(0);
    expect(st.bufferedBytes).toBe(heldBack);

    g.open();
    const count = () => {
      let n = 0;
      for (let at = 0; at + 5 <= received.length && at + 5 + received.readUInt32BE(at + 1) <= received.length; n++) at += 5 + received.readUInt32BE(at + 1);
      return n;
    };
    for (let i = 0; i < 1000 && count() < 40; i++) await Bun.sleep(10);
    expect(count()).toBe(40);
    expect(typeOf(received.subarray(5, 5 + received.readUInt32BE(1)))).toBe(CDS);
  } finally {
    g.open(); // shutdown waits for the load it was held behind
    session.destroy();
    ctl.abort();
    await s.stopped();
  }
}, 30_000);
