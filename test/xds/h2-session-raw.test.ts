// H2Session against hand-built frames (RFC 9113): what a conforming peer may send (padding,
// priority, CONTINUATION, unknown frames, SETTINGS changes mid-stream) and what a broken or hostile
// one does (interrupted header blocks, window overruns, oversized frames, bad preface, PUSH_PROMISE,
// zero WINDOW_UPDATE, even stream ids, too many streams, ping floods, silent peers), plus
// backpressure and graceful close. Frames are built by tests/xds/h2-support.ts, not by src.

import { afterEach, describe, expect, test } from "bun:test";
import net from "node:net";
import { HpackDecoder, type HeaderList } from "../../src/xds/h2/hpack.ts";
import { H2Session, type H2SessionOptions, type H2Stream } from "../../src/xds/h2/session.ts";
import {
  CLIENT_PREFACE,
  E,
  F,
  FakeSocket,
  GRPC_REQUEST,
  RawPeer,
  S,
  SETTINGS_ACK,
  T,
  TestServer,
  headersFrame,
  literalBlock,
  ping,
  rawFrame,
  rst,
  settings,
  sleep,
  tempSocket,
  u32,
  until,
  windowUpdate,
  type RawFrame,
} from "./h2-support.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Rec {
  st: H2Stream;
  headers: HeaderList;
  data: Buffer[];
  trailers: HeaderList[];
  ended: boolean;
  reset?: [number, string];
  closed: boolean;
}

function record(st: H2Stream, headers: HeaderList): Rec {
  const r: Rec = { st, headers, data: [], trailers: [], ended: false, closed: false };
  st.handlers = {
    onHeaders: (h) => r.trailers.push(h),
    onData: (c) => r.data.push(Buffer.from(c)),
    onEnd: () => (r.ended = true),
    onReset: (code, why) => (r.reset = [code, why]),
    onClose: () => (r.closed = true),
  };
  return r;
}

/** Our server session on a Unix socket with a raw peer connected; the server's SETTINGS consumed and ACKed. */
async function rawServer(opts: Partial<H2SessionOptions> = {}, peerSettings: [number, number][] = [], onStream?: (r: Rec) => void) {
  const recs: Rec[] = [];
  const srv = await TestServer.start(() => ({
    ...opts,
    onStream: (st, h) => {
      const r = record(st, h);
      recs.push(r);
      onStream?.(r);
    },
  }));
  cleanups.push(() => srv.stop());
  const peer = await RawPeer.connect(srv.path, { settings: peerSettings });
  cleanups.push(() => peer.destroy());
  const first = await peer.next();
  expect(first.type).toBe(T.SETTINGS);
  expect(first.flags & F.ACK).toBe(0);
  peer.send(SETTINGS_ACK);
  const session = await srv.session();
  return { srv, peer, recs, session, serverSettings: first };
}

const dataOn = (id: number, body: Buffer | string, flags = 0) => rawFrame(T.DATA, flags, id, Buffer.from(body));
const total = (fs: RawFrame[]) => fs.reduce((n, f) => n + f.payload.length, 0);
const readSettings = (f: RawFrame) =>
  new Map(Array.from({ length: f.payload.length / 6 }, (_, i) => [f.payload.readUInt16BE(i * 6), f.payload.readUInt32BE(i * 6 + 2)] as const));

/** Take DATA frames on `id` until `n` bytes have arrived. */
async function takeData(peer: RawPeer, id: number, n: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let have = 0;
  while (have < n) {
    const f = await peer.nextOf(T.DATA, id);
    parts.push(f.payload);
    have += f.payload.length;
  }
  expect(have).toBe(n);
  return Buffer.concat(parts);
}

