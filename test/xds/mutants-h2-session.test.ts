// H2Session's connection half (session.ts up to pump): construction and the SETTINGS it sends,
// request(), close()/GOAWAY and its grace, destroy, keepalive, the transport's events, closing on
// a full socket; DATA out, receive credit and the last stream's close are in -flow. The session runs on
// a scripted H2Transport in process (h2-session-out-rig.ts): the test decides how much of each
// write the "socket" takes and when it drains, ends or closes, and reads every frame the session
// wrote. Time is a ManualClock where a test is about time (keepalive, the close grace, the GOAWAY
// linger), so nothing sleeps. Expected values are RFC 9113 literals.

import { describe, expect, test } from "bun:test";
import { HpackDecoder } from "../../src/xds/h2/hpack.ts";
import { H2Error } from "../../src/xds/h2/session.ts";
import { E, F, GRPC_REQUEST, S, SETTINGS_ACK, T, headersFrame, literalBlock, parseFrames, ping, rawFrame, rst, windowUpdate } from "./h2-support.ts";
import {
  record,
  rig,
  serverUp,
  clientUp,
  settingsOf,
  kinds,
  goawayOf,
  dataOn,
  PING_SENTINEL,
  untilSentinel,
  bytes,
  responseEnd,
} from "./h2-session-out-rig.ts";

describe("closing on a full socket", () => {
  test("close() while the socket takes nothing: the GOAWAY goes out on drain, then the socket is ended", () => {
    const { t, s, out } = serverUp();
    t.room = 0;
    s.close(5000);
    expect(out()).toEqual([]);
    expect(t.calls).toEqual([]);
    t.room = Infinity;
    t.ev.drain();
    const fs = out();
    expect(kinds(fs)).toEqual(["7/0/0/8"]);
    expect(t.calls).toEqual(["shutdown"]);
  });
});

