// H2Session's data path out (session.ts from pump): DATA under the peer's windows, receive credit
// (WINDOW_UPDATE out), header blocks out, and closing once the last stream has gone, on a full
// socket and with several streams. The scripted rig of mutants-h2-session (h2-session-out-rig.ts);
// expected values are RFC 9113 literals.

import { describe, expect, test } from "bun:test";
import { HpackDecoder } from "../../src/xds/h2/hpack.ts";
import { H2Error, H2Session } from "../../src/xds/h2/session.ts";
import { E, F, FakeSocket, GRPC_REQUEST, S, T, headersFrame, ping, settings, windowUpdate, type RawFrame } from "./h2-support.ts";
import { record, serverUp, clientUp, goawayOf, dataOn, PING_SENTINEL, untilSentinel, bytes } from "./h2-session-out-rig.ts";

describe("DATA out under the peer's windows (pump)", () => {
  const dataFrames = (fs: RawFrame[]) => fs.filter((f) => f.type === T.DATA).map((f) => [f.stream, f.flags, f.payload.length]);

  test("the stream window: 10 bytes, then each WINDOW_UPDATE lets that much more go, in order", () => {
    const { s, feed, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 10]]);
    const st = s.request(GRPC_REQUEST);
    out();
    const body = Buffer.from("abcdefghijklmnopqrstuvwxy");
    st.write(body);
    const a = out();
    expect(dataFrames(a)).toEqual([[1, 0, 10]]);
    expect(st.bufferedBytes).toBe(15);
    feed(windowUpdate(1, 10));
    const b = out();
    feed(windowUpdate(1, 100));
    const c = out();
    expect(dataFrames(b)).toEqual([[1, 0, 10]]);
    expect(dataFrames(c)).toEqual([[1, 0, 5]]);
    expect(Buffer.concat([...a, ...b, ...c].filter((f) => f.type === T.DATA).map((f) => f.payload)).equals(body)).toBe(true);
    expect(st.bufferedBytes).toBe(0);
  });

  test("the connection window (65535) is shared and bounds a larger stream window; DATA frames stay within 16384", () => {
    const { s, feed, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 100_000]]);
    const a = s.request(GRPC_REQUEST);
    const b = s.request(GRPC_REQUEST);
    out();
    a.write(bytes(70_000, 1));
    b.write(bytes(10, 2));
    expect(dataFrames(out())).toEqual([
      [1, 0, 16_384],
      [1, 0, 16_384],
      [1, 0, 16_384],
      [1, 0, 16_383],
    ]);
    feed(windowUpdate(0, 4475));
    expect(dataFrames(out())).toEqual([
      [1, 0, 4465],
      [3, 0, 10],
    ]);
    expect([a.bufferedBytes, b.bufferedBytes]).toEqual([0, 0]);
  });

  test("a stream blocked by its own window is not woken by a connection WINDOW_UPDATE, only by its own", () => {
    const { s, feed, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const st = s.request(GRPC_REQUEST);
    st.write(bytes(5, 1));
    out();
    feed(windowUpdate(0, 1000), ping(PING_SENTINEL));
    expect(dataFrames(untilSentinel(out()))).toEqual([]);
    feed(windowUpdate(1, 1000));
    expect(dataFrames(out())).toEqual([[1, 0, 5]]);
  });

  test("queued pieces share a DATA frame; one that does not fit whole fills the frame and the rest follows", () => {
    const { s, feed, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const st = s.request(GRPC_REQUEST);
    out();
    const a = bytes(10_000, 0x41);
    const b = Buffer.concat([bytes(6384, 0x42), bytes(3616, 0x43)]);
    st.write(a);
    st.write(b);
    expect(st.bufferedBytes).toBe(20_000);
    feed(windowUpdate(1, 30_000));
    const fs = out().filter((f) => f.type === T.DATA);
    expect(fs.map((f) => f.payload.length)).toEqual([16_384, 3616]);
    expect(fs[0]!.payload.equals(Buffer.concat([a, bytes(6384, 0x42)]))).toBe(true);
    expect(fs[1]!.payload.equals(bytes(3616, 0x43))).toBe(true);
  });

  test("a piece of exactly the frame size is one frame, with no empty frame after it", () => {
    const { s, feed, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const st = s.request(GRPC_REQUEST);
    out();
    st.write(bytes(16_384, 1));
    st.write(bytes(16_384, 2));
    feed(windowUpdate(1, 40_000), ping(PING_SENTINEL));
    const fs = untilSentinel(out()).filter((f) => f.type === T.DATA);
    expect(fs.map((f) => [f.flags, f.payload.length, f.payload[0], f.payload[16_383]])).toEqual([
      [0, 16_384, 1, 1],
      [0, 16_384, 2, 2],
    ]);
    expect(st.bufferedBytes).toBe(0);
    st.end();
    expect(out().map((f) => [f.type, f.flags, f.payload.length])).toEqual([[T.DATA, F.END_STREAM, 0]]);
  });

  test("end() behind queued DATA: the last DATA frame carries END_STREAM, and nothing follows it", () => {
    const { s, feed, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 10]]);
    const st = s.request(GRPC_REQUEST);
    out();
    st.write(bytes(25, 1));
    st.end();
    expect(dataFrames(out())).toEqual([[1, 0, 10]]);
    feed(windowUpdate(1, 10));
    expect(dataFrames(out())).toEqual([[1, 0, 10]]);
    feed(windowUpdate(1, 10));
    expect(dataFrames(out())).toEqual([[1, F.END_STREAM, 5]]);
    feed(windowUpdate(1, 10), windowUpdate(0, 10), ping(PING_SENTINEL));
    expect(dataFrames(untilSentinel(out()))).toEqual([]);
  });

  test("end(trailers) behind queued DATA: DATA without END_STREAM, then HEADERS with END_STREAM and the trailers", () => {
    const { feed, out, streams } = serverUp({}, [[S.INITIAL_WINDOW_SIZE, 4]]);
    feed(headersFrame(1));
    const st = streams[0]!.st;
    st.respond([[":status", "200"]]);
    st.write(bytes(6, 1));
    st.end([["grpc-status", "0"]]);
    expect(out().map((f) => [f.type, f.flags, f.payload.length])).toEqual([
      [T.HEADERS, F.END_HEADERS, 5], // :status by static name index 8, "200" literal
      [T.DATA, 0, 4],
    ]);
    feed(windowUpdate(1, 4));
    const fs = out();
    expect(fs.map((f) => [f.type, f.flags, f.stream])).toEqual([
      [T.DATA, 0, 1],
      [T.HEADERS, F.END_HEADERS | F.END_STREAM, 1],
    ]);
    expect(new HpackDecoder().decode(fs[1]!.payload)).toEqual([["grpc-status", "0"]]);
  });

  test("end() with nothing queued: an empty DATA frame with END_STREAM; the stream closes when the peer has ended too", () => {
    const { feed, out, streams } = serverUp();
    feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM));
    const r = streams[0]!;
    r.st.respond([[":status", "200"]]);
    expect(r.closed).toBe(0);
    r.st.end();
    expect(out().map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([
      [T.HEADERS, F.END_HEADERS, 1, 5],
      [T.DATA, F.END_STREAM, 1, 0],
    ]);
    expect(r.closed).toBe(1);
  });

  test("the last DATA with END_STREAM lets a graceful close end the socket", () => {
    const { s, feed, out, t, streams } = serverUp({}, [[S.INITIAL_WINDOW_SIZE, 3]]);
    feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM));
    const st = streams[0]!.st;
    st.respond([[":status", "200"]]);
    st.write(bytes(5, 1));
    st.end();
    s.close(5000);
    out();
    expect(t.calls).toEqual([]);
    feed(windowUpdate(1, 10));
    expect(out().map((f) => [f.type, f.flags, f.payload.length])).toEqual([[T.DATA, F.END_STREAM, 2]]);
    expect(t.calls).toEqual(["shutdown"]);
  });

  test("a full socket holds DATA back; its drain lets the waiting stream go on, bytes in order", () => {
    const { s, t, out } = clientUp();
    const st = s.request(GRPC_REQUEST);
    out();
    t.room = 0;
    st.write(Buffer.from("first"));
    s.flush();
    expect(s.socketBlocked).toBe(true);
    expect(st.write(Buffer.from("second"))).toBe(false);
    const r = record(st);
    t.room = Infinity;
    t.ev.drain();
    expect(s.socketBlocked).toBe(false);
    const fs = out().filter((f) => f.type === T.DATA);
    expect(fs.map((f) => f.payload.toString())).toEqual(["first", "second"]);
    expect(r.drains).toBe(1);
  });
});