describe("connection setup and control frames", () => {
  test("server preface is SETTINGS with our limits; the peer's SETTINGS are ACKed", async () => {
    const { peer, serverSettings } = await rawServer({ maxConcurrentStreams: 7, streamWindow: 12345 });
    const s = readSettings(serverSettings);
    expect(s.get(S.MAX_CONCURRENT_STREAMS)).toBe(7);
    expect(s.get(S.INITIAL_WINDOW_SIZE)).toBe(12345);
    await peer.next((f) => f.type === T.SETTINGS && f.flags === F.ACK && f.payload.length === 0);
    peer.send(settings([S.MAX_FRAME_SIZE, 20000], [0x99, 1]));
    await peer.next((f) => f.type === T.SETTINGS && f.flags === F.ACK);
  });

  test("PING is answered with an ACK echoing the payload", async () => {
    const { peer } = await rawServer();
    const payload = Buffer.from("0123abcd");
    peer.send(ping(payload));
    const ack = await peer.next((f) => f.type === T.PING);
    expect(ack.flags & F.ACK).toBe(F.ACK);
    expect(ack.payload.equals(payload)).toBe(true);
  });

  test("PING of the wrong length: GOAWAY FRAME_SIZE_ERROR", async () => {
    const { peer } = await rawServer();
    peer.send(rawFrame(T.PING, 0, 0, Buffer.alloc(7)));
    expect((await peer.goaway()).code).toBe(E.FRAME_SIZE_ERROR);
    await peer.waitClosed();
  });

  test("unknown frame types and unknown flags are ignored", async () => {
    const { peer, recs } = await rawServer();
    peer.send(
      rawFrame(0xfa, 0xff, 0, Buffer.from("ignore me")),
      rawFrame(0x20, 0, 1, Buffer.alloc(40)),
      headersFrame(1, GRPC_REQUEST, F.END_HEADERS | 0x40),
      rawFrame(0xfb, 0, 1, Buffer.alloc(3)),
      dataOn(1, "ok", F.END_STREAM | 0x10),
      ping(Buffer.alloc(8, 7)),
    );
    await peer.next((f) => f.type === T.PING && f.flags === F.ACK);
    await until(() => recs[0]?.ended === true, 5000, "the stream to end");
    expect(Buffer.concat(recs[0]!.data).toString()).toBe("ok");
    expect(peer.seen.some((f) => f.type === T.GOAWAY)).toBe(false);
  });

  test("bad preface (HTTP/1.1): the connection is closed with a PROTOCOL_ERROR", async () => {
    const srv = await TestServer.start(() => ({}));
    cleanups.push(() => srv.stop());
    const peer = await RawPeer.connect(srv.path, { preface: false });
    cleanups.push(() => peer.destroy());
    peer.send(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    await peer.waitClosed();
    await until(() => srv.closes[0] !== undefined, 5000, "session close");
    expect((srv.closes[0]!.error as { code?: number }).code).toBe(E.PROTOCOL_ERROR);
    expect(srv.closes[0]!.error!.message).toContain("preface");
  });

  test("connection WINDOW_UPDATE of 0: GOAWAY PROTOCOL_ERROR", async () => {
    const { peer } = await rawServer();
    peer.send(windowUpdate(0, 0));
    expect((await peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
  });

  test("stream WINDOW_UPDATE of 0: RST_STREAM PROTOCOL_ERROR, the connection lives on", async () => {
    const { peer, recs } = await rawServer();
    peer.send(headersFrame(1), windowUpdate(1, 0));
    expect(await peer.rstCode(1)).toBe(E.PROTOCOL_ERROR);
    await until(() => recs[0]?.closed === true, 5000, "stream close");
    peer.send(ping(Buffer.alloc(8)));
    await peer.next((f) => f.type === T.PING && f.flags === F.ACK);
  });

  const badControl: [string, () => Buffer, number][] = [
    ["SETTINGS_ENABLE_PUSH of 2", () => settings([S.ENABLE_PUSH, 2]), E.PROTOCOL_ERROR],
    ["SETTINGS_MAX_FRAME_SIZE below 16384", () => settings([S.MAX_FRAME_SIZE, 16_383]), E.PROTOCOL_ERROR],
    ["SETTINGS_MAX_FRAME_SIZE above 2^24-1", () => settings([S.MAX_FRAME_SIZE, 1 << 24]), E.PROTOCOL_ERROR],
    ["SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1", () => settings([S.INITIAL_WINDOW_SIZE, 0x80000000]), E.FLOW_CONTROL_ERROR],
    ["SETTINGS of 7 bytes", () => rawFrame(T.SETTINGS, 0, 0, Buffer.alloc(7)), E.FRAME_SIZE_ERROR],
    ["SETTINGS ACK with a payload", () => rawFrame(T.SETTINGS, F.ACK, 0, Buffer.alloc(6)), E.FRAME_SIZE_ERROR],
    ["SETTINGS on a stream", () => rawFrame(T.SETTINGS, 0, 1, Buffer.alloc(0)), E.PROTOCOL_ERROR],
    ["PING on a stream", () => rawFrame(T.PING, 0, 1, Buffer.alloc(8)), E.PROTOCOL_ERROR],
    ["connection window above 2^31-1", () => windowUpdate(0, 0x7fffffff), E.FLOW_CONTROL_ERROR],
    ["WINDOW_UPDATE of 3 bytes", () => rawFrame(T.WINDOW_UPDATE, 0, 0, Buffer.alloc(3)), E.FRAME_SIZE_ERROR],
    ["RST_STREAM on stream 0", () => rst(0, E.CANCEL), E.PROTOCOL_ERROR],
    ["DATA on stream 0", () => rawFrame(T.DATA, 0, 0, Buffer.from("x")), E.PROTOCOL_ERROR],
    ["DATA on an idle stream", () => rawFrame(T.DATA, 0, 9, Buffer.from("x")), E.PROTOCOL_ERROR],
    ["HEADERS on stream 0", () => headersFrame(0), E.PROTOCOL_ERROR],
    ["PUSH_PROMISE from a client", () => rawFrame(T.PUSH_PROMISE, F.END_HEADERS, 1, u32(2)), E.PROTOCOL_ERROR],
    ["PRIORITY of 4 bytes", () => rawFrame(T.PRIORITY, 0, 1, Buffer.alloc(4)), E.FRAME_SIZE_ERROR],
  ];
  for (const [name, make, code] of badControl) {
    test(`${name}: GOAWAY with error ${code}`, async () => {
      const { peer } = await rawServer();
      peer.send(make());
      const g = await peer.goaway();
      expect(g.code).toBe(code);
      expect(g.debug.length).toBeGreaterThan(0);
      await peer.waitClosed();
    });
  }

  test("stream window pushed above 2^31-1: RST_STREAM FLOW_CONTROL_ERROR", async () => {
    const { peer } = await rawServer();
    peer.send(headersFrame(1), windowUpdate(1, 0x7fffffff));
    expect(await peer.rstCode(1)).toBe(E.FLOW_CONTROL_ERROR);
  });

  test("even stream id from a client: GOAWAY PROTOCOL_ERROR", async () => {
    const { peer, recs } = await rawServer();
    peer.send(headersFrame(2));
    expect((await peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
    expect(recs.length).toBe(0);
  });

  test("frame larger than our SETTINGS_MAX_FRAME_SIZE: GOAWAY FRAME_SIZE_ERROR (16384 itself is fine)", async () => {
    const { peer, recs } = await rawServer();
    peer.send(headersFrame(1), dataOn(1, Buffer.alloc(16384, 1)));
    await until(() => recs[0] !== undefined && recs[0].data.reduce((n, b) => n + b.length, 0) === 16384, 5000, "16384 bytes");
    peer.send(dataOn(1, Buffer.alloc(16385, 1)));
    expect((await peer.goaway()).code).toBe(E.FRAME_SIZE_ERROR);
  });
});

describe("header blocks", () => {
  test("PADDED + PRIORITY HEADERS and PADDED DATA are parsed", async () => {
    const { peer, recs } = await rawServer();
    const block = literalBlock(GRPC_REQUEST);
    const hdr = Buffer.concat([Buffer.from([7]), Buffer.from([0x80, 0, 0, 0, 15]), block, Buffer.alloc(7)]);
    peer.send(
      rawFrame(T.HEADERS, F.PADDED | F.PRIORITY | F.END_HEADERS, 1, hdr),
      rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([20]), Buffer.from("hello padded"), Buffer.alloc(20)])),
      rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([5]), Buffer.alloc(5)])),
      rawFrame(T.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 0, 200])),
      rawFrame(T.DATA, F.PADDED | F.END_STREAM, 1, Buffer.concat([Buffer.from([0]), Buffer.from(" world")])),
    );
    await until(() => recs[0]?.ended === true, 5000, "the stream to end");
    expect(recs[0]!.headers).toEqual(GRPC_REQUEST);
    expect(Buffer.concat(recs[0]!.data).toString()).toBe("hello padded world");
  });

  test("padding longer than the frame: PROTOCOL_ERROR", async () => {
    const { peer } = await rawServer();
    peer.send(headersFrame(1), rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([10]), Buffer.from("abc")])));
    expect((await peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
  });

  test("HEADERS + CONTINUATION + CONTINUATION make one block; END_STREAM on HEADERS ends the stream", async () => {
    const { peer, recs } = await rawServer();
    const block = literalBlock([...GRPC_REQUEST, ["x-big", "b".repeat(3000)]]);
    peer.send(
      rawFrame(T.HEADERS, F.END_STREAM, 1, block.subarray(0, 10)),
      rawFrame(T.CONTINUATION, 0, 1, block.subarray(10, 2000)),
      rawFrame(T.CONTINUATION, F.END_HEADERS, 1, block.subarray(2000)),
    );
    await until(() => recs[0]?.ended === true, 5000, "the stream to end");
    expect(recs[0]!.headers).toEqual([...GRPC_REQUEST, ["x-big", "b".repeat(3000)]]);
  });

  test("a frame inside a header block: GOAWAY PROTOCOL_ERROR", async () => {
    const { peer } = await rawServer();
    const block = literalBlock(GRPC_REQUEST);
    peer.send(rawFrame(T.HEADERS, 0, 1, block.subarray(0, 5)), ping(Buffer.alloc(8)), rawFrame(T.CONTINUATION, F.END_HEADERS, 1, block.subarray(5)));
    expect((await peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
  });

  test("CONTINUATION for another stream, or with no HEADERS before it: PROTOCOL_ERROR", async () => {
    const a = await rawServer();
    const block = literalBlock(GRPC_REQUEST);
    a.peer.send(rawFrame(T.HEADERS, 0, 1, block.subarray(0, 5)), rawFrame(T.CONTINUATION, F.END_HEADERS, 3, block.subarray(5)));
    expect((await a.peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
    const b = await rawServer();
    b.peer.send(rawFrame(T.CONTINUATION, F.END_HEADERS, 1, block));
    expect((await b.peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
  });

  test("a header block growing past twice maxHeaderListSize through CONTINUATION: GOAWAY ENHANCE_YOUR_CALM", async () => {
    const { peer } = await rawServer({ maxHeaderListSize: 1000 });
    peer.send(rawFrame(T.HEADERS, 0, 1, Buffer.alloc(1500)), rawFrame(T.CONTINUATION, 0, 1, Buffer.alloc(1500)));
    expect((await peer.goaway()).code).toBe(E.ENHANCE_YOUR_CALM);
  });

  test("an undecodable header block: GOAWAY COMPRESSION_ERROR", async () => {
    const { peer } = await rawServer();
    peer.send(rawFrame(T.HEADERS, F.END_HEADERS, 1, Buffer.from([0xbe]))); // dynamic index 62, empty table
    expect((await peer.goaway()).code).toBe(E.COMPRESSION_ERROR);
  });

  test("after the peer lowers SETTINGS_HEADER_TABLE_SIZE, our next header block starts with a size update", async () => {
    const { peer } = await rawServer({}, [[S.HEADER_TABLE_SIZE, 0]], (r) => r.st.respond([[":status", "200"]]));
    peer.send(headersFrame(1));
    const h = await peer.nextOf(T.HEADERS, 1);
    expect(h.payload[0]).toBe(0x20); // dynamic table size update to 0
    expect(new HpackDecoder().decode(h.payload)).toEqual([[":status", "200"]]);
  });

  test("every byte in its own chunk, or random chunks: same headers, data and replies", async () => {
    const block = literalBlock([...GRPC_REQUEST, ["x-chunk", "c".repeat(500)]]);
    const wire = Buffer.concat([
      CLIENT_PREFACE,
      settings([S.INITIAL_WINDOW_SIZE, 1 << 20]),
      rawFrame(T.HEADERS, F.PADDED | F.PRIORITY, 1, Buffer.concat([Buffer.from([3]), Buffer.from([0, 0, 0, 0, 9]), block.subarray(0, 100), Buffer.alloc(3)])),
      rawFrame(T.CONTINUATION, F.END_HEADERS, 1, block.subarray(100)),
      rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([4]), Buffer.from("first "), Buffer.alloc(4)])),
      ping(Buffer.from("pingpong")),
      rawFrame(T.DATA, 0, 1, Buffer.from("second ")),
      rawFrame(T.DATA, F.PADDED | F.END_STREAM, 1, Buffer.concat([Buffer.from([2]), Buffer.from("third"), Buffer.alloc(2)])),
    ]);
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 48271) % 0x7fffffff) % n;
    for (const chunking of ["byte", "random", "whole"] as const) {
      const sock = new FakeSocket();
      const recs: Rec[] = [];
      const s = new H2Session(sock, { role: "server", onStream: (st, h) => recs.push(record(st, h)) });
      for (let p = 0; p < wire.length;) {
        const n = chunking === "byte" ? 1 : chunking === "whole" ? wire.length : 1 + rnd(40);
        sock.feed(wire.subarray(p, p + n));
        p += n;
      }
      await sleep(0);
      expect(s.closed).toBe(false);
      expect(recs.length).toBe(1);
      expect(recs[0]!.headers).toEqual([...GRPC_REQUEST, ["x-chunk", "c".repeat(500)]]);
      expect(Buffer.concat(recs[0]!.data).toString()).toBe("first second third");
      expect(recs[0]!.ended).toBe(true);
      const out = sock.frames();
      expect(out.some((f) => f.type === T.GOAWAY)).toBe(false);
      expect(out.find((f) => f.type === T.PING)?.payload.toString()).toBe("pingpong");
      expect(out.some((f) => f.type === T.SETTINGS && f.flags === F.ACK)).toBe(true);
      s.destroy();
    }
  });
});

