// H2Session's frame dispatch (session.ts from fail() on): the edges the socket tests do not reach,
// on an in-memory transport (h2-session-rig.ts) so that every test is synchronous and runs once per mutant in
// milliseconds. Frames in are built by h2-support.ts (RFC 9113, independent of src); what the
// session writes is parsed back and checked against literal codes, ids and payloads. Everything
// the session does with a chunk happens inside `feed()`: what it did not write by the time
// `feed()` returned and the writer was flushed, it never writes for that chunk.

import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { H2Error } from "../../src/xds/h2/session.ts";
import {
  CLIENT_PREFACE,
  F,
  GRPC_REQUEST,
  S,
  SETTINGS_ACK,
  T,
  headersFrame,
  literalBlock,
  ping,
  rawFrame,
  rst,
  settings,
  u32,
  windowUpdate,
  type RawFrame,
} from "./h2-support.ts";
import {
  CANCEL,
  COMPRESSION_ERROR,
  ENHANCE_YOUR_CALM,
  FLOW_CONTROL_ERROR,
  FRAME_SIZE_ERROR,
  PROTOCOL_ERROR,
  REFUSED_STREAM,
  SENTINEL,
  STREAM_CLOSED,
  client,
  data,
  goawayFrame,
  goawayOf,
  pingAcks,
  record,
  rig,
  rstsOf,
  server,
  settingsAcks,
  windowUpdates,
} from "./h2-session-rig.ts";

describe("fail(): a connection error", () => {
  test("GOAWAY names the code, the last stream the peer opened and the reason; the socket lingers; onClose gets the error", () => {
    const { t, s, recs, closes, out } = server();
    t.feed(headersFrame(1), headersFrame(3), rawFrame(T.PING, 0, 0, Buffer.alloc(7)));
    expect(recs.map((r) => r.st.id)).toEqual([1, 3]);
    expect(goawayOf(out())).toEqual({ last: 3, code: FRAME_SIZE_ERROR, debug: "PING must be 8 bytes" });
    expect(s.closed).toBe(true);
    expect(t.shutdowns).toBe(1); // ended, still reading: the GOAWAY is not lost to a reset
    expect(t.destroyed).toBe(false);
    expect(closes.length).toBe(1);
    expect(closes[0]).toBeInstanceOf(H2Error);
    expect(closes[0]!.code).toBe(FRAME_SIZE_ERROR);
    expect(closes[0]!.message).toBe("PING must be 8 bytes");
    expect(recs.map((r) => r.reset?.[0])).toEqual([FRAME_SIZE_ERROR, FRAME_SIZE_ERROR]);
  });

  test("what follows the bad frame in the same chunk is not acted on", () => {
    const { t, s, goaways, closes } = server();
    t.feed(rawFrame(T.PING, 0, 1, Buffer.alloc(8)), settings([S.MAX_FRAME_SIZE, 20_000], [S.INITIAL_WINDOW_SIZE, 10]), goawayFrame(0, 0));
    expect(closes[0]!.code).toBe(PROTOCOL_ERROR);
    expect(s.peerMaxFrame).toBe(16_384);
    expect(s.peerInitialWindow).toBe(65_535);
    expect(s.goaway).toBeUndefined();
    expect(goaways).toEqual([]);
  });
});

describe("frame headers", () => {
  test("a stream id using all four octets, with the reserved bit set, is read as 31 bits", () => {
    const { t, recs } = server();
    const h = headersFrame(0x01020305);
    h[5]! |= 0x80;
    t.feed(h, data(0x01020305, "abc", F.END_STREAM));
    expect(recs.map((r) => r.st.id)).toEqual([16_909_061]);
    expect(recs[0]!.events).toEqual(["data:3", "end"]);
  });

  test("a frame length using the high octet (70,000 bytes, our SETTINGS_MAX_FRAME_SIZE 100,000) is delivered whole", () => {
    const { t, recs, out } = server({ maxFrameSize: 100_000 });
    t.feed(headersFrame(1), data(1, Buffer.alloc(70_000, 7), F.END_STREAM));
    expect(recs[0]!.bytes).toBe(70_000);
    expect(recs[0]!.events.at(-1)).toBe("end");
    expect(goawayOf(out())).toBeUndefined();
  });

  test("a header block over 1024 bytes in one frame is decoded whole", () => {
    const { t, recs } = server();
    const hs: [string, string][] = [...GRPC_REQUEST, ["x-long", "v".repeat(1500)]];
    t.feed(headersFrame(1, hs));
    expect(recs[0]!.headers).toEqual(hs);
  });
});

describe("zero-length frames that end a chunk take effect at once", () => {
  test("an empty SETTINGS alone in a chunk is ACKed", () => {
    const { t, out } = server();
    t.feed(settings());
    expect(settingsAcks(out())).toBe(1);
  });

  test("an empty DATA with END_STREAM ending the chunk ends the stream", () => {
    const { t, recs } = server();
    t.feed(headersFrame(1));
    t.feed(data(1, "", F.END_STREAM));
    expect(recs[0]!.events).toEqual(["end"]);
  });

  test("a padded DATA holding only its pad length (0), with END_STREAM, ending the chunk ends the stream", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1));
    t.feed(rawFrame(T.DATA, F.PADDED | F.END_STREAM, 1, Buffer.from([0])));
    expect(recs[0]!.events).toEqual(["end"]);
    expect(goawayOf(out())).toBeUndefined();
  });

  test("a padded DATA whose pad length byte ends the chunk, with the data and padding in the next", () => {
    const { t, recs } = server();
    t.feed(headersFrame(1));
    const f = rawFrame(T.DATA, F.PADDED | F.END_STREAM, 1, Buffer.concat([Buffer.from([2]), Buffer.from("hey"), Buffer.alloc(2)]));
    t.feed(f.subarray(0, 10));
    expect(recs[0]!.events).toEqual([]);
    t.feed(f.subarray(10));
    expect(recs[0]!.events).toEqual(["data:3", "end"]);
  });
});