describe("construction: the SETTINGS and WINDOW_UPDATE we open with", () => {
  test("server defaults: no preface, SETTINGS MAX_CONCURRENT_STREAMS 100000, INITIAL_WINDOW 1 MiB, MAX_FRAME 16384, MAX_HEADER_LIST 256 KiB, then WINDOW_UPDATE(0) to 2 MiB", () => {
    const { t, s, out } = rig("server");
    expect(s.unflushedBytes).toBe(9 + 24 + 9 + 4); // queued, not yet handed to the socket
    const fs = out();
    expect(s.unflushedBytes).toBe(0);
    expect(t.written()[3]).toBe(T.SETTINGS); // the first frame starts at byte 0: a server sends no preface
    expect(kinds(fs)).toEqual(["4/0/0/24", "8/0/0/4"]);
    expect(settingsOf(fs[0]!)).toEqual([
      [3, 100_000],
      [4, 1_048_576],
      [5, 16_384],
      [6, 262_144],
    ]);
    expect(fs[1]!.payload.readUInt32BE(0)).toBe(2_097_152 - 65_535);
  });

  test("client defaults: the 24-octet preface, SETTINGS ENABLE_PUSH 0 first, then WINDOW_UPDATE(0)", () => {
    const { t, out } = rig("client");
    const fs = out();
    expect(t.written().subarray(0, 24).toString("latin1")).toBe("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    expect(kinds(fs)).toEqual(["4/0/0/24", "8/0/0/4"]);
    expect(settingsOf(fs[0]!)).toEqual([
      [2, 0],
      [4, 1_048_576],
      [5, 16_384],
      [6, 262_144],
    ]);
    expect(fs[1]!.payload.readUInt32BE(0)).toBe(2_031_617);
  });

  test("options are advertised; the frame size is clamped to 16384..2^24-1", () => {
    const a = rig("server", { streamWindow: 1000, maxFrameSize: 1000, maxConcurrentStreams: 7, maxHeaderListSize: 5000, connectionWindow: 65_536 });
    const fa = a.out();
    expect(settingsOf(fa[0]!)).toEqual([
      [3, 7],
      [4, 1000],
      [5, 16_384],
      [6, 5000],
    ]);
    expect(fa[1]!.payload.readUInt32BE(0)).toBe(1); // 65536 - 65535
    expect(settingsOf(rig("server", { maxFrameSize: 2 ** 25 }).out()[0]!)[2]).toEqual([5, 16_777_215]);
    expect(settingsOf(rig("server", { maxFrameSize: 20_000 }).out()[0]!)[2]).toEqual([5, 20_000]);
  });

  test("a connection window of 65535 or less sends no WINDOW_UPDATE: the next frame is the request's HEADERS", () => {
    for (const connectionWindow of [65_535, 1000]) {
      const { s, out } = rig("client", { connectionWindow });
      s.request(GRPC_REQUEST);
      expect(kinds(out()).map((k) => k.split("/")[0])).toEqual(["4", "1"]);
    }
  });

  test("a connection window below 65535 is raised to it: one 65535-byte DATA frame is within it, 65536 is not", () => {
    const opts = { connectionWindow: 1000, streamWindow: 1 << 20, maxFrameSize: 1 << 17 };
    const ok = serverUp(opts);
    ok.feed(headersFrame(1), dataOn(1, 65_535), ping(PING_SENTINEL));
    expect(untilSentinel(ok.out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
    expect(ok.streams[0]!.data.reduce((n, b) => n + b.length, 0)).toBe(65_535);

    const over = serverUp(opts);
    over.feed(headersFrame(1), dataOn(1, 65_536));
    const g = over.out().find((f) => f.type === T.GOAWAY)!;
    expect(goawayOf(g).code).toBe(E.FLOW_CONTROL_ERROR);
  });

  test("the default high-water mark is 256 KiB: write() says wait at 262144 queued bytes, not at 262143", () => {
    const { s, out } = clientUp({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const st = s.request(GRPC_REQUEST);
    expect(st.write(bytes(262_143, 1))).toBe(true);
    expect(st.bufferedBytes).toBe(262_143);
    expect(st.write(bytes(1, 2))).toBe(false);
    const other = s.request(GRPC_REQUEST);
    expect(other.write(bytes(100, 3))).toBe(true);
    out();
  });

  test("highWaterMark is honoured", () => {
    const { s } = clientUp({ highWaterMark: 100 }, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const st = s.request(GRPC_REQUEST);
    expect(st.write(bytes(99, 1))).toBe(true);
    expect(st.write(bytes(1, 1))).toBe(false);
  });

  test("a header list well under the default 256 KiB limit (40 KiB, in CONTINUATIONs) is accepted", () => {
    const { feed, out, streams } = serverUp();
    const block = literalBlock([...GRPC_REQUEST, ["x-big", "v".repeat(40 * 1024)]]);
    const parts = [block.subarray(0, 16_384), block.subarray(16_384, 32_768), block.subarray(32_768)];
    feed(
      rawFrame(T.HEADERS, 0, 1, parts[0]!),
      rawFrame(T.CONTINUATION, 0, 1, parts[1]!),
      rawFrame(T.CONTINUATION, F.END_HEADERS, 1, parts[2]!),
      ping(PING_SENTINEL),
    );
    expect(untilSentinel(out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
    expect(streams).toHaveLength(1);
  });

  test("resetBudget applies to a server only: a client reset by its server many times sends no GOAWAY", () => {
    const { s, feed, out, closes } = clientUp({ resetBudget: { burst: 1, perSecond: 0.001 } });
    for (let i = 0; i < 4; i++) s.request(GRPC_REQUEST);
    feed(rst(1, E.CANCEL), rst(3, E.CANCEL), rst(5, E.CANCEL), rst(7, E.CANCEL), ping(PING_SENTINEL));
    expect(untilSentinel(out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
    expect(closes).toEqual([]);
  });

  test("a server's resetBudget: the burst is allowed, the reset past it is GOAWAY ENHANCE_YOUR_CALM (fake clock: no refill)", () => {
    const { feed, out } = serverUp({ resetBudget: { burst: 2, perSecond: 1 } });
    feed(headersFrame(1), rst(1, E.CANCEL), headersFrame(3), rst(3, E.CANCEL), ping(PING_SENTINEL));
    expect(untilSentinel(out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
    feed(headersFrame(5), rst(5, E.CANCEL));
    const g = out().find((f) => f.type === T.GOAWAY)!;
    expect(goawayOf(g)).toEqual({ last: 5, code: E.ENHANCE_YOUR_CALM, debug: "too_many_resets" });
  });
});

describe("the transport's end and close", () => {
  test("the peer ends with nothing in progress: a clean close, the transport destroyed", () => {
    const { t, closes } = serverUp();
    t.ev.end();
    expect(closes).toEqual([undefined]);
    expect(t.calls).toEqual(["destroy"]);
  });

  test("the peer ends under an open stream: INTERNAL_ERROR 'connection closed by the peer', the stream reset with it", () => {
    const { t, feed, closes, streams } = serverUp();
    feed(headersFrame(1));
    t.ev.end();
    expect(closes).toHaveLength(1);
    expect(closes[0]).toBeInstanceOf(H2Error);
    expect([closes[0]!.code, closes[0]!.message]).toEqual([E.INTERNAL_ERROR, "connection closed by the peer"]);
    expect(streams[0]!.resets).toEqual([[E.INTERNAL_ERROR, "connection lost: connection closed by the peer"]]);
    expect(streams[0]!.closed).toBe(1);
  });

  test("the peer said GOAWAY first: its end is clean even under an open stream, which is reset as 'connection closed'", () => {
    const { s, t, feed, closes } = clientUp();
    const r = record(s.request(GRPC_REQUEST));
    feed(rawFrame(T.GOAWAY, 0, 0, Buffer.from([0, 0, 0, 1, 0, 0, 0, 0])));
    expect(closes).toEqual([]);
    t.ev.end();
    expect(closes).toEqual([undefined]);
    expect(r.resets).toEqual([[E.INTERNAL_ERROR, "connection closed"]]);
  });

  test("after our close(grace) the peer's end is clean even under an open stream", () => {
    const { s, t, feed, closes } = serverUp();
    feed(headersFrame(1));
    s.close(5000);
    t.ev.end();
    expect(closes).toEqual([undefined]);
  });

  test("close with a socket error: that error, even with no stream open", () => {
    const { t, closes } = serverUp();
    t.ev.close(new Error("ECONNRESET"));
    expect(closes).toHaveLength(1);
    expect([closes[0]!.code, closes[0]!.message]).toEqual([E.INTERNAL_ERROR, "ECONNRESET"]);
  });

  test("close without an error: clean with no stream open, INTERNAL_ERROR 'connection closed' under an open one", () => {
    const idle = serverUp();
    idle.t.ev.close(undefined);
    expect(idle.closes).toEqual([undefined]);

    const busy = serverUp();
    busy.feed(headersFrame(1));
    busy.t.ev.close(undefined);
    expect([busy.closes[0]!.code, busy.closes[0]!.message]).toEqual([E.INTERNAL_ERROR, "connection closed"]);
    expect(busy.streams[0]!.resets).toEqual([[E.INTERNAL_ERROR, "connection lost: connection closed"]]);
  });

  test("onTransportClosed: called on the transport's close, or at once when it is already destroyed", () => {
    const { s, t } = serverUp();
    const calls: string[] = [];
    s.onTransportClosed(() => calls.push("waiting"));
    expect(calls).toEqual([]);
    t.destroyed = true;
    t.ev.close(undefined);
    expect(calls).toEqual(["waiting"]);
    s.onTransportClosed(() => calls.push("late"));
    expect(calls).toEqual(["waiting", "late"]);
  });

  test("after our GOAWAY for a peer error, the peer's end destroys the transport at once", () => {
    const { t, feed, out } = rig("server");
    feed(Buffer.from("GET / HTTP/1.1\r\n\r\n"));
    expect(goawayOf(out().find((f) => f.type === T.GOAWAY)!).code).toBe(E.PROTOCOL_ERROR);
    expect(t.calls).toEqual(["shutdown"]);
    t.ev.end();
    expect(t.calls).toEqual(["shutdown", "destroy"]);
  });

  test("after our GOAWAY the transport lingers 1 s for the peer's end, then is destroyed (ManualClock)", () => {
    const { t, feed, clock } = rig("server");
    feed(Buffer.from("GET / HTTP/1.1\r\n\r\n"));
    expect(t.calls).toEqual(["shutdown"]);
    clock.advance(999);
    expect(t.calls).toEqual(["shutdown"]);
    clock.advance(1);
    expect(t.calls).toEqual(["shutdown", "destroy"]);
  });

  test("after a graceful close ends our side: the peer's input is still read, its end closes at once (ManualClock)", () => {
    const { s, t, feed, closes, clock } = serverUp();
    s.close(5000);
    expect(t.calls).toEqual(["shutdown"]);
    expect(clock.pendingMs()).toEqual([5000, 1000]);
    // What crosses our last bytes (a WINDOW_UPDATE, a new stream's HEADERS): read, nothing closes for it.
    feed(windowUpdate(0, 100), headersFrame(1));
    clock.advance(999);
    expect([t.calls, closes]).toEqual([["shutdown"], []]);
    t.ev.end();
    expect([t.calls, closes]).toEqual([["shutdown", "destroy"], [undefined]]);
  });

  test("after a graceful close ends our side: a peer that never ends is closed LINGER_MS (1 s) later, once (ManualClock)", () => {
    const { s, t, closes, clock } = serverUp();
    s.close(5000);
    clock.advance(999);
    expect([t.calls, closes]).toEqual([["shutdown"], []]);
    clock.advance(1);
    expect([t.calls, closes]).toEqual([["shutdown", "destroy"], [undefined]]);
    clock.advance(5000); // the grace timer finds the session closed
    expect(t.calls).toEqual(["shutdown", "destroy"]);
  });

  test("a peer error after our close() ended the socket: destroyed at once, no linger", () => {
    const { s, t, feed } = serverUp();
    s.close();
    expect(t.calls).toEqual(["shutdown"]);
    feed(rawFrame(T.PING, 0, 0, Buffer.alloc(3)));
    expect(t.calls).toEqual(["shutdown", "destroy"]);
  });

  test("an undecodable header block: GOAWAY COMPRESSION_ERROR whose debug text starts 'header block: '", () => {
    const { feed, out, closes } = serverUp();
    feed(rawFrame(T.HEADERS, F.END_HEADERS, 1, Buffer.from([0xbe])));
    const g = goawayOf(out().find((f) => f.type === T.GOAWAY)!);
    expect(g.code).toBe(E.COMPRESSION_ERROR);
    expect(g.debug.startsWith("header block: ")).toBe(true);
    expect(closes[0]!.code).toBe(E.COMPRESSION_ERROR);
  });

  test("an exception from a handler is not turned into a GOAWAY: it reaches the caller", () => {
    const { feed, out } = serverUp({
      onStream: () => {
        throw new TypeError("handler bug");
      },
    });
    expect(() => feed(headersFrame(1))).toThrow("handler bug");
    feed(ping(PING_SENTINEL));
    expect(untilSentinel(out()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
  });
});

describe("request()", () => {
  test("on a server session: refused", () => {
    const { s } = serverUp();
    expect(() => s.request(GRPC_REQUEST)).toThrow("request() on a server session");
  });

  test("after destroy: H2Error INTERNAL_ERROR; after the peer's GOAWAY: REFUSED_STREAM", () => {
    const a = clientUp();
    a.s.destroy();
    const e1 = (() => {
      try {
        a.s.request(GRPC_REQUEST);
      } catch (e) {
        return e as H2Error;
      }
    })();
    expect(e1).toBeInstanceOf(H2Error);
    expect([e1!.code, e1!.message]).toEqual([E.INTERNAL_ERROR, "connection closed"]);

    const b = clientUp();
    b.s.request(GRPC_REQUEST);
    b.feed(rawFrame(T.GOAWAY, 0, 0, Buffer.from([0, 0, 0, 1, 0, 0, 0, 0])));
    const e2 = (() => {
      try {
        b.s.request(GRPC_REQUEST);
      } catch (e) {
        return e as H2Error;
      }
    })();
    expect([e2!.code, e2!.message]).toEqual([E.REFUSED_STREAM, "the peer sent GOAWAY"]);
  });

  test("the peer's MAX_CONCURRENT_STREAMS: two of 2 open, the third refused, a closed stream frees its slot", () => {
    const { s, feed, out } = clientUp({}, [[S.MAX_CONCURRENT_STREAMS, 2]]);
    const first = record(s.request(GRPC_REQUEST, true));
    s.request(GRPC_REQUEST);
    let err: H2Error | undefined;
    try {
      s.request(GRPC_REQUEST);
    } catch (e) {
      err = e as H2Error;
    }
    expect([err?.code, err?.message]).toEqual([E.REFUSED_STREAM, "peer's concurrent stream limit reached"]);
    feed(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, literalBlock([[":status", "200"]])));
    expect(first.closed).toBe(1);
    s.request(GRPC_REQUEST);
    expect(kinds(out()).filter((k) => k.startsWith("1/"))).toEqual([
      expect.stringMatching(/^1\/5\/1\//),
      expect.stringMatching(/^1\/4\/3\//),
      expect.stringMatching(/^1\/4\/5\//),
    ]);
  });

  test("stream ids go 1, 3, 5; END_STREAM on the HEADERS only when asked", () => {
    const { s, out } = clientUp();
    expect([s.request(GRPC_REQUEST).id, s.request(GRPC_REQUEST, true).id, s.request(GRPC_REQUEST).id]).toEqual([1, 3, 5]);
    const hs = out().filter((f) => f.type === T.HEADERS);
    expect(hs.map((f) => [f.stream, f.flags])).toEqual([
      [1, F.END_HEADERS],
      [3, F.END_HEADERS | F.END_STREAM],
      [5, F.END_HEADERS],
    ]);
    expect(new HpackDecoder().decode(hs[0]!.payload)).toEqual(GRPC_REQUEST);
  });

  test("a request sent with END_STREAM is ended on our side: end() adds nothing, the response's END_STREAM closes it", () => {
    const { s, feed, out } = clientUp();
    const r = record(s.request(GRPC_REQUEST, true));
    r.st.end();
    r.st.write(bytes(10, 1));
    s.request(GRPC_REQUEST);
    expect(out().map((f) => [f.type, f.flags, f.stream])).toEqual([
      [T.HEADERS, F.END_HEADERS | F.END_STREAM, 1],
      [T.HEADERS, F.END_HEADERS, 3],
    ]);
    feed(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, literalBlock([[":status", "200"]])));
    expect([r.ended, r.closed]).toEqual([1, 1]);
  });
});

describe("close(): GOAWAY and the grace period", () => {
  test("GOAWAY names the last stream the peer opened, NO_ERROR, no debug text; a second close() sends nothing more", () => {
    const { s, feed, out, t } = serverUp();
    feed(headersFrame(1), headersFrame(3));
    out();
    s.close(5000);
    s.close(5000);
    s.close(0, E.ENHANCE_YOUR_CALM, "again");
    feed(ping(PING_SENTINEL));
    const fs = untilSentinel(out());
    expect(kinds(fs)).toEqual(["7/0/0/8"]);
    expect(goawayOf(fs[0]!)).toEqual({ last: 3, code: E.NO_ERROR, debug: "" });
    expect(t.calls).toEqual([]); // both streams still open
  });

  test("close(grace, code, debug) sends them", () => {
    const { s, out } = serverUp();
    s.close(0, E.ENHANCE_YOUR_CALM, "calm down");
    expect(goawayOf(out()[0]!)).toEqual({ last: 0, code: E.ENHANCE_YOUR_CALM, debug: "calm down" });
  });

  test("client close(0): every stream not ended on our side is reset with CANCEL; the socket is ended once the rest are answered", () => {
    const { s, out, t, feed } = clientUp();
    const done = record(s.request(GRPC_REQUEST, true));
    const open = record(s.request(GRPC_REQUEST));
    const busy = record(s.request(GRPC_REQUEST));
    busy.st.write(bytes(5, 1));
    out();
    s.close(0);
    expect(out().map((f) => [f.type, f.stream, f.payload.readUInt32BE(f.type === T.GOAWAY ? 4 : 0)])).toEqual([
      [T.GOAWAY, 0, E.NO_ERROR],
      [T.RST_STREAM, 3, E.CANCEL],
      [T.RST_STREAM, 5, E.CANCEL],
    ]);
    expect([open.closed, busy.closed, done.closed]).toEqual([1, 1, 0]);
    expect(t.calls).toEqual([]); // stream 1's answer is still to come: a server may drop it once our side ends
    feed(responseEnd(1));
    expect([done.ended, done.closed, done.resets]).toEqual([1, 1, []]);
    expect(t.calls).toEqual(["shutdown"]);
  });

  test("server close(0): a stream that sent all it had does not hold the socket open for the client's half", () => {
    const { s, feed, t, streams } = serverUp();
    feed(headersFrame(1));
    streams[0]!.st.respond([[":status", "200"]], true);
    s.close(0);
    expect(t.calls).toEqual(["shutdown"]);
  });

  test("close(grace > 0): open streams carry on; the socket is ended once the last one has ended", () => {
    const { s, out, t, feed } = clientUp();
    const r = record(s.request(GRPC_REQUEST));
    out();
    s.close(100);
    r.st.write(bytes(4, 7));
    expect(out().map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([
      [T.GOAWAY, 0, 0, 8],
      [T.DATA, 0, 1, 4],
    ]);
    expect(t.calls).toEqual([]);
    r.st.end();
    expect(out().map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([[T.DATA, F.END_STREAM, 1, 0]]);
    expect(t.calls).toEqual([]);
    feed(responseEnd(1));
    expect(t.calls).toEqual(["shutdown"]);
  });

  test("client: a stream reset by the server while closing lets the socket end", () => {
    const { s, t, feed } = clientUp();
    record(s.request(GRPC_REQUEST, true));
    s.close(5000);
    feed(rst(1, E.CANCEL));
    expect(t.calls).toEqual(["shutdown"]);
  });

  test("client: no request() once closing", () => {
    const { s } = clientUp();
    s.close(5000);
    expect(() => s.request(GRPC_REQUEST)).toThrow("connection closed");
  });

  test("the grace timer: a stream still open at graceMs is cut (ManualClock)", () => {
    const { s, feed, t, closes, streams, clock } = serverUp();
    feed(headersFrame(1));
    s.close(5000);
    clock.advance(4999);
    expect(t.calls).toEqual([]);
    clock.advance(1);
    expect(t.calls).toEqual(["destroy"]);
    expect(closes).toEqual([undefined]);
    expect(streams[0]!.resets).toEqual([[E.INTERNAL_ERROR, "connection closed"]]);
  });

  test("the grace timer is at least 1 s: close(0) and close(200) destroy at 1000 ms; a stream that sent all it had is just released", () => {
    for (const grace of [0, 200]) {
      const { s, feed, t, streams, clock } = serverUp();
      feed(headersFrame(1));
      streams[0]!.st.respond([[":status", "200"]], true);
      s.close(grace);
      expect(t.calls).toEqual(["shutdown"]);
      clock.advance(999);
      expect(t.calls).toEqual(["shutdown"]);
      clock.advance(1);
      expect(t.calls).toEqual(["shutdown", "destroy"]);
      expect([streams[0]!.closed, streams[0]!.resets]).toEqual([1, []]);
    }
  });

  test("destroy with an error after close(): even a stream that sent all it had hears the error", () => {
    const { s, feed, streams, closes } = serverUp();
    feed(headersFrame(1));
    streams[0]!.st.respond([[":status", "200"]], true);
    s.close(5000);
    s.destroy(new H2Error(E.REFUSED_STREAM, "gone"));
    expect(streams[0]!.resets).toEqual([[E.REFUSED_STREAM, "connection lost: gone"]]);
    expect([closes[0]!.code, closes[0]!.message]).toEqual([E.REFUSED_STREAM, "gone"]);
  });

  test("while not closing, streams finishing never end the socket: the next request still goes out", () => {
    const { s, feed, out, t } = clientUp();
    const r = record(s.request(GRPC_REQUEST, true));
    feed(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, literalBlock([[":status", "200"]])));
    expect(r.closed).toBe(1);
    s.request(GRPC_REQUEST);
    expect(out().map((f) => [f.type, f.stream])).toEqual([
      [T.HEADERS, 1],
      [T.HEADERS, 3],
    ]);
    expect(t.calls).toEqual([]);
  });
});

describe("destroy()", () => {
  test("destroys the transport (no linger), resets open streams with INTERNAL_ERROR 'connection closed', reports once", () => {
    const { s, feed, t, closes, streams } = serverUp();
    feed(headersFrame(1));
    streams[0]!.st.respond([[":status", "200"]], true);
    s.destroy();
    s.destroy();
    expect(t.calls).toEqual(["destroy"]);
    expect(closes).toEqual([undefined]);
    expect(streams[0]!.resets).toEqual([[E.INTERNAL_ERROR, "connection closed"]]);
    expect(s.streams.size).toBe(0);
  });

  test("what was queued in the same turn is written before the transport goes", () => {
    const { s, t } = clientUp();
    const before = t.written().length;
    s.request(GRPC_REQUEST);
    s.destroy();
    const fs = parseFrames(t.written().subarray(before));
    expect(fs.map((f) => [f.type, f.stream])).toEqual([[T.HEADERS, 1]]);
  });

  test("a session without onClose can be destroyed", () => {
    const { s, t } = serverUp({ onClose: undefined });
    expect(() => s.destroy()).not.toThrow();
    expect(t.calls).toEqual(["destroy"]);
  });

  test("the keepalive timer stops with the session (ManualClock)", () => {
    const { s, clock } = clientUp({ keepalive: { intervalMs: 1000, timeoutMs: 1000 } });
    expect(clock.pendingMs()).toEqual([500]); // the SETTINGS wait ended with the ACK
    s.destroy();
    expect(clock.pending()).toBe(0);
  });
});

describe("keepalive (ManualClock)", () => {
  const ka = (intervalMs: number, timeoutMs: number) => clientUp({ keepalive: { intervalMs, timeoutMs } });

  test("PING (8 zero octets) after intervalMs of silence, not before; GOAWAY INTERNAL_ERROR timeoutMs later, not before; one PING only", () => {
    const { out, closes, clock } = ka(90, 60);
    clock.advance(89);
    expect(out()).toEqual([]);
    clock.advance(1);
    const p = out();
    expect(p.map((f) => [f.type, f.flags, f.stream])).toEqual([[T.PING, 0, 0]]);
    expect(p[0]!.payload.equals(Buffer.alloc(8))).toBe(true);
    clock.advance(59);
    expect(out()).toEqual([]);
    clock.advance(1);
    const fs = out();
    expect(kinds(fs)).toEqual([`7/0/0/${8 + "keepalive ping not answered within 60 ms".length}`]);
    expect(goawayOf(fs[0]!)).toEqual({ last: 0, code: E.INTERNAL_ERROR, debug: "keepalive ping not answered within 60 ms" });
    expect([closes[0]!.code, closes[0]!.message]).toEqual([E.INTERNAL_ERROR, "keepalive ping not answered within 60 ms"]);
  });

  test("the check runs at least every 10 ms: intervalMs 8 pings at 10 ms, not at 8", () => {
    const { out, clock } = ka(8, 8);
    clock.advance(9);
    expect(out()).toEqual([]);
    clock.advance(1);
    expect(out().map((f) => f.type)).toEqual([T.PING]);
  });

  test("anything received restarts the silence: a frame at 60 ms moves the PING from 90 to 150 ms", () => {
    const { out, feed, clock } = ka(90, 60);
    clock.advance(60);
    feed(SETTINGS_ACK);
    clock.advance(89);
    expect(out()).toEqual([]);
    clock.advance(1);
    expect(out().map((f) => f.type)).toEqual([T.PING]);
  });
});