describe("flow control", () => {
  test("DATA beyond the stream window: FLOW_CONTROL_ERROR", async () => {
    const { peer } = await rawServer({ streamWindow: 1000 });
    peer.send(headersFrame(1), dataOn(1, Buffer.alloc(1500)));
    const f = await peer.next((x) => x.type === T.GOAWAY || (x.type === T.RST_STREAM && x.stream === 1));
    expect(f.payload.readUInt32BE(f.type === T.GOAWAY ? 4 : 0)).toBe(E.FLOW_CONTROL_ERROR);
  });

  test("DATA beyond the connection window: GOAWAY FLOW_CONTROL_ERROR", async () => {
    const { peer } = await rawServer({ maxFrameSize: 100_000, connectionWindow: 65_535 });
    peer.send(headersFrame(1), dataOn(1, Buffer.alloc(70_000)));
    expect((await peer.goaway()).code).toBe(E.FLOW_CONTROL_ERROR);
  });

  test("SETTINGS_INITIAL_WINDOW_SIZE changes mid-stream move the send window (up, then below zero)", async () => {
    const body = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
    const { peer } = await rawServer({}, [[S.INITIAL_WINDOW_SIZE, 100]], (r) => {
      r.st.respond([[":status", "200"]]);
      r.st.write(body);
      r.st.end([["grpc-status", "0"]]);
    });
    peer.send(headersFrame(1));
    const got: Buffer[] = [await takeData(peer, 1, 100)];
    await sleep(100);
    expect(total(peer.frames.filter((f) => f.type === T.DATA))).toBe(0);
    peer.send(settings([S.INITIAL_WINDOW_SIZE, 600])); // +500
    got.push(await takeData(peer, 1, 500));
    peer.send(settings([S.INITIAL_WINDOW_SIZE, 300])); // window 0 - 300 = -300
    peer.send(windowUpdate(1, 400)); // -300 + 400 = 100
    got.push(await takeData(peer, 1, 100));
    await sleep(100);
    expect(total(peer.frames.filter((f) => f.type === T.DATA))).toBe(0);
    peer.send(windowUpdate(1, 10_000));
    got.push(await takeData(peer, 1, 300));
    expect(Buffer.concat(got).equals(body)).toBe(true);
    expect((await peer.nextOf(T.HEADERS, 1)).flags & F.END_STREAM).toBe(0); // response headers
    const trailers = await peer.nextOf(T.HEADERS, 1);
    expect(trailers.flags & F.END_STREAM).toBe(F.END_STREAM);
  });

  test("the peer's SETTINGS_MAX_FRAME_SIZE bounds our DATA frames", async () => {
    const { peer } = await rawServer(
      {},
      [
        [S.MAX_FRAME_SIZE, 20_000],
        [S.INITIAL_WINDOW_SIZE, 1 << 20],
      ],
      (r) => {
        r.st.respond([[":status", "200"]]);
        r.st.write(Buffer.alloc(50_000, 3));
      },
    );
    peer.send(windowUpdate(0, 1 << 20), headersFrame(1));
    await takeData(peer, 1, 50_000);
    const sizes = peer.seen.filter((f) => f.type === T.DATA).map((f) => f.payload.length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(20_000);
  });

  test("the connection window is shared; a connection WINDOW_UPDATE resumes every blocked stream", async () => {
    const { peer } = await rawServer({}, [[S.INITIAL_WINDOW_SIZE, 1 << 20]], (r) => {
      r.st.respond([[":status", "200"]]);
      r.st.write(Buffer.alloc(50_000, r.st.id));
      r.st.end([["grpc-status", "0"]]);
    });
    peer.send(headersFrame(1), headersFrame(3));
    await until(() => total(peer.frames.filter((f) => f.type === T.DATA)) === 65_535, 5000, "the connection window used up");
    await sleep(100);
    expect(total(peer.frames.filter((f) => f.type === T.DATA))).toBe(65_535);
    peer.send(windowUpdate(0, 1 << 20));
    const a = await takeData(peer, 1, 50_000);
    const b = await takeData(peer, 3, 50_000);
    expect(a.every((x) => x === 1) && b.every((x) => x === 3)).toBe(true);
  });

  test("padded DATA is credited back to the stream: a padding sender is never starved", async () => {
    const sock = new FakeSocket();
    let got = 0;
    new H2Session(sock, { role: "server", streamWindow: 16_384, onStream: (st) => (st.handlers = { onData: (c) => (got += c.length) }) });
    sock.feed(Buffer.concat([CLIENT_PREFACE, settings(), headersFrame(1)]));
    let streamWin = 16_384;
    let connWin = 65_535;
    let seen = 0;
    const frameLen = 256; // 1 pad-length octet + 1 data octet + 254 padding
    let sent = 0;
    while (sent < 300) {
      await sleep(0);
      const out = sock.frames();
      for (const f of out.slice(seen)) {
        if (f.type === T.WINDOW_UPDATE) {
          if (f.stream === 0) connWin += f.payload.readUInt32BE(0);
          if (f.stream === 1) streamWin += f.payload.readUInt32BE(0);
        }
      }
      seen = out.length;
      if (streamWin < frameLen || connWin < frameLen) break; // stalled: no credit came back
      sock.feed(rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([254, 0x61]), Buffer.alloc(254)])));
      streamWin -= frameLen;
      connWin -= frameLen;
      sent++;
    }
    expect(sent).toBe(300);
    expect(got).toBe(300);
  });
});