describe("DATA", () => {
  test("padded DATA of length 0 (no pad length octet): GOAWAY PROTOCOL_ERROR", () => {
    const { t, out, closes } = server();
    t.feed(headersFrame(1), rawFrame(T.DATA, F.PADDED, 1));
    expect(goawayOf(out())).toEqual({ last: 1, code: PROTOCOL_ERROR, debug: "padded DATA frame without a pad length" });
    expect(closes[0]!.code).toBe(PROTOCOL_ERROR);
  });

  test("padding longer than the rest of the frame: GOAWAY PROTOCOL_ERROR naming it", () => {
    const { t, out } = server();
    t.feed(headersFrame(1), rawFrame(T.DATA, F.PADDED, 1, Buffer.from([4, 0x61, 0, 0])));
    expect(goawayOf(out())).toEqual({ last: 1, code: PROTOCOL_ERROR, debug: "DATA padding longer than the frame" });
  });

  test("DATA filling the stream window exactly is accepted; one byte more is FLOW_CONTROL_ERROR on the stream", () => {
    const { t, recs, out } = server({ streamWindow: 1000 }, (r) => r.st.pause());
    t.feed(headersFrame(1), data(1, Buffer.alloc(1000)), SENTINEL);
    expect(recs[0]!.bytes).toBe(1000);
    let fs = out();
    expect(rstsOf(fs)).toEqual([]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(data(1, "x"));
    fs = out();
    expect(rstsOf(fs)).toEqual([[1, FLOW_CONTROL_ERROR]]);
    expect(recs[0]!.reset).toEqual([FLOW_CONTROL_ERROR, "peer exceeded the stream flow-control window"]);
    expect(goawayOf(fs)).toBeUndefined();
  });

  test("DATA filling the connection window exactly is accepted and credited back", () => {
    const { t, recs, out } = server({ connectionWindow: 65_535, maxFrameSize: 65_535 });
    t.feed(headersFrame(1), data(1, Buffer.alloc(65_535)));
    expect(recs[0]!.bytes).toBe(65_535);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(windowUpdates(fs)).toContainEqual([0, 65_535]);
  });

  test("DATA one byte beyond the connection window: GOAWAY FLOW_CONTROL_ERROR naming it", () => {
    const { t, out, recs } = server({ connectionWindow: 65_535, maxFrameSize: 70_000 });
    t.feed(headersFrame(1), data(1, Buffer.alloc(65_536)));
    expect(goawayOf(out())).toEqual({ last: 1, code: FLOW_CONTROL_ERROR, debug: "peer exceeded the connection flow-control window" });
    expect(recs[0]!.bytes).toBe(0);
  });

  test("DATA after the peer's END_STREAM: RST_STREAM STREAM_CLOSED, nothing delivered, the connection lives on", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM), data(1, "late"), SENTINEL);
    expect(recs[0]!.events).toEqual(["end", "reset:5", "close"]);
    expect(recs[0]!.reset).toEqual([STREAM_CLOSED, "DATA after the peer ended the stream"]);
    const fs = out();
    expect(rstsOf(fs)).toEqual([[1, STREAM_CLOSED]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    expect(goawayOf(fs)).toBeUndefined();
  });

  test("HEADERS after the peer's END_STREAM: RST_STREAM STREAM_CLOSED, not delivered, the connection lives on (RFC 9113 §5.1)", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM), headersFrame(1, [["grpc-status", "0"]], F.END_HEADERS | F.END_STREAM), SENTINEL);
    expect(recs[0]!.events).toEqual(["end", "reset:5", "close"]);
    expect(recs[0]!.reset).toEqual([STREAM_CLOSED, "HEADERS after the peer ended the stream"]);
    const fs = out();
    expect(rstsOf(fs)).toEqual([[1, STREAM_CLOSED]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    expect(goawayOf(fs)).toBeUndefined();
  });

  test("DATA on a stream we reset: dropped without an error, its bytes still credited to the connection", () => {
    const { t, recs, out } = server({ connectionWindow: 65_535 });
    t.feed(headersFrame(1));
    recs[0]!.st.reset(CANCEL);
    expect(rstsOf(out())).toEqual([[1, CANCEL]]);
    t.feed(data(1, Buffer.alloc(16_384), F.END_STREAM), SENTINEL);
    expect(recs[0]!.events).toEqual(["close"]);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(windowUpdates(fs)).toEqual([[0, 16_384]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("a stream reset by its handler in the middle of a frame: the rest is not delivered and its END_STREAM not reported", () => {
    const { t, recs, out } = server({ connectionWindow: 65_535 }, (r) => {
      const onData = r.st.handlers.onData!;
      r.st.handlers.onData = (c) => {
        onData(c);
        r.st.reset(CANCEL);
      };
    });
    const f = data(1, Buffer.alloc(16_384), F.END_STREAM);
    t.feed(headersFrame(1), f.subarray(0, 9 + 4000));
    t.feed(f.subarray(9 + 4000), SENTINEL);
    expect(recs[0]!.events).toEqual(["data:4000", "close"]);
    const fs = out();
    expect(rstsOf(fs)).toEqual([[1, CANCEL]]);
    expect(windowUpdates(fs)).toEqual([[0, 16_384]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("server: DATA on the highest stream after it closed is dropped; on a higher, idle one it is a PROTOCOL_ERROR", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1));
    recs[0]!.st.reset(CANCEL);
    t.feed(data(1, "x"), SENTINEL);
    let fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(data(3, "x"));
    fs = out();
    expect(goawayOf(fs)).toEqual({ last: 1, code: PROTOCOL_ERROR, debug: "DATA on idle stream 3" });
  });

  test("client: DATA on a stream it opened and reset is dropped; on one it never opened it is a PROTOCOL_ERROR", () => {
    const { t, s, out } = client();
    const a = record(s.request(GRPC_REQUEST));
    a.st.reset(CANCEL);
    t.feed(data(1, "x"), SENTINEL);
    let fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(data(3, "x"));
    fs = out();
    expect(goawayOf(fs)?.code).toBe(PROTOCOL_ERROR);
    expect(goawayOf(fs)?.debug).toBe("DATA on idle stream 3");
  });
});

describe("HEADERS and CONTINUATION", () => {
  test("a frame on the same stream inside a header block: GOAWAY PROTOCOL_ERROR", () => {
    for (const f of [data(1, "x"), rst(1, CANCEL), headersFrame(1)]) {
      const { t, out, recs } = server();
      t.feed(rawFrame(T.HEADERS, 0, 1, literalBlock(GRPC_REQUEST).subarray(0, 5)), f);
      expect(goawayOf(out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "header block interrupted by another frame" });
      expect(recs).toEqual([]);
    }
  });

  test("CONTINUATION without HEADERS names it", () => {
    const { t, out } = server();
    t.feed(rawFrame(T.CONTINUATION, F.END_HEADERS, 1, literalBlock(GRPC_REQUEST)));
    expect(goawayOf(out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "CONTINUATION without HEADERS" });
  });

  // Undecodable bytes (0xff: an integer that overflows) tell the two outcomes apart: under the
  // limit the block is decoded and fails as COMPRESSION_ERROR; over it, ENHANCE_YOUR_CALM first.
  const junk = (n: number) => Buffer.alloc(n, 0xff);
  test("a header block of exactly twice maxHeaderListSize is decoded; one byte more is ENHANCE_YOUR_CALM", () => {
    const a = server({ maxHeaderListSize: 1000 });
    a.t.feed(
      rawFrame(T.HEADERS, F.PADDED, 1, Buffer.concat([Buffer.from([0]), junk(1000)])),
      rawFrame(T.CONTINUATION, 0, 1, junk(1000)),
      rawFrame(T.CONTINUATION, F.END_HEADERS, 1),
    );
    expect(goawayOf(a.out())?.code).toBe(COMPRESSION_ERROR);
    const b = server({ maxHeaderListSize: 1000 });
    b.t.feed(rawFrame(T.HEADERS, 0, 1, junk(1000)), rawFrame(T.CONTINUATION, 0, 1, junk(1001)));
    expect(goawayOf(b.out())).toEqual({ last: 0, code: ENHANCE_YOUR_CALM, debug: "header block too large" });
  });

  test("without maxHeaderListSize the limit is 512 KiB (twice 256 KiB)", () => {
    const parts = [rawFrame(T.HEADERS, 0, 1, junk(16_384))];
    for (let i = 1; i < 32; i++) parts.push(rawFrame(T.CONTINUATION, 0, 1, junk(16_384)));
    const a = server();
    a.t.feed(...parts, rawFrame(T.CONTINUATION, F.END_HEADERS, 1));
    expect(goawayOf(a.out())?.code).toBe(COMPRESSION_ERROR);
    const b = server();
    b.t.feed(...parts, rawFrame(T.CONTINUATION, F.END_HEADERS, 1, junk(1)));
    expect(goawayOf(b.out())?.code).toBe(ENHANCE_YOUR_CALM);
  });

  test("padded HEADERS: no pad length is an error; a pad length of 0 and nothing else is an empty header block", () => {
    const a = server();
    a.t.feed(rawFrame(T.HEADERS, F.PADDED | F.END_HEADERS, 1));
    expect(goawayOf(a.out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "padded HEADERS without a pad length" });
    const b = server();
    b.t.feed(rawFrame(T.HEADERS, F.PADDED | F.END_HEADERS, 1, Buffer.from([0])), SENTINEL);
    expect(b.recs.map((r) => [r.st.id, r.headers])).toEqual([[1, []]]);
    expect(pingAcks(b.out())).toEqual(["sentinel"]);
  });

  test("HEADERS whose padding or priority runs past the frame: PROTOCOL_ERROR", () => {
    const a = server();
    a.t.feed(rawFrame(T.HEADERS, F.PADDED | F.END_HEADERS, 1, Buffer.from([3, 0x82, 0])));
    expect(goawayOf(a.out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "HEADERS padding/priority longer than the frame" });
    const b = server();
    b.t.feed(rawFrame(T.HEADERS, F.PRIORITY | F.END_HEADERS, 1, Buffer.from([0, 0, 0, 0])));
    expect(goawayOf(b.out())?.code).toBe(PROTOCOL_ERROR);
    const c = server();
    c.t.feed(rawFrame(T.HEADERS, F.PRIORITY | F.END_HEADERS, 1, Buffer.from([0, 0, 0, 0, 16])), SENTINEL);
    expect(c.recs.map((r) => r.headers)).toEqual([[]]);
  });

  test("trailers on an open stream reach onHeaders with endStream, then onEnd", () => {
    const { t, recs } = server();
    t.feed(headersFrame(1), data(1, "ab"), headersFrame(1, [["grpc-status", "0"]], F.END_HEADERS | F.END_STREAM));
    expect(recs.length).toBe(1);
    expect(recs[0]!.events).toEqual(["data:2", "headers:true", "end"]);
    expect(recs[0]!.trailers).toEqual([[["grpc-status", "0"]]]);
  });

  test("HEADERS on a stream we closed, or below the last stream opened, are ignored", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1));
    recs[0]!.st.reset(CANCEL);
    t.feed(headersFrame(1), SENTINEL);
    expect(recs.length).toBe(1);
    expect(pingAcks(out())).toEqual(["sentinel"]);
    t.feed(headersFrame(5), headersFrame(3), SENTINEL);
    expect(recs.map((r) => r.st.id)).toEqual([1, 5]);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(rstsOf(fs)).toEqual([]);
  });

  test("a request with END_STREAM: remoteEnded is already set in onStream, and onEnd follows it", () => {
    const seen: boolean[] = [];
    const { t, recs } = server({}, (r) => seen.push(r.st.remoteEnded));
    t.feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM), headersFrame(3));
    expect(seen).toEqual([true, false]);
    expect(recs[0]!.events).toEqual(["end"]);
    expect(recs[1]!.events).toEqual([]);
  });

  test("a request with END_STREAM answered and ended inside onStream closes the stream; onClose comes last", () => {
    const { t, recs, s } = server({}, (r) => r.st.respond([[":status", "200"]], true));
    t.feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM));
    expect(recs[0]!.events.at(-1)).toBe("close");
    expect(recs[0]!.events.filter((e) => e === "close").length).toBe(1);
    expect(s.streams.size).toBe(0);
  });

  test("a server with no onStream handler still opens the stream and keeps serving", () => {
    const { t, s, out } = server({ onStream: undefined });
    t.feed(headersFrame(1), SENTINEL);
    expect([...s.streams.keys()]).toEqual([1]);
    expect(pingAcks(out())).toEqual(["sentinel"]);
  });

  test("after the client's GOAWAY a new stream is refused; the open one is served to its end", () => {
    const { t, s, recs, out } = server();
    t.feed(headersFrame(1), goawayFrame(0, 0), headersFrame(3), SENTINEL);
    expect(recs.map((r) => r.st.id)).toEqual([1]);
    let fs = out();
    expect(rstsOf(fs)).toEqual([[3, REFUSED_STREAM]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    expect(s.closed).toBe(false);
    expect(recs[0]!.events).toEqual([]);
    recs[0]!.st.respond([[":status", "200"]]);
    recs[0]!.st.write(Buffer.from("ok"));
    fs = out();
    expect(fs.filter((f) => f.stream === 1).map((f) => f.type)).toEqual([T.HEADERS, T.DATA]);
  });

  test("client: HEADERS for a stream it forgot are decoded (the HPACK table stays in step) and ignored", () => {
    const { t, s, out } = client();
    const a = record(s.request(GRPC_REQUEST));
    a.st.reset(CANCEL);
    // literal with incremental indexing, new name "x-a: 1" (dynamic index 62)
    const indexed = Buffer.from([0x40, 3, 0x78, 0x2d, 0x61, 1, 0x31]);
    t.feed(rawFrame(T.HEADERS, F.END_HEADERS, 1, indexed), SENTINEL);
    expect(s.streams.size).toBe(0);
    expect(pingAcks(out())).toEqual(["sentinel"]);
    const b = record(s.request(GRPC_REQUEST));
    t.feed(rawFrame(T.HEADERS, F.END_HEADERS, 3, Buffer.from([0xbe])));
    expect(b.trailers).toEqual([[["x-a", "1"]]]);
    expect([...s.streams.keys()]).toEqual([3]);
  });
});