describe("receive credit: WINDOW_UPDATE out", () => {
  const updates = (fs: RawFrame[]) => fs.filter((f) => f.type === T.WINDOW_UPDATE).map((f) => [f.stream, f.payload.readUInt32BE(0)]);

  test("the connection's credit goes back at a quarter of its window: 24999 of 100000 bytes no, 25000 yes, then from zero again", () => {
    const { feed, out } = serverUp({ connectionWindow: 100_000, streamWindow: 1 << 24 });
    feed(headersFrame(1), dataOn(1, 16_384), dataOn(1, 8615), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([]);
    feed(dataOn(1, 1), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([[0, 25_000]]);
    feed(dataOn(1, 16_384), dataOn(1, 8615), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([]);
    feed(dataOn(1, 1), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([[0, 25_000]]);
  });

  test("credit returned reopens the connection window: 65535 bytes, then as much as was credited, no FLOW_CONTROL_ERROR", () => {
    const { feed, out } = serverUp({ streamWindow: 1 << 24 });
    feed(headersFrame(1), ...[0, 1, 2, 3].map((i) => dataOn(1, i < 3 ? 16_384 : 16_383)));
    const credited = updates(out())
      .filter(([id]) => id === 0)
      .reduce((n, [, inc]) => n + inc!, 0);
    expect(credited).toBe(0); // the default connection window is 2 MiB: a quarter is 524288
    const small = serverUp({ connectionWindow: 65_535, streamWindow: 1 << 24 });
    small.feed(headersFrame(1), dataOn(1, 16_384), dataOn(1, 16_384), dataOn(1, 16_384), dataOn(1, 16_383));
    expect(updates(small.out())).toEqual([
      [0, 16_384],
      [0, 16_384],
      [0, 16_384],
    ]); // 16383 bytes of credit wait: below a quarter of 65535
    // the window is 49152 again: three more full frames fit
    small.feed(dataOn(1, 16_384), dataOn(1, 16_384), dataOn(1, 16_384), ping(PING_SENTINEL));
    expect(untilSentinel(small.out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
  });

  test("a stream's credit goes back at a quarter of its window: 249 of 1000 no, 250 yes", () => {
    const { feed, out } = serverUp({ streamWindow: 1000 });
    feed(headersFrame(1), dataOn(1, 249), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([]);
    feed(dataOn(1, 1), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([[1, 250]]);
  });

  test("credit returned reopens the stream window: 1000 bytes, then 1000 more as credited, no RST_STREAM", () => {
    const { feed, out, streams } = serverUp({ streamWindow: 1000 });
    feed(headersFrame(1), dataOn(1, 1000));
    expect(updates(out())).toEqual([[1, 1000]]);
    feed(dataOn(1, 1000), ping(PING_SENTINEL));
    const fs = untilSentinel(out());
    expect(fs.filter((f) => f.type === T.RST_STREAM)).toEqual([]);
    expect(updates(fs)).toEqual([[1, 1000]]);
    expect(streams[0]!.resets).toEqual([]);
  });

  test("paused: no stream WINDOW_UPDATE however much arrives; resume() returns it all at once, below the threshold too", () => {
    const { feed, out, streams } = serverUp({ streamWindow: 1000 });
    feed(headersFrame(1));
    streams[0]!.st.pause();
    feed(dataOn(1, 300), ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([]);
    streams[0]!.st.resume();
    expect(updates(out())).toEqual([[1, 300]]);
    streams[0]!.st.pause();
    feed(dataOn(1, 10), ping(PING_SENTINEL));
    untilSentinel(out());
    streams[0]!.st.resume();
    expect(updates(out())).toEqual([[1, 10]]);
  });

  test("resume() with no credit owed, or after the peer ended the stream, sends no WINDOW_UPDATE", () => {
    const { feed, out, streams } = serverUp({ streamWindow: 1000 });
    feed(headersFrame(1), headersFrame(3));
    const [a, b] = [streams[0]!, streams[1]!];
    a.st.pause();
    a.st.resume();
    b.st.pause();
    feed(dataOn(3, 100, F.END_STREAM));
    b.st.resume();
    feed(ping(PING_SENTINEL));
    expect(updates(untilSentinel(out()))).toEqual([]);
  });

  test("DATA for a stream we reset is credited to the connection only (no stream WINDOW_UPDATE, no error)", () => {
    const { feed, out, streams } = serverUp({ connectionWindow: 65_535 });
    feed(headersFrame(1));
    streams[0]!.st.reset(E.CANCEL);
    feed(dataOn(1, 16_384), ping(PING_SENTINEL));
    const fs = untilSentinel(out());
    expect(fs.map((f) => [f.type, f.stream])).toEqual([
      [T.RST_STREAM, 1],
      [T.WINDOW_UPDATE, 0],
    ]);
    expect(fs[0]!.payload.readUInt32BE(0)).toBe(E.CANCEL);
    expect(updates(fs)).toEqual([[0, 16_384]]);
  });
});

describe("header blocks out", () => {
  test("after the peer changes SETTINGS_HEADER_TABLE_SIZE only the next block starts with a size update (0x20)", () => {
    const { s, feed, out } = clientUp();
    feed(settings([S.HEADER_TABLE_SIZE, 0]));
    s.request([[":method", "POST"]]);
    s.request([[":method", "POST"]]);
    const hs = out().filter((f) => f.type === T.HEADERS);
    expect(hs.map((f) => [...f.payload])).toEqual([
      [0x20, 0x02, 0x04, ...Buffer.from("POST")],
      [0x02, 0x04, ...Buffer.from("POST")],
    ]);
  });

  test("a block larger than the peer's frame size: HEADERS then CONTINUATION, within 16384 each", () => {
    const { s, out } = clientUp();
    s.request([...GRPC_REQUEST, ["x-big", "v".repeat(20_000)]]);
    const fs = out();
    expect(fs.map((f) => [f.type, f.flags, f.stream])).toEqual([
      [T.HEADERS, 0, 1],
      [T.CONTINUATION, F.END_HEADERS, 1],
    ]);
    expect(fs[0]!.payload.length).toBe(16_384);
  });

  test("stream.reset(code): RST_STREAM on its id with that code", () => {
    const { s, out } = clientUp();
    s.request(GRPC_REQUEST);
    const st = s.request(GRPC_REQUEST);
    out();
    st.reset(E.ENHANCE_YOUR_CALM);
    expect(out().map((f) => [f.type, f.flags, f.stream, [...f.payload]])).toEqual([[T.RST_STREAM, 0, 3, [0, 0, 0, 11]]]);
  });
});

describe("closing: the last stream going away ends the socket; nothing is left behind", () => {
  test("a stream reset during a graceful close was the last one: the socket is ended at once", () => {
    const { s, feed, out, t, streams } = serverUp();
    feed(headersFrame(1));
    s.close(5000);
    expect(t.calls).toEqual([]);
    streams[0]!.st.reset(E.CANCEL);
    expect(out().map((f) => f.type)).toEqual([T.GOAWAY, T.RST_STREAM]);
    expect(t.calls).toEqual(["shutdown"]);
  });

  test("the grace timer is cleared once the transport has closed (ManualClock)", () => {
    const { s, t, clock } = serverUp();
    s.close(5000);
    expect(clock.pendingMs()).toEqual([5000, 1000]);
    t.destroyed = true;
    t.ev.close(undefined);
    expect(clock.pending()).toBe(0);
  });

  test("credit held by a paused stream that is then reset is never sent", () => {
    const { feed, out, streams } = serverUp({ streamWindow: 1000 });
    feed(headersFrame(1));
    const st = streams[0]!.st;
    st.pause();
    feed(dataOn(1, 300));
    st.reset(E.CANCEL);
    st.resume();
    feed(ping(PING_SENTINEL));
    expect(untilSentinel(out()).filter((f) => f.type === T.WINDOW_UPDATE)).toEqual([]);
  });
});

describe("survivors of the first measurement", () => {
  test("errors are H2Errors by name (the name shows where an error is printed whole)", () => {
    const { t, closes } = serverUp();
    t.ev.close(new Error("EPIPE"));
    expect(closes[0]!.name).toBe("H2Error");
    expect(String(closes[0])).toBe("H2Error: EPIPE");
  });

  test("a fresh connection's first header block carries no table size update", () => {
    const { s, out } = clientUp();
    s.request([[":method", "POST"]]);
    expect([...out().find((f) => f.type === T.HEADERS)!.payload]).toEqual([0x02, 0x04, ...Buffer.from("POST")]);
  });

  test("maxHeaderListSize bounds the decoded header list: GOAWAY COMPRESSION_ERROR naming the limit", () => {
    const ok = serverUp({ maxHeaderListSize: 1000 });
    ok.feed(headersFrame(1), ping(PING_SENTINEL));
    expect(untilSentinel(ok.out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
    expect(ok.streams).toHaveLength(1);

    const big = serverUp({ maxHeaderListSize: 1000 });
    big.feed(headersFrame(1, [...GRPC_REQUEST, ["x-big", "v".repeat(1000)]]));
    const g = goawayOf(big.out().find((f) => f.type === T.GOAWAY)!);
    expect(g).toEqual({ last: 0, code: E.COMPRESSION_ERROR, debug: "header block: header list larger than 1000 bytes" });
  });

  test("during a graceful close, a stream held back by a full socket still sends its DATA after the drain", () => {
    const { s, t, out } = clientUp();
    const st = s.request(GRPC_REQUEST);
    out();
    t.room = 0;
    st.write(Buffer.from("first"));
    s.flush();
    st.write(Buffer.from("second")); // the socket is full: this one waits in the stream's queue
    s.close(5000);
    t.room = Infinity;
    t.ev.drain();
    const fs = out();
    expect(fs.map((f) => [f.type, f.payload.length])).toEqual([
      [T.DATA, 5],
      [T.GOAWAY, 8],
      [T.DATA, 6],
    ]);
    expect(t.calls).toEqual([]);
  });
});

describe("a full socket and several streams", () => {
  test("end() while the socket is full: END_STREAM waits behind the stream's queued DATA", () => {
    const { s, t, out } = clientUp();
    const st = s.request(GRPC_REQUEST);
    out();
    t.room = 0;
    st.write(Buffer.from("first"));
    s.flush();
    st.write(Buffer.from("second"));
    st.end();
    t.room = Infinity;
    t.ev.drain();
    expect(out().map((f) => [f.type, f.flags, f.payload.toString()])).toEqual([
      [T.DATA, 0, "first"],
      [T.DATA, F.END_STREAM, "second"],
    ]);
  });

  test("the drain moves every waiting stream's DATA, not only the first one's", () => {
    const { s, t, out } = clientUp();
    const a = s.request(GRPC_REQUEST);
    const b = s.request(GRPC_REQUEST);
    out();
    t.room = 0;
    a.write(Buffer.from("a1"));
    s.flush();
    a.write(Buffer.from("a2"));
    b.write(Buffer.from("b1"));
    t.room = Infinity;
    t.ev.drain();
    expect(out().map((f) => [f.stream, f.payload.toString()])).toEqual([
      [1, "a1"],
      [1, "a2"],
      [3, "b1"],
    ]);
  });
});

test("a node Duplex (not an H2Transport) is wrapped: the SETTINGS reach the socket", async () => {
  const sock = new FakeSocket();
  const s = new H2Session(sock, { role: "server" });
  s.flush();
  await Promise.resolve();
  expect(sock.frames().map((f) => f.type)).toEqual([T.SETTINGS, T.WINDOW_UPDATE]);
  s.destroy();
});