describe("streams", () => {
  test("more streams than MAX_CONCURRENT_STREAMS: REFUSED_STREAM; a slot freed is reusable", async () => {
    const { peer, recs } = await rawServer({ maxConcurrentStreams: 2 });
    peer.send(headersFrame(1), headersFrame(3), headersFrame(5));
    expect(await peer.rstCode(5)).toBe(E.REFUSED_STREAM);
    expect(recs.length).toBe(2);
    peer.send(rst(1, E.CANCEL));
    await until(() => recs[0]!.closed, 5000, "stream 1 closed");
    expect(recs[0]!.reset?.[0]).toBe(E.CANCEL);
    peer.send(headersFrame(7));
    await until(() => recs.length === 3, 5000, "stream 7 accepted");
    expect(recs[2]!.st.id).toBe(7);
  });

  test("a stream opened after our GOAWAY is refused, not served", async () => {
    const { peer, recs, session } = await rawServer();
    peer.send(headersFrame(1));
    await until(() => recs.length === 1, 5000, "stream 1");
    session.close(5000);
    expect((await peer.goaway()).last).toBe(1);
    peer.send(headersFrame(3), ping(Buffer.alloc(8, 3)));
    await peer.next((f) => f.type === T.PING && f.flags === F.ACK);
    expect(recs.length).toBe(1); // stream 3 never reaches onStream
    expect(await peer.rstCode(3, 2000)).toBe(E.REFUSED_STREAM);
  });

  test("a stream the session resets for a peer error is closed and RST_STREAM sent", async () => {
    const { peer, recs } = await rawServer({ streamWindow: 1000 });
    peer.send(headersFrame(1), dataOn(1, Buffer.alloc(1500)));
    expect(await peer.rstCode(1)).toBe(E.FLOW_CONTROL_ERROR);
    await until(() => recs[0]!.closed, 5000, "stream close");
  });

  test("a stream reset for the peer's flow-control violation fires onReset", async () => {
    const { peer, recs } = await rawServer({ streamWindow: 1000 });
    peer.send(headersFrame(1), dataOn(1, Buffer.alloc(1500)));
    expect(await peer.rstCode(1)).toBe(E.FLOW_CONTROL_ERROR);
    await until(() => recs[0]!.closed, 5000, "stream close");
    expect(recs[0]!.reset?.[0]).toBe(E.FLOW_CONTROL_ERROR);
  });

  test("a stream reset for the peer's WINDOW_UPDATE of 0 fires onReset", async () => {
    const { peer, recs } = await rawServer();
    peer.send(headersFrame(1), windowUpdate(1, 0));
    expect(await peer.rstCode(1)).toBe(E.PROTOCOL_ERROR);
    await until(() => recs[0]!.closed, 5000, "stream close");
    expect(recs[0]!.reset?.[0]).toBe(E.PROTOCOL_ERROR);
  });
});