describe("WINDOW_UPDATE", () => {
  test("on a stream that is closed: ignored (the peer may credit it after we ended it, RFC 9113 §5.1)", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1));
    recs[0]!.st.reset(CANCEL);
    t.feed(windowUpdate(1, 100), windowUpdate(1, 0), SENTINEL);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(rstsOf(fs)).toEqual([[1, CANCEL]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("server: on an idle stream (above the last the client opened, or even) GOAWAY PROTOCOL_ERROR naming it (§5.1)", () => {
    for (const [id, last] of [
      [9, 1],
      [2, 1],
    ] as const) {
      const { t, out, s } = server();
      t.feed(headersFrame(1), windowUpdate(id, 5), SENTINEL);
      const fs = out();
      expect(goawayOf(fs)).toEqual({ last, code: PROTOCOL_ERROR, debug: `WINDOW_UPDATE on idle stream ${id}` });
      expect(pingAcks(fs)).toEqual([]);
      expect(s.closed).toBe(true);
    }
  });

  test("client: on a stream it has not opened yet, or an even one, GOAWAY PROTOCOL_ERROR; on one it closed, ignored", () => {
    const a = client();
    const st = record(a.s.request(GRPC_REQUEST, true));
    a.t.feed(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, literalBlock([[":status", "200"]])), windowUpdate(1, 7), SENTINEL);
    expect(st.events).toEqual(["headers:true", "end", "close"]);
    let fs = a.out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    a.t.feed(windowUpdate(3, 7));
    expect(goawayOf(a.out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "WINDOW_UPDATE on idle stream 3" });
    const b = client();
    b.t.feed(windowUpdate(2, 7));
    fs = b.out();
    expect(goawayOf(fs)).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "WINDOW_UPDATE on idle stream 2" });
  });

  test("the connection window may reach 2^31-1 exactly; one more is FLOW_CONTROL_ERROR", () => {
    const { t, out } = server();
    t.feed(windowUpdate(0, 2_147_483_647 - 65_535), SENTINEL);
    let fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(windowUpdate(0, 1));
    fs = out();
    expect(goawayOf(fs)).toEqual({ last: 0, code: FLOW_CONTROL_ERROR, debug: "connection window above 2^31-1" });
  });

  test("a stream window may reach 2^31-1 exactly; one more is FLOW_CONTROL_ERROR on that stream", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1), windowUpdate(1, 2_147_483_647 - 65_535), SENTINEL);
    let fs = out();
    expect(rstsOf(fs)).toEqual([]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(windowUpdate(1, 1));
    fs = out();
    expect(rstsOf(fs)).toEqual([[1, FLOW_CONTROL_ERROR]]);
    expect(recs[0]!.reset).toEqual([FLOW_CONTROL_ERROR, "stream window above 2^31-1"]);
    expect(goawayOf(fs)).toBeUndefined();
  });

  test("a stream WINDOW_UPDATE of 0 resets that stream with PROTOCOL_ERROR, naming it", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1), windowUpdate(1, 0));
    expect(rstsOf(out())).toEqual([[1, PROTOCOL_ERROR]]);
    expect(recs[0]!.reset).toEqual([PROTOCOL_ERROR, "stream WINDOW_UPDATE of 0"]);
  });

  test("a connection WINDOW_UPDATE resumes a stream blocked on the connection window", () => {
    const { t, recs, out } = server({}, (r) => {
      r.st.respond([[":status", "200"]]);
      r.st.write(Buffer.alloc(70_000, 1));
    });
    t.feed(settings([S.INITIAL_WINDOW_SIZE, 1 << 20]), headersFrame(1));
    const sent = (fs: RawFrame[]) => fs.filter((f) => f.type === T.DATA).reduce((n, f) => n + f.payload.length, 0);
    expect(sent(out())).toBe(65_535);
    t.feed(windowUpdate(0, 10_000));
    expect(sent(out())).toBe(4465);
    expect(recs[0]!.st.bufferedBytes).toBe(0);
  });
});

