// The XDS socket's server (Bun's own socket, the session's writer with its reused buffer) under a
// client that stops reading: what the relay may write is bounded (write() says wait), nothing is
// lost or reordered once the client reads again, and onDrain tells the writer when to go on.

import { afterEach, expect, test } from "bun:test";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { DownstreamServer, type DownstreamCall } from "../../src/xds/downstream.ts";
import { S, T, headersFrame, rawFrame, settings, tempSocket, until, windowUpdate, RawPeer } from "./h2-support.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const TOTAL = 16 << 20;
const CHUNK = 256 * 1024;
/** The pattern's byte at offset i (independent of chunking). */
const byteAt = (i: number) => (i * 7 + (i >>> 16)) & 0xff;

test("a client that stops reading: the writer is told to wait within a bound; everything arrives in order once it reads", async () => {
  const tmp = tempSocket();
  cleanups.push(() => tmp.cleanup());
  let produced = 0;
  let drains = 0;
  let blockedAt = -1;
  let requestBytes = 0;
  let call!: DownstreamCall;
  const produce = () => {
    while (produced < TOTAL) {
      const chunk = Buffer.allocUnsafe(CHUNK);
      for (let i = 0; i < CHUNK; i++) chunk[i] = byteAt(produced + i);
      produced += CHUNK;
      if (!call.write(chunk)) {
        if (blockedAt < 0) blockedAt = produced;
        return;
      }
    }
  };
  const server = new DownstreamServer({
    socketPath: tmp.path,
    authorizer: new PeerAuthorizer("*", process.getuid?.() ?? 0),
    log: memoryLogger().log,
    onRejected: () => {},
    onCall: (c) => {
      call = c;
      queueMicrotask(produce);
      return {
        onData: (b) => (requestBytes += b.length),
        onDrain: () => {
          drains++;
          produce();
        },
        onClientGone: () => {},
      };
    },
  });
  await server.listen();
  cleanups.push(() => server.close(0));

  const peer = await RawPeer.connect(tmp.path, { settings: [[S.INITIAL_WINDOW_SIZE, 0x7fffffff]] });
  cleanups.push(() => peer.destroy());
  peer.socket.pause(); // the client reads nothing from here on
  peer.send(windowUpdate(0, 0x7fffffff - 65_535), headersFrame(1));
  await until(() => blockedAt > 0, 5000, "the writer to be told to wait");
  // Sentinels: a request byte reaches the server after everything it could write had its turn.
  // Until the kernel's buffers are full the writer may go on (its own queue drains into them);
  // from then on a sentinel's round trip sees nothing more taken.
  let sentinels = 0;
  let before = -1;
  while (produced !== before && sentinels < 50) {
    before = produced;
    peer.send(rawFrame(T.DATA, 0, 1, Buffer.from([0, 0, 0, 0, 0])));
    sentinels++;
    await until(() => requestBytes === 5 * sentinels, 5000, `sentinel ${sentinels}`);
  }
  expect(produced).toBe(before); // it stopped
  // What was written before the wait: the writer's queue limit and the stream's high-water mark
  // (256 KiB each), one chunk over, what the kernel's socket buffers hold; far below the 16 MiB offered.
  expect(produced).toBeLessThanOrEqual(4 << 20);

  peer.socket.resume();
  await until(() => produced >= TOTAL, 20_000, "the rest to be produced");
  await until(() => peer.seen.filter((f) => f.type === T.DATA && f.stream === 1).reduce((n, f) => n + f.payload.length, 0) >= TOTAL, 20_000, "all DATA");
  expect(drains).toBeGreaterThanOrEqual(1);
  let at = 0;
  let wrong = -1;
  for (const f of peer.seen) {
    if (f.type !== T.DATA || f.stream !== 1) continue;
    for (let i = 0; i < f.payload.length && wrong < 0; i++) if (f.payload[i] !== byteAt(at + i)) wrong = at + i;
    at += f.payload.length;
  }
  expect(wrong).toBe(-1);
  expect(at).toBe(TOTAL);
}, 30_000);
