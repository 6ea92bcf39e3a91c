// The relay's side of local mode (createLocalSide): the upstream dials the in-process local server
// over loopback only once the file has loaded, holding what the relay writes until then, and its
// "no answer" limit is not istiod's 5 s. The regression it guards: a stall of the event loop longer
// than that timer (the first load under qemu: 10 s; certificate generation) used to fail the
// relay's stream UNAVAILABLE as soon as the loop was free, before the server's answer waiting on
// the socket was read.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { loadAgentConfig } from "../../src/config/load.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createLocalSide } from "../../src/local/upstream.ts";
import type { GrpcStatus } from "../../src/xds/types.ts";
import { inputs } from "../config/support.ts";
import { LDS } from "./fixtures.ts";
import { decodeAs, envoyRoot, tempDir, writeText } from "./support.ts";

let envoy: protobuf.Root;
const tmp = tempDir();
const SOTW = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

beforeAll(async () => {
  envoy = await envoyRoot();
  writeText(join(tmp.dir, "xds.yaml"), readFileSync(join(import.meta.dir, "../../examples/xds.yaml"), "utf8"));
});
afterAll(() => tmp.cleanup());

function framedLds(): Buffer {
  const T = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  const m = T.encode(T.fromObject({ node: { id: "sidecar~127.0.0.1~p.ns~ns.svc.cluster.local" }, type_url: LDS })).finish();
  const b = Buffer.alloc(5 + m.length);
  b.writeUInt32BE(m.length, 1);
  b.set(m, 5);
  return b;
}

/** The local side with its load held until `release()`; a stream's events recorded. */
async function side() {
  const base = inputs({ env: { POD_NAME: "p", POD_NAMESPACE: "ns", LOCAL_XDS_PATH: "xds.yaml" } });
  const { config } = loadAgentConfig({ ...base, root: tmp.dir });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const local = createLocalSide(config, { log: memoryLogger().log, registry: newRegistry(), readiness: new Readiness(), afterStart: gate })!;
  const ctl = new AbortController();
  await local.component.start(ctl.signal);
  const open = () => {
    const ev = { connected: false, data: [] as Buffer[], closed: undefined as { status: GrpcStatus; established: boolean } | undefined };
    const stream = local.upstream.open(
      { path: SOTW, delta: false },
      {
        onConnected: () => (ev.connected = true),
        onData: (c) => ev.data.push(Buffer.from(c)),
        onDrain: () => {},
        onClose: (status, established) => (ev.closed = { status, established }),
      },
    );
    return { stream, ev };
  };
  return { open, release, stop: async () => (ctl.abort(), await local.component.stopped?.()) };
}

async function until(f: () => boolean, ms: number, what: string): Promise<void> {
  for (const end = Date.now() + ms; !f(); await Bun.sleep(10)) if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

test("a first load that holds the event loop past the dial's 5 s timer: the relay's stream is answered, not failed", async () => {
  const s = await side();
  try {
    const { stream, ev } = s.open();
    const req = framedLds();
    expect(stream.write(req)).toBe(true);
    req.fill(0); // the relay may reuse its buffer: what was written must have been kept as it was
    s.release();
    // The loop held (as qemu's schema parse held it) for longer than the 5 s connect timer.
    const end = performance.now() + 5_300;
    while (performance.now() < end);
    await until(() => ev.data.length > 0 || ev.closed !== undefined, 15_000, "an answer or a close");
    expect(ev.closed).toBeUndefined();
    expect(ev.connected).toBe(true);
    const body = Buffer.concat(ev.data);
    const r = decodeAs(envoy, "envoy.service.discovery.v3.DiscoveryResponse", body.subarray(5, 5 + body.readUInt32BE(1)));
    expect([r.type_url, r.resources.length]).toEqual([LDS, 1]);
    stream.close();
  } finally {
    await s.stop();
  }
}, 30_000);

test("a stall of the event loop right after the dial (the load long done) does not fail the relay's stream either", async () => {
  const s = await side();
  try {
    s.release();
    const warm = s.open(); // the load has happened once this one is answered
    warm.stream.write(framedLds());
    await until(() => warm.ev.data.length > 0, 10_000, "the first stream's answer");
    const { stream, ev } = s.open();
    stream.write(framedLds());
    await Bun.sleep(0); // the dial starts (after the load's promise, a microtask)
    const end = performance.now() + 5_300; // certificate generation under qemu held the loop as long
    while (performance.now() < end);
    await until(() => ev.data.length > 0 || ev.closed !== undefined, 15_000, "an answer or a close");
    expect(ev.closed).toBeUndefined();
    expect(ev.connected).toBe(true);
    stream.close();
    warm.stream.close();
  } finally {
    await s.stop();
  }
}, 30_000);

test("a stream closed before the load is CANCELLED (never established) and never dialled; the next one is served", async () => {
  const s = await side();
  try {
    const early = s.open();
    early.stream.write(framedLds());
    early.stream.close();
    expect(early.ev.closed).toEqual({ status: { code: 1, message: "stream closed by the agent" }, established: false });
    early.stream.close(); // once
    s.release();
    const next = s.open();
    next.stream.write(framedLds());
    await until(() => next.ev.data.length > 0, 10_000, "the next stream's answer");
    expect(early.ev.data).toEqual([]);
    expect(early.ev.connected).toBe(false);
    next.stream.close();
  } finally {
    await s.stop();
  }
}, 30_000);