describe("PING", () => {
  test("a PING ACK from the peer is not answered; a PING is, with its payload", () => {
    const { t, out } = server();
    t.feed(ping(Buffer.from("ackackac"), true), ping(Buffer.from("12345678")));
    expect(
      out()
        .filter((f) => f.type === T.PING)
        .map((f) => [f.flags, f.stream, f.payload.toString()]),
    ).toEqual([[F.ACK, 0, "12345678"]]);
  });

  test("PING errors name themselves", () => {
    const a = server();
    a.t.feed(rawFrame(T.PING, 0, 3, Buffer.alloc(8)));
    expect(goawayOf(a.out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "PING on a stream" });
  });

  test("without a ping policy, back-to-back PINGs are all answered", () => {
    const { t, out } = server();
    t.feed(...Array.from({ length: 20 }, (_, i) => ping(Buffer.from(`ping${String(i).padStart(4, "0")}`))));
    const acks = pingAcks(out());
    expect(acks.length).toBe(20);
    expect(acks[19]).toBe("ping0019");
  });

  test("maxStrikes 0: the first PING is never a strike, the second too soon is; GOAWAY names the last stream; the socket lingers", () => {
    const { t, out, closes, s } = server({ pingPolicy: { minIntervalMs: 1e12, maxStrikes: 0 } });
    t.feed(headersFrame(1), ping(Buffer.from("first...")));
    let fs = out();
    expect(pingAcks(fs)).toEqual(["first..."]);
    expect(goawayOf(fs)).toBeUndefined();
    t.feed(ping(Buffer.from("second..")));
    fs = out();
    expect(pingAcks(fs)).toEqual([]);
    expect(goawayOf(fs)).toEqual({ last: 1, code: ENHANCE_YOUR_CALM, debug: "too_many_pings" });
    expect(t.shutdowns).toBe(1); // ended, still reading: the GOAWAY is not lost to a reset
    expect(s.closed).toBe(true);
    expect(closes[0]!.code).toBe(ENHANCE_YOUR_CALM);
    expect(closes[0]!.message).toBe("client pings more often than every 1000000000000 ms (too_many_pings)");
  });

  test("a strike is a PING less than minIntervalMs after the previous one (on the injected clock)", () => {
    const { t, out, clock } = server({ pingPolicy: { minIntervalMs: 100, maxStrikes: 0 } });
    t.feed(ping(Buffer.from("t=0.....")));
    clock.advance(100); // exactly the interval: not a strike
    t.feed(ping(Buffer.from("t=100...")));
    let fs = out();
    expect(pingAcks(fs)).toEqual(["t=0.....", "t=100..."]);
    expect(goawayOf(fs)).toBeUndefined();
    clock.advance(99); // 99 ms after the previous one
    t.feed(ping(Buffer.from("t=199...")));
    fs = out();
    expect(pingAcks(fs)).toEqual([]);
    expect(goawayOf(fs)?.code).toBe(ENHANCE_YOUR_CALM);
  });

  test("the first PING on a clock reading 0 counts as a previous one: a second at once is a strike", () => {
    const { t, out } = server({ pingPolicy: { minIntervalMs: 100, maxStrikes: 0 }, clock: new ManualClock(0) });
    t.feed(ping(Buffer.from("first...")), ping(Buffer.from("second..")));
    const fs = out();
    expect(pingAcks(fs)).toEqual(["first..."]);
    expect(goawayOf(fs)?.code).toBe(ENHANCE_YOUR_CALM);
  });

  test("minIntervalMs 0: no PING is ever a strike", () => {
    const { t, out } = server({ pingPolicy: { minIntervalMs: 0, maxStrikes: 0 } });
    t.feed(ping(Buffer.from("one.....")), ping(Buffer.from("two.....")), ping(Buffer.from("three...")));
    const fs = out();
    expect(pingAcks(fs)).toEqual(["one.....", "two.....", "three..."]);
    expect(goawayOf(fs)).toBeUndefined();
  });

  test("maxStrikes 2: two strikes are tolerated, the third ends the connection", () => {
    const { t, out } = server({ pingPolicy: { minIntervalMs: 1e12, maxStrikes: 2 } });
    t.feed(ping(Buffer.from("p1......")), ping(Buffer.from("p2......")), ping(Buffer.from("p3......")));
    let fs = out();
    expect(pingAcks(fs).length).toBe(3);
    expect(goawayOf(fs)).toBeUndefined();
    t.feed(ping(Buffer.from("p4......")));
    fs = out();
    expect(pingAcks(fs)).toEqual([]);
    expect(goawayOf(fs)?.code).toBe(ENHANCE_YOUR_CALM);
  });

  test("DATA we send starts the strike count and the interval over; HEADERS do not", () => {
    const { t, out, recs } = server({ pingPolicy: { minIntervalMs: 1e12, maxStrikes: 1 } });
    t.feed(headersFrame(1), ping(Buffer.from("p1......")), ping(Buffer.from("p2......"))); // first, strike 1
    recs[0]!.st.write(Buffer.from("x"));
    t.feed(ping(Buffer.from("p3......")), ping(Buffer.from("p4......"))); // first again, strike 1
    let fs = out();
    expect(pingAcks(fs)).toEqual(["p1......", "p2......", "p3......", "p4......"]);
    expect(goawayOf(fs)).toBeUndefined();
    recs[0]!.st.respond([[":status", "200"]]);
    t.feed(ping(Buffer.from("p5......"))); // strike 2 > 1: HEADERS did not start over
    fs = out();
    expect(pingAcks(fs)).toEqual([]);
    expect(goawayOf(fs)?.code).toBe(ENHANCE_YOUR_CALM);
  });
});