describe("pings and keepalive", () => {
  test("ping flood: more than maxStrikes too-close PINGs -> GOAWAY ENHANCE_YOUR_CALM too_many_pings", async () => {
    const { peer, srv } = await rawServer({ pingPolicy: { minIntervalMs: 60_000, maxStrikes: 2 } });
    peer.send(ping(Buffer.alloc(8, 1)), ping(Buffer.alloc(8, 2)), ping(Buffer.alloc(8, 3)), ping(Buffer.alloc(8, 4)));
    const g = await peer.goaway();
    expect(g.code).toBe(E.ENHANCE_YOUR_CALM);
    expect(g.debug).toBe("too_many_pings");
    const acks = peer.seen.filter((f) => f.type === T.PING && f.flags === F.ACK).map((f) => f.payload[0]);
    expect(acks).toEqual([1, 2, 3]);
    await peer.waitClosed();
    await until(() => srv.closes[0] !== undefined, 5000, "session close");
    expect((srv.closes[0]!.error as { code?: number }).code).toBe(E.ENHANCE_YOUR_CALM);
  });

  test("sending DATA starts the strike count over; response HEADERS do not (a new stream before each PING is no way around it)", async () => {
    let st: H2Stream | undefined;
    const { peer } = await rawServer({ pingPolicy: { minIntervalMs: 60_000, maxStrikes: 2 } }, [], (r) => (st = r.st));
    peer.send(headersFrame(1), ping(Buffer.alloc(8, 1)), ping(Buffer.alloc(8, 2))); // 1 strike
    await peer.next((f) => f.type === T.PING && f.payload[0] === 2);
    await until(() => st !== undefined, 5000, "stream");
    st!.write(Buffer.from("x"));
    await peer.nextOf(T.DATA, 1);
    peer.send(ping(Buffer.alloc(8, 3)), ping(Buffer.alloc(8, 4)), ping(Buffer.alloc(8, 5))); // fresh: 2 strikes, allowed
    await peer.next((f) => f.type === T.PING && f.payload[0] === 5);
    st!.respond([[":status", "200"]]);
    await peer.nextOf(T.HEADERS, 1);
    peer.send(ping(Buffer.alloc(8, 6))); // HEADERS did not start over: strike 3 > 2
    expect((await peer.goaway()).code).toBe(E.ENHANCE_YOUR_CALM);
  });

  test("keepalive: a peer that never answers PING is dropped with an error naming keepalive", async () => {
    const { peer, srv } = await rawServer({ keepalive: { intervalMs: 40, timeoutMs: 150 } });
    const p = await peer.next((f) => f.type === T.PING, 5000);
    expect(p.flags & F.ACK).toBe(0);
    await peer.waitClosed();
    await until(() => srv.closes[0] !== undefined, 5000, "session close");
    expect(srv.closes[0]!.error?.message).toMatch(/keepalive/);
  });

  test("keepalive: a peer that answers stays connected", async () => {
    const { peer, session } = await rawServer({ keepalive: { intervalMs: 30, timeoutMs: 3000 } });
    for (let i = 0; i < 3; i++) {
      const p = await peer.next((f) => f.type === T.PING && f.flags === 0, 5000);
      peer.send(ping(p.payload, true));
    }
    expect(session.closed).toBe(false);
  });
});

