// H2Session's connection half (session.ts up to onSocketData): construction and the SETTINGS it
// sends, request(), close()/GOAWAY, destroy, the output queue, DATA out under flow control (pump),
// receive credit (WINDOW_UPDATE out) and the transport's events. The session runs on a scripted
// H2Transport in process: the test decides how much of each write the "socket" takes and when it
// drains, ends or closes, and reads every frame the session wrote. Timers are Bun's fake timers
// where a test is about time (keepalive, the close grace, the GOAWAY linger), so nothing sleeps.
// Expected values are RFC 9113 literals (frame types, flags, error codes, SETTINGS ids, windows).

import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { HpackDecoder, type HeaderList } from "../../src/xds/h2/hpack.ts";
import { H2Error, H2Session, type H2SessionOptions, type H2Stream } from "../../src/xds/h2/session.ts";
import {
  CLIENT_PREFACE,
  E,
  F,
  FakeSocket,
  GRPC_REQUEST,
  S,
  SETTINGS_ACK,
  ScriptedTransport,
  T,
  headersFrame,
  literalBlock,
  parseFrames,
  ping,
  rawFrame,
  rst,
  settings,
  windowUpdate,
  type RawFrame,
} from "./h2-support.ts";

interface Rec {
  st: H2Stream;
  headers: HeaderList[];
  data: Buffer[];
  ended: number;
  resets: [number, string][];
  closed: number;
  drains: number;
}

function record(st: H2Stream): Rec {
  const r: Rec = { st, headers: [], data: [], ended: 0, resets: [], closed: 0, drains: 0 };
  st.handlers = {
    onHeaders: (h) => r.headers.push(h),
    onData: (c) => r.data.push(Buffer.from(c)),
    onEnd: () => r.ended++,
    onReset: (code, why) => r.resets.push([code, why]),
    onClose: () => r.closed++,
    onDrain: () => r.drains++,
  };
  return r;
}

/** A session on a scripted transport; `out()` flushes and returns the frames written since the last call. */
function rig(role: "client" | "server", opts: Partial<H2SessionOptions> = {}) {
  const t = new ScriptedTransport();
  const clock = new ManualClock();
  const closes: (H2Error | undefined)[] = [];
  const streams: Rec[] = [];
  const goaways: [number, number, string][] = [];
  const s = new H2Session(t, {
    onStream: (st) => streams.push(record(st)),
    onClose: (e) => closes.push(e),
    onGoaway: (code, last, debug) => goaways.push([code, last, debug]),
    clock,
    ...opts,
    role,
  });
  let read = 0;
  let prefaceChecked = role === "server";
  const out = (): RawFrame[] => {
    s.flush();
    let all = t.written();
    if (!prefaceChecked && all.length >= 24) {
      expect(all.subarray(0, 24).equals(CLIENT_PREFACE)).toBe(true);
      prefaceChecked = true;
    }
    if (role === "client") all = all.subarray(24);
    const fresh = parseFrames(all.subarray(read));
    read += fresh.reduce((n, f) => n + 9 + f.payload.length, 0);
    return fresh;
  };
  const feed = (...b: Buffer[]) => t.ev.data(Buffer.concat(b));
  return { t, s, out, feed, closes, streams, goaways, clock };
}

/** A server rig past the client preface and SETTINGS exchange; its own preface frames consumed. */
function serverUp(opts: Partial<H2SessionOptions> = {}, peerSettings: [number, number][] = []) {
  const r = rig("server", opts);
  r.feed(CLIENT_PREFACE, settings(...peerSettings), SETTINGS_ACK);
  r.out();
  return r;
}

/** A client rig after the server's SETTINGS (and our ACK of them); its own preface frames consumed. */
function clientUp(opts: Partial<H2SessionOptions> = {}, peerSettings: [number, number][] = []) {
  const r = rig("client", opts);
  r.feed(settings(...peerSettings), SETTINGS_ACK);
  r.out();
  return r;
}

const settingsOf = (f: RawFrame) => Array.from({ length: f.payload.length / 6 }, (_, i) => [f.payload.readUInt16BE(i * 6), f.payload.readUInt32BE(i * 6 + 2)]);
const kinds = (fs: RawFrame[]) => fs.map((f) => `${f.type}/${f.flags}/${f.stream}/${f.payload.length}`);
const goawayOf = (f: RawFrame) => ({
  last: f.payload.readUInt32BE(0) & 0x7fffffff,
  code: f.payload.readUInt32BE(4),
  debug: f.payload.subarray(8).toString("utf8"),
});
const dataOn = (id: number, n: number, flags = 0, fill = 0x61) => rawFrame(T.DATA, flags, id, Buffer.alloc(n, fill));
const PING_SENTINEL = Buffer.from("sentinel");
/** Frames up to (not including) our ACK of the sentinel PING; fails if the ACK is missing. */
function untilSentinel(fs: RawFrame[]): RawFrame[] {
  const i = fs.findIndex((f) => f.type === T.PING && f.flags === F.ACK && f.payload.equals(PING_SENTINEL));
  expect(i).toBeGreaterThanOrEqual(0);
  return fs.slice(0, i);
}
const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);
const responseEnd = (id: number) => rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, literalBlock([[":status", "200"]]));

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
    expect(t.calls).toEqual(["end"]);
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

  test("a peer error after our close() ended the socket: destroyed at once, no linger", () => {
    const { s, t, feed } = serverUp();
    s.close();
    expect(t.calls).toEqual(["end"]);
    feed(rawFrame(T.PING, 0, 0, Buffer.alloc(3)));
    expect(t.calls).toEqual(["end", "destroy"]);
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
    expect(t.calls).toEqual(["end"]);
  });

  test("server close(0): a stream that sent all it had does not hold the socket open for the client's half", () => {
    const { s, feed, t, streams } = serverUp();
    feed(headersFrame(1));
    streams[0]!.st.respond([[":status", "200"]], true);
    s.close(0);
    expect(t.calls).toEqual(["end"]);
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
    expect(t.calls).toEqual(["end"]);
  });

  test("client: a stream reset by the server while closing lets the socket end", () => {
    const { s, t, feed } = clientUp();
    record(s.request(GRPC_REQUEST, true));
    s.close(5000);
    feed(rst(1, E.CANCEL));
    expect(t.calls).toEqual(["end"]);
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
      expect(t.calls).toEqual(["end"]);
      clock.advance(999);
      expect(t.calls).toEqual(["end"]);
      clock.advance(1);
      expect(t.calls).toEqual(["end", "destroy"]);
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
    expect(t.calls).toEqual(["end"]);
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
    expect(t.calls).toEqual(["end"]);
  });

  test("the grace timer is cleared once the transport has closed (ManualClock)", () => {
    const { s, t, clock } = serverUp();
    s.close(5000);
    expect(clock.pendingMs()).toEqual([5000]);
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