describe("RST_STREAM", () => {
  test("of 5 bytes: GOAWAY FRAME_SIZE_ERROR", () => {
    const { t, out } = server();
    t.feed(headersFrame(1), rawFrame(T.RST_STREAM, 0, 1, Buffer.alloc(5)));
    expect(goawayOf(out())).toEqual({ last: 1, code: FRAME_SIZE_ERROR, debug: "RST_STREAM must be 4 bytes" });
  });

  test("onReset gets the peer's code and a reason naming it; a reset of a closed stream is ignored", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1), rst(1, CANCEL), rst(1, CANCEL), SENTINEL);
    expect(recs[0]!.events).toEqual(["reset:8", "close"]);
    expect(recs[0]!.reset).toEqual([CANCEL, "stream reset by the peer (CANCEL)"]);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("a reset of a stream we closed (both sides ended) is ignored: the peer may reset it as we end it (§5.1)", () => {
    const { t, recs, out } = server();
    t.feed(headersFrame(1, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM));
    recs[0]!.st.respond([[":status", "200"]], true);
    t.feed(rst(1, CANCEL), SENTINEL);
    const fs = out();
    expect(recs[0]!.events).toEqual(["end", "close"]);
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("server: a reset of an idle stream is GOAWAY PROTOCOL_ERROR naming it (§5.1); nothing after it is acted on", () => {
    const { t, out, s } = server();
    t.feed(headersFrame(1), rst(7, CANCEL), SENTINEL);
    const fs = out();
    expect(goawayOf(fs)).toEqual({ last: 1, code: PROTOCOL_ERROR, debug: "RST_STREAM on idle stream 7" });
    expect(pingAcks(fs)).toEqual([]);
    expect(s.closed).toBe(true);
  });

  test("client: a reset of a stream it never opened is GOAWAY PROTOCOL_ERROR; of one it reset, ignored", () => {
    const { t, s, out } = client();
    record(s.request(GRPC_REQUEST)).st.reset(CANCEL);
    t.feed(rst(1, CANCEL), SENTINEL);
    let fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(rst(3, CANCEL));
    fs = out();
    expect(goawayOf(fs)).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "RST_STREAM on idle stream 3" });
  });

  test("an idle-stream reset is refused before the reset budget counts it", () => {
    const { t, out, closes } = server({ resetBudget: { burst: 0, perSecond: 0.001 } });
    t.feed(rst(1, CANCEL));
    expect(goawayOf(out())?.code).toBe(PROTOCOL_ERROR);
    expect(closes[0]!.message).toBe("RST_STREAM on idle stream 1");
  });

  test("reset budget: a burst of 3 is allowed, the 4th reset is GOAWAY ENHANCE_YOUR_CALM too_many_resets, the socket lingers", () => {
    const { t, s, out, closes } = server({ resetBudget: { burst: 3, perSecond: 0.001 } });
    t.feed(headersFrame(1), rst(1, CANCEL), headersFrame(3), rst(3, CANCEL), headersFrame(5), rst(5, CANCEL), SENTINEL);
    let fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    t.feed(headersFrame(7), rst(7, CANCEL));
    fs = out();
    expect(goawayOf(fs)).toEqual({ last: 7, code: ENHANCE_YOUR_CALM, debug: "too_many_resets" });
    expect(s.closed).toBe(true);
    expect(t.shutdowns).toBe(1);
    expect(t.destroyed).toBe(false);
    expect(closes[0]!.code).toBe(ENHANCE_YOUR_CALM);
    expect(closes[0]!.message).toBe("client reset streams faster than 0.001/s after a burst of 3 (too_many_resets)");
  });

  test("without a reset budget (and on a client) resets are never counted", () => {
    const a = server();
    a.t.feed(...Array.from({ length: 50 }, (_, i) => [headersFrame(2 * i + 1), rst(2 * i + 1, CANCEL)]).flat(), SENTINEL);
    expect(goawayOf(a.out())).toBeUndefined();
    expect(a.s.closed).toBe(false);
    const b = client({ resetBudget: { burst: 1, perSecond: 0.001 } });
    const streams = [record(b.s.request(GRPC_REQUEST)), record(b.s.request(GRPC_REQUEST)), record(b.s.request(GRPC_REQUEST))];
    b.t.feed(rst(1, CANCEL), rst(3, CANCEL), rst(5, CANCEL), SENTINEL);
    expect(streams.map((r) => r.reset?.[0])).toEqual([CANCEL, CANCEL, CANCEL]);
    expect(goawayOf(b.out())).toBeUndefined();
    expect(b.s.closed).toBe(false);
  });
});