describe("backpressure", () => {
  test("pause() withholds stream WINDOW_UPDATEs so the peer stalls at the window; resume() releases them", async () => {
    const { peer, recs } = await rawServer({ streamWindow: 32_768 }, [], (r) => r.st.pause());
    peer.send(headersFrame(1), dataOn(1, Buffer.alloc(16_384, 1)), dataOn(1, Buffer.alloc(16_384, 2)));
    await until(() => recs[0] !== undefined && Buffer.concat(recs[0].data).length === 32_768, 5000, "the whole window delivered while paused");
    await sleep(150);
    expect(peer.seen.some((f) => f.type === T.WINDOW_UPDATE && f.stream === 1)).toBe(false);
    recs[0]!.st.resume();
    const wu = await peer.nextOf(T.WINDOW_UPDATE, 1);
    expect(wu.payload.readUInt32BE(0)).toBe(32_768);
    peer.send(dataOn(1, Buffer.alloc(16_384, 3), F.END_STREAM));
    await until(() => recs[0]!.ended, 5000, "stream end");
    expect(Buffer.concat(recs[0]!.data).length).toBe(49_152);
  });

  test("write() returns false above the high-water mark; onDrain fires once the peer opens its window", async () => {
    let drained = 0;
    const results: boolean[] = [];
    const { peer, recs } = await rawServer({ highWaterMark: 64 * 1024 }, [[S.INITIAL_WINDOW_SIZE, 0]], (r) => {
      r.st.handlers.onDrain = () => drained++;
      r.st.respond([[":status", "200"]]);
      results.push(r.st.write(Buffer.alloc(40 * 1024, 1)));
      results.push(r.st.write(Buffer.alloc(40 * 1024, 2)));
    });
    peer.send(headersFrame(1));
    await until(() => results.length === 2, 5000, "writes");
    expect(results).toEqual([true, false]);
    expect(recs[0]!.st.bufferedBytes).toBe(80 * 1024);
    await sleep(100);
    expect(drained).toBe(0);
    expect(peer.seen.some((f) => f.type === T.DATA)).toBe(false);
    peer.send(windowUpdate(1, 1 << 20), windowUpdate(0, 1 << 20));
    const body = await takeData(peer, 1, 80 * 1024);
    expect(body.subarray(0, 40 * 1024).every((b) => b === 1) && body.subarray(40 * 1024).every((b) => b === 2)).toBe(true);
    await until(() => drained === 1, 5000, "onDrain");
  });
});