describe("GOAWAY from the peer", () => {
  test("of exactly 8 bytes: recorded, reported, and with no stream open the session closes cleanly", () => {
    const { t, s, goaways, closes } = server();
    t.feed(goawayFrame(0, 0));
    expect(s.goaway).toEqual({ code: 0, lastStreamId: 0, debug: "" });
    expect(goaways).toEqual([[0, 0, ""]]);
    expect(s.closed).toBe(true);
    expect(closes).toEqual([undefined]);
    expect(t.destroyed).toBe(true);
  });

  test("of 7 bytes: GOAWAY FRAME_SIZE_ERROR", () => {
    const { t, out, s } = server();
    t.feed(rawFrame(T.GOAWAY, 0, 0, Buffer.alloc(7)));
    expect(goawayOf(out())).toEqual({ last: 0, code: FRAME_SIZE_ERROR, debug: "GOAWAY shorter than 8 bytes" });
    expect(s.goaway).toBeUndefined();
  });

  test("with an error code and no stream open: the session closes with that code and the peer's reason", () => {
    const { t, closes, s } = server({ onGoaway: undefined });
    t.feed(goawayFrame(0, ENHANCE_YOUR_CALM, "calm"));
    expect(s.goaway).toEqual({ code: ENHANCE_YOUR_CALM, lastStreamId: 0, debug: "calm" });
    expect(closes.length).toBe(1);
    expect(closes[0]!.code).toBe(ENHANCE_YOUR_CALM);
    expect(closes[0]!.message).toBe("the peer sent GOAWAY (ENHANCE_YOUR_CALM: calm)");
  });

  test("server: the client's GOAWAY(NO_ERROR) leaves its open stream alone", () => {
    const { t, s, recs, goaways, out } = server();
    t.feed(headersFrame(1), goawayFrame(0, 0), SENTINEL);
    expect(goaways).toEqual([[0, 0, ""]]);
    expect(recs[0]!.events).toEqual([]);
    expect(s.closed).toBe(false);
    expect([...s.streams.keys()]).toEqual([1]);
    expect(pingAcks(out())).toEqual(["sentinel"]);
  });

  test("client: streams above the last id are refused, the one at it lives on", () => {
    const { t, s, closes } = client();
    const a = record(s.request(GRPC_REQUEST));
    const b = record(s.request(GRPC_REQUEST));
    t.feed(goawayFrame(1, 0));
    expect(b.reset).toEqual([REFUSED_STREAM, "the peer sent GOAWAY (NO_ERROR)"]);
    expect(a.events).toEqual([]);
    expect(s.closed).toBe(false);
    expect(closes).toEqual([]);
    expect([...s.streams.keys()]).toEqual([1]);
  });

  test("client: an error code resets every stream at or below the last id with it, then the session closes with it", () => {
    const { t, s, closes } = client();
    const a = record(s.request(GRPC_REQUEST));
    const b = record(s.request(GRPC_REQUEST));
    const c = record(s.request(GRPC_REQUEST));
    t.feed(goawayFrame(3, PROTOCOL_ERROR, "bad"));
    expect(a.reset).toEqual([PROTOCOL_ERROR, "the peer sent GOAWAY (PROTOCOL_ERROR: bad)"]);
    expect(b.reset?.[0]).toBe(PROTOCOL_ERROR);
    expect(c.reset?.[0]).toBe(REFUSED_STREAM);
    expect(s.closed).toBe(true);
    expect(closes[0]!.code).toBe(PROTOCOL_ERROR);
  });
});

describe("PRIORITY, PUSH_PROMISE", () => {
  test("PRIORITY of 5 bytes is ignored; of 6 is FRAME_SIZE_ERROR", () => {
    const { t, out } = server();
    t.feed(rawFrame(T.PRIORITY, 0, 1, Buffer.alloc(5)), SENTINEL);
    expect(pingAcks(out())).toEqual(["sentinel"]);
    t.feed(rawFrame(T.PRIORITY, 0, 1, Buffer.alloc(6)));
    expect(goawayOf(out())).toEqual({ last: 0, code: FRAME_SIZE_ERROR, debug: "PRIORITY must be 5 bytes" });
  });

  test("PUSH_PROMISE names itself", () => {
    const { t, out } = server();
    t.feed(rawFrame(T.PUSH_PROMISE, F.END_HEADERS, 1, u32(2)));
    expect(goawayOf(out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "PUSH_PROMISE received with push disabled" });
  });
});

describe("SETTINGS", () => {
  test("the peer's SETTINGS ACK is not answered; each SETTINGS is ACKed once", () => {
    const { t, out } = server();
    t.feed(SETTINGS_ACK, SETTINGS_ACK, settings([S.ENABLE_PUSH, 0]), SENTINEL);
    const fs = out();
    expect(settingsAcks(fs)).toBe(1);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("errors name the setting or the frame", () => {
    const cases: [Buffer, number, string][] = [
      [settings([S.ENABLE_PUSH, 2]), PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH must be 0 or 1"],
      [settings([S.MAX_FRAME_SIZE, 16_383]), PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE 16383 out of range"],
      [settings([S.MAX_FRAME_SIZE, 16_777_216]), PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE 16777216 out of range"],
      [settings([S.INITIAL_WINDOW_SIZE, 2_147_483_648]), FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"],
      [rawFrame(T.SETTINGS, 0, 0, Buffer.alloc(12 + 5)), FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6"],
      [rawFrame(T.SETTINGS, F.ACK, 0, Buffer.alloc(6)), FRAME_SIZE_ERROR, "SETTINGS ACK with a payload"],
      [rawFrame(T.SETTINGS, 0, 1), PROTOCOL_ERROR, "SETTINGS on a stream"],
      [rawFrame(T.WINDOW_UPDATE, 0, 0, Buffer.alloc(5)), FRAME_SIZE_ERROR, "WINDOW_UPDATE must be 4 bytes"],
      [windowUpdate(0, 0), PROTOCOL_ERROR, "connection WINDOW_UPDATE of 0"],
      [rst(0, CANCEL), PROTOCOL_ERROR, "RST_STREAM on stream 0"],
      [data(0, "x"), PROTOCOL_ERROR, "DATA on stream 0"],
      [headersFrame(0), PROTOCOL_ERROR, "HEADERS on stream 0"],
      [headersFrame(2), PROTOCOL_ERROR, "client opened even stream 2"],
    ];
    for (const [f, code, debug] of cases) {
      const { t, out } = server();
      t.feed(f);
      expect({ debug, g: goawayOf(out()) }).toEqual({ debug, g: { last: 0, code, debug } });
    }
  });

  test("SETTINGS_ENABLE_PUSH 1 and the bounds of SETTINGS_MAX_FRAME_SIZE are accepted", () => {
    const { t, s, out } = server();
    t.feed(settings([S.ENABLE_PUSH, 1], [S.MAX_FRAME_SIZE, 16_777_215]));
    let fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(settingsAcks(fs)).toBe(1);
    expect(s.peerMaxFrame).toBe(16_777_215);
    t.feed(settings([S.MAX_FRAME_SIZE, 16_384]));
    fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(s.peerMaxFrame).toBe(16_384);
  });

  test("the peer's SETTINGS_MAX_FRAME_SIZE 20,000 makes our DATA frames 20,000 bytes", () => {
    const { t, out } = server({}, (r) => {
      r.st.respond([[":status", "200"]]);
      r.st.write(Buffer.alloc(50_000, 1));
    });
    t.feed(settings([S.MAX_FRAME_SIZE, 20_000], [S.INITIAL_WINDOW_SIZE, 1 << 20]), windowUpdate(0, 1 << 20), headersFrame(1));
    expect(
      out()
        .filter((f) => f.type === T.DATA)
        .map((f) => f.payload.length),
    ).toEqual([20_000, 20_000, 10_000]);
  });

  test("SETTINGS_MAX_CONCURRENT_STREAMS from the server limits the client's requests", () => {
    const { t, s } = client();
    t.feed(settings([S.MAX_CONCURRENT_STREAMS, 1]));
    s.request(GRPC_REQUEST);
    expect(() => s.request(GRPC_REQUEST)).toThrow(expect.objectContaining({ code: REFUSED_STREAM }));
  });

  test("SETTINGS_INITIAL_WINDOW_SIZE of 2^31-1 is accepted and moves an open stream's window there; a stream already above 65,535 overflows", () => {
    const a = server();
    a.t.feed(headersFrame(1), settings([S.INITIAL_WINDOW_SIZE, 2_147_483_647]));
    let fs = a.out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(settingsAcks(fs)).toBe(1);
    expect(a.recs[0]!.st.sendWindow).toBe(2_147_483_647);
    expect(a.s.peerInitialWindow).toBe(2_147_483_647);
    const b = server();
    b.t.feed(headersFrame(1), windowUpdate(1, 1), settings([S.INITIAL_WINDOW_SIZE, 2_147_483_647]));
    fs = b.out();
    expect(goawayOf(fs)).toEqual({ last: 1, code: FLOW_CONTROL_ERROR, debug: "SETTINGS_INITIAL_WINDOW_SIZE change takes stream 1's window above 2^31-1" });
  });

  test("a new SETTINGS_INITIAL_WINDOW_SIZE is the send window of streams opened after it", () => {
    const { t, recs } = server();
    t.feed(settings([S.INITIAL_WINDOW_SIZE, 100]), headersFrame(1));
    expect(recs[0]!.st.sendWindow).toBe(100);
  });

  test("SETTINGS_HEADER_TABLE_SIZE: unchanged (4096) owes no size update; a change owes one, once; repeating it owes none", () => {
    const { t, recs, out } = server();
    const firstByte = () => out().filter((f) => f.type === T.HEADERS)[0]!.payload[0];
    t.feed(settings([S.HEADER_TABLE_SIZE, 4096]), headersFrame(1));
    recs[0]!.st.respond([[":status", "200"]]);
    expect(firstByte()).not.toBe(0x20);
    t.feed(settings([S.HEADER_TABLE_SIZE, 0]), headersFrame(3));
    recs[1]!.st.respond([[":status", "200"]]);
    expect(firstByte()).toBe(0x20); // a dynamic table size update to 0 (RFC 7541 §6.3)
    t.feed(settings([S.HEADER_TABLE_SIZE, 0]), headersFrame(5));
    recs[2]!.st.respond([[":status", "200"]]);
    expect(firstByte()).not.toBe(0x20);
  });
});

describe("chunk boundaries", () => {
  const block = literalBlock([...GRPC_REQUEST, ["x-chunk", "c".repeat(300)]]);
  const wire = Buffer.concat([
    CLIENT_PREFACE,
    settings([S.INITIAL_WINDOW_SIZE, 1 << 20]),
    rawFrame(T.HEADERS, F.PADDED | F.PRIORITY, 1, Buffer.concat([Buffer.from([3]), Buffer.from([0, 0, 0, 0, 9]), block.subarray(0, 100), Buffer.alloc(3)])),
    rawFrame(T.CONTINUATION, F.END_HEADERS, 1, block.subarray(100)),
    rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([4]), Buffer.from("first "), Buffer.alloc(4)])),
    rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([3]), Buffer.alloc(3)])),
    ping(Buffer.from("pingpong")),
    rawFrame(T.DATA, 0, 1, Buffer.from("second ")),
    rawFrame(T.DATA, F.PADDED | F.END_STREAM, 1, Buffer.concat([Buffer.from([2]), Buffer.from("third"), Buffer.alloc(2)])),
    SENTINEL,
  ]);
  function check(chunks: Buffer[], what: string): void {
    const { t, s, recs, all } = rig("server", {}, undefined, false);
    for (const c of chunks) t.feed(c);
    const fs = all();
    const got = {
      closed: s.closed,
      streams: recs.map((r) => r.st.id),
      headers: recs[0]?.headers.length,
      events: recs[0]?.events.filter((e) => e === "end").length,
      data: recs[0]?.bytes,
      pings: pingAcks(fs),
      settingsAcks: settingsAcks(fs),
      goaway: goawayOf(fs),
    };
    expect({ what, ...got }).toEqual({
      what,
      closed: false,
      streams: [1],
      headers: 7,
      events: 1,
      data: 18,
      pings: ["pingpong", "sentinel"],
      settingsAcks: 1,
      goaway: undefined,
    });
  }

  test("the wire split in two at every offset parses the same", () => {
    for (let k = 1; k < wire.length; k++) check([wire.subarray(0, k), wire.subarray(k)], `split at ${k}`);
  });

  test("the wire one byte at a time parses the same", () => {
    check(
      Array.from({ length: wire.length }, (_, i) => wire.subarray(i, i + 1)),
      "byte by byte",
    );
  });

  test("a bad preface octet in a later chunk: GOAWAY PROTOCOL_ERROR naming the preface", () => {
    const bad = Buffer.from(CLIENT_PREFACE);
    bad[20] = 0x41;
    const { t, out, closes } = rig("server", {}, undefined, false);
    t.feed(bad.subarray(0, 10));
    expect(goawayOf(out())).toBeUndefined();
    t.feed(bad.subarray(10));
    expect(goawayOf(out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "not an HTTP/2 connection preface (h2c with prior knowledge expected)" });
    expect(closes[0]!.code).toBe(PROTOCOL_ERROR);
  });
});

describe("more edges", () => {
  test("a frame one byte over our SETTINGS_MAX_FRAME_SIZE: GOAWAY FRAME_SIZE_ERROR naming both sizes", () => {
    const { t, out } = server();
    t.feed(headersFrame(1), data(1, Buffer.alloc(16_385)));
    expect(goawayOf(out())).toEqual({ last: 1, code: FRAME_SIZE_ERROR, debug: "frame of 16385 bytes exceeds SETTINGS_MAX_FRAME_SIZE 16384" });
  });

  test("CONTINUATION on another stream inside a header block: GOAWAY PROTOCOL_ERROR", () => {
    const { t, out, recs } = server();
    const block = literalBlock(GRPC_REQUEST);
    t.feed(rawFrame(T.HEADERS, 0, 1, block.subarray(0, 5)), rawFrame(T.CONTINUATION, F.END_HEADERS, 3, block.subarray(5)));
    expect(goawayOf(out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "header block interrupted by another frame" });
    expect(recs).toEqual([]);
  });

  test("padding is credited back at once: the pad length octet and the padding both count", () => {
    const { t, recs, out } = server({ streamWindow: 1024 });
    // 1 + 255 octets of padding, no data: 256 = a quarter of the stream window
    t.feed(headersFrame(1), rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([255]), Buffer.alloc(255)])));
    expect(windowUpdates(out())).toEqual([[1, 256]]);
    expect(recs[0]!.bytes).toBe(0);
  });

  test("padded DATA: pad length 0 with data, all padding, and padding after data, each followed by a frame", () => {
    const { t, recs, out } = server();
    t.feed(
      headersFrame(1),
      rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([0]), Buffer.from("abc")])),
      SENTINEL,
      rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([5]), Buffer.alloc(5)])),
      SENTINEL,
      rawFrame(T.DATA, F.PADDED, 1, Buffer.concat([Buffer.from([7]), Buffer.from("hello"), Buffer.alloc(7)])),
      SENTINEL,
    );
    expect(recs[0]!.events).toEqual(["data:3", "data:5"]);
    const fs = out();
    expect(pingAcks(fs)).toEqual(["sentinel", "sentinel", "sentinel"]);
    expect(goawayOf(fs)).toBeUndefined();
  });

  test("MAX_CONCURRENT_STREAMS 2: the third stream is refused; once one closes, the next is accepted", () => {
    const { t, recs, out } = server({ maxConcurrentStreams: 2 });
    t.feed(headersFrame(1), headersFrame(3), headersFrame(5));
    expect(recs.map((r) => r.st.id)).toEqual([1, 3]);
    expect(rstsOf(out())).toEqual([[5, REFUSED_STREAM]]);
    t.feed(rst(1, CANCEL), headersFrame(7));
    expect(recs.map((r) => r.st.id)).toEqual([1, 3, 7]);
    expect(rstsOf(out())).toEqual([]);
  });
});