describe("closing", () => {
  test("close(grace): GOAWAY first, queued DATA and trailers still delivered, then the socket ends", async () => {
    const { peer, recs, session, srv } = await rawServer({}, [[S.INITIAL_WINDOW_SIZE, 0]], (r) => {
      r.st.respond([[":status", "200"]]);
      r.st.write(Buffer.alloc(30_000, 9));
      r.st.end([["grpc-status", "0"]]);
    });
    peer.send(headersFrame(1));
    await until(() => recs.length === 1, 5000, "stream");
    await peer.nextOf(T.HEADERS, 1);
    session.close(10_000);
    const g = await peer.goaway();
    expect(g).toEqual({ last: 1, code: E.NO_ERROR, debug: "" });
    expect(session.closed).toBe(false);
    peer.send(windowUpdate(1, 100_000));
    await takeData(peer, 1, 30_000);
    const trailers = await peer.nextOf(T.HEADERS, 1);
    expect(trailers.flags & F.END_STREAM).toBe(F.END_STREAM);
    expect(new HpackDecoder().decode(trailers.payload)).toEqual([["grpc-status", "0"]]);
    const iGoaway = peer.seen.findIndex((f) => f.type === T.GOAWAY);
    const iData = peer.seen.findIndex((f) => f.type === T.DATA);
    expect(iGoaway).toBeLessThan(iData);
    await peer.waitClosed();
    await until(() => srv.closes[0] !== undefined, 5000, "session close");
  });

  /** A server whose one stream answered and ended; the peer's half stays open; close(grace) called. */
  async function closingAfterAnswer(streamWindow?: number) {
    const r = await rawServer(streamWindow ? { streamWindow } : {}, [], (rec) => {
      rec.st.respond([[":status", "200"]]);
      rec.st.end([["grpc-status", "0"]]);
    });
    r.peer.send(headersFrame(1));
    await until(() => r.recs.length === 1, 5000, "stream");
    r.session.close(10_000);
    await r.peer.goaway();
    return r;
  }

  test("close(grace) is reported clean when the peer never half-closed its stream", async () => {
    const { peer, srv } = await closingAfterAnswer();
    await peer.waitClosed();
    await until(() => srv.closes[0] !== undefined, 5000, "session close");
    expect(srv.closes[0]!.error?.message).toBeUndefined();
  });

  test("after close(grace) ended the socket, DATA still arriving does not turn the close into an error", async () => {
    const { peer, recs, srv } = await closingAfterAnswer(65_535);
    await peer.next((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0);
    for (let i = 0; i < 4; i++) peer.send(dataOn(1, Buffer.alloc(16_000)));
    await peer.waitClosed();
    await until(() => srv.closes[0] !== undefined, 5000, "session close");
    expect(srv.closes[0]!.error?.message).toBeUndefined();
    expect(recs[0]!.reset).toBeUndefined();
  });

  test("close(0): open streams are reset with CANCEL after GOAWAY", async () => {
    const { peer, recs, session } = await rawServer();
    peer.send(headersFrame(1));
    await until(() => recs.length === 1, 5000, "stream");
    session.close(0);
    expect((await peer.goaway()).code).toBe(E.NO_ERROR);
    expect(await peer.rstCode(1)).toBe(E.CANCEL);
    await peer.waitClosed();
  });

  test("destroy(): every open stream gets onReset, the socket closes", async () => {
    const { peer, recs, session } = await rawServer();
    peer.send(headersFrame(1), headersFrame(3));
    await until(() => recs.length === 2, 5000, "streams");
    session.destroy();
    expect(recs.map((r) => r.reset !== undefined && r.closed)).toEqual([true, true]);
    expect(session.streams.size).toBe(0);
    await peer.waitClosed();
  });
});

/** Our client session against a raw server peer on a Unix socket. */
async function rawClient(opts: Partial<H2SessionOptions> = {}) {
  const tmp = tempSocket();
  let peer!: RawPeer;
  const server = net.createServer((sock) => (peer = new RawPeer(sock, true)));
  await new Promise<void>((r) => server.listen(tmp.path, () => r()));
  const sock = net.connect(tmp.path);
  let closed: { error: Error | undefined } | undefined;
  const session = new H2Session(sock, { role: "client", ...opts, onClose: (error) => (closed = { error }) });
  cleanups.push(() => {
    session.destroy();
    peer?.destroy();
    server.close();
    tmp.cleanup();
  });
  await until(() => peer !== undefined, 5000, "the client to connect");
  const first = await peer.next();
  expect(first.type).toBe(T.SETTINGS);
  peer.send(settings(), SETTINGS_ACK);
  return { peer, session, closed: () => closed };
}

describe("client role against a raw server", () => {
  test("PUSH_PROMISE: GOAWAY PROTOCOL_ERROR and the session closes with an error", async () => {
    const { peer, session, closed } = await rawClient();
    const r = record(session.request(GRPC_REQUEST), []);
    await peer.nextOf(T.HEADERS, 1);
    peer.send(
      rawFrame(
        T.PUSH_PROMISE,
        F.END_HEADERS,
        1,
        Buffer.concat([
          u32(2),
          literalBlock([
            [":method", "GET"],
            [":path", "/p"],
            [":scheme", "http"],
            [":authority", "x"],
          ]),
        ]),
      ),
    );
    expect((await peer.goaway()).code).toBe(E.PROTOCOL_ERROR);
    await until(() => closed() !== undefined, 5000, "session close");
    expect(closed()!.error).toBeDefined();
    expect(r.reset?.[0]).toBe(E.PROTOCOL_ERROR);
  });

  test("keepalive: an unanswered PING closes the client session with an error naming keepalive", async () => {
    const { peer, closed } = await rawClient({ keepalive: { intervalMs: 40, timeoutMs: 150 } });
    await peer.next((f) => f.type === T.PING && f.flags === 0);
    await until(() => closed() !== undefined, 5000, "session close");
    expect(closed()!.error?.message).toMatch(/keepalive/);
  });

  test("large request headers go out as HEADERS + CONTINUATION within the peer's frame size", async () => {
    const { peer, session } = await rawClient();
    const hs: HeaderList = [...GRPC_REQUEST, ["x-big", "z".repeat(40_000)]];
    const st = session.request(hs);
    st.write(Buffer.alloc(50_000, 5));
    st.end();
    const frames: RawFrame[] = [await peer.nextOf(T.HEADERS, 1)];
    while (!(frames[frames.length - 1]!.flags & F.END_HEADERS)) frames.push(await peer.nextOf(T.CONTINUATION, 1));
    expect(frames.length).toBeGreaterThanOrEqual(3);
    for (const f of frames) expect(f.payload.length).toBeLessThanOrEqual(16_384);
    expect(new HpackDecoder().decode(Buffer.concat(frames.map((f) => f.payload)))).toEqual(hs);
    let n = 0;
    for (;;) {
      const d = await peer.nextOf(T.DATA, 1);
      expect(d.payload.length).toBeLessThanOrEqual(16_384);
      n += d.payload.length;
      if (d.flags & F.END_STREAM) break;
    }
    expect(n).toBe(50_000);
  });

  test("GOAWAY with an error code resets every stream with that code and ends the session", async () => {
    const { peer, session, closed } = await rawClient();
    const a = record(session.request(GRPC_REQUEST), []);
    const b = record(session.request(GRPC_REQUEST), []);
    await peer.nextOf(T.HEADERS, 3);
    peer.send(rawFrame(T.GOAWAY, 0, 0, Buffer.concat([u32(3), u32(E.ENHANCE_YOUR_CALM), Buffer.from("calm down")])));
    await until(() => a.closed && b.closed, 5000, "streams reset");
    expect([a.reset?.[0], b.reset?.[0]]).toEqual([E.ENHANCE_YOUR_CALM, E.ENHANCE_YOUR_CALM]);
    expect(a.reset?.[1]).toContain("calm down");
    await until(() => closed() !== undefined, 5000, "session close");
    expect(session.goaway).toEqual({ code: E.ENHANCE_YOUR_CALM, lastStreamId: 3, debug: "calm down" });
  });
});
