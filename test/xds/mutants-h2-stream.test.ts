// One HTTP/2 stream's state and flow control (src/xds/h2/stream.ts), seen from the wire: our
// H2Session on a scripted in-memory transport, fed hand-built frames (test/xds/h2-support.ts) and
// read back as frames. Expected frame types, flags, error codes and window sizes are RFC 9113's
// literals. Covers the once-only guards (respond, end, reset, release, onEnd, onClose), credit
// held while paused and returned once on resume, the high-water mark and onDrain, empty writes,
// trailers both ways, and what a stream's handlers hear after it was reset from inside a handler.

import { describe, expect, test } from "bun:test";
import { H2Session, type H2SessionOptions, type H2Stream } from "../../src/xds/h2/session.ts";
import type { H2Transport, H2TransportEvents } from "../../src/xds/h2/transport.ts";
import { CLIENT_PREFACE, E, F, S, T, headersFrame, parseFrames, rawFrame, rst, settings, windowUpdate, type RawFrame } from "./h2-support.ts";

/** A transport that takes at most `room` bytes per write and keeps what it took. */
class MemTransport implements H2Transport {
  room = Infinity;
  readonly retainsWrites = true;
  destroyed = false;
  ended = false;
  private readonly taken: Buffer[] = [];
  private read = 0;
  ev: H2TransportEvents | undefined;
  write(data: Uint8Array): number {
    const n = Math.min(data.length, this.room);
    this.room -= n;
    this.taken.push(Buffer.from(data.subarray(0, n)));
    return n;
  }
  end(): void {
    this.ended = true;
  }
  shutdown(): void {
    this.ended = true;
  }
  destroy(): void {
    this.destroyed = true;
  }
  listen(ev: H2TransportEvents): void {
    this.ev = ev;
  }
  feed(...b: Buffer[]): void {
    this.ev!.data(Buffer.concat(b));
  }
  /** Frames written since the last call. */
  frames(): RawFrame[] {
    const all = parseFrames(Buffer.concat(this.taken));
    const out = all.slice(this.read);
    this.read = all.length;
    return out;
  }
}

/** What a stream's handlers heard, in order. */
function listen(st: H2Stream): string[] {
  const heard: string[] = [];
  st.handlers = {
    onHeaders: (h, end) => heard.push(`headers ${h.map(([k, v]) => `${k}=${v}`).join(",")} end=${end}`),
    onData: (c) => heard.push(`data ${Buffer.from(c).toString()}`),
    onEnd: () => heard.push("end"),
    onReset: (code, why) => heard.push(`reset ${code} ${why}`),
    onDrain: () => heard.push("drain"),
    onClose: () => heard.push("close"),
  };
  return heard;
}

const REQUEST: [string, string][] = [
  [":method", "POST"],
  [":path", "/x"],
];

/** Our server session with a peer that sent its preface and SETTINGS; `open(id)` has the peer open a stream. */
function server(opts: Partial<H2SessionOptions> = {}, peerSettings: [number, number][] = []) {
  const t = new MemTransport();
  const opened: { st: H2Stream; heard: string[] }[] = [];
  // Handlers go on as the stream opens, before a request's own END_STREAM is delivered.
  const session = new H2Session(t, { role: "server", ...opts, onStream: (st) => opened.push({ st, heard: listen(st) }) });
  t.feed(CLIENT_PREFACE, settings(...peerSettings));
  session.flush();
  t.frames(); // our SETTINGS and the ACK of theirs
  const open = (id: number, flags: number = F.END_HEADERS): { st: H2Stream; heard: string[] } => {
    const before = opened.length;
    t.feed(headersFrame(id, REQUEST, flags));
    expect(opened.length).toBe(before + 1);
    return opened[before]!;
  };
  return { t, session, open };
}

/** Frames written up to our ACK of a PING the peer sends now: what came before it is all that was written. */
function untilPingAck(t: MemTransport, session: H2Session): string[] {
  const tag = Buffer.from("sentinel");
  t.feed(rawFrame(T.PING, 0, 0, tag));
  session.flush();
  const fs = t.frames();
  const i = fs.findIndex((f) => f.type === T.PING && f.flags === F.ACK && f.payload.equals(tag));
  expect(i).toBe(fs.length - 1);
  return fs.slice(0, i).map(line);
}

/** type/flags/stream, then the payload where it is short and plain: DATA as text, RST_STREAM and WINDOW_UPDATE as their number. */
function line(f: RawFrame): string {
  const head = `${f.type}/${f.flags}/${f.stream}`;
  if (f.type === T.DATA) return `${head}/${f.payload.toString("latin1")}`;
  if (f.type === T.RST_STREAM || f.type === T.WINDOW_UPDATE) return `${head}/${f.payload.readUInt32BE(0)}`;
  return head;
}

const STATUS: [string, string][] = [[":status", "200"]];
const TRAILERS: [string, string][] = [["grpc-status", "0"]];
const dataFrame = (stream: number, text: string, flags = 0) => rawFrame(T.DATA, flags, stream, Buffer.from(text));
const ES_EH = F.END_STREAM | F.END_HEADERS; // 0x5
// Literal wire lines (RFC 9113 §6): type/flags/stream[/payload].
const HEADERS_1 = "1/4/1";
const HEADERS_END_1 = "1/5/1";

describe("respond", () => {
  test("with END_STREAM after the peer ended: HEADERS flags 0x5, the stream closes once, later calls send nothing", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1, ES_EH);
    expect(heard).toEqual(["end"]);
    st.respond(STATUS, true);
    expect(heard).toEqual(["end", "close"]);
    expect(session.streams.has(1)).toBe(false);
    expect(st.write(Buffer.from("late"))).toBe(true);
    st.end(TRAILERS);
    st.respond(STATUS);
    st.reset();
    expect(untilPingAck(t, session)).toEqual([HEADERS_END_1]);
    expect(heard).toEqual(["end", "close"]);
  });

  test("with END_STREAM while the peer's side is open: our side ends (no DATA, no second END_STREAM), the stream stays open", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    st.respond(STATUS, true);
    expect(st.write(Buffer.from("after"))).toBe(true);
    expect(st.writev(Buffer.from("a"), Buffer.from("b"))).toBe(true);
    st.end();
    st.respond(STATUS);
    expect(untilPingAck(t, session)).toEqual([HEADERS_END_1]);
    expect(st.bufferedBytes).toBe(0);
    expect(session.streams.has(1)).toBe(true);
    // The peer's END_STREAM closes it now.
    t.feed(dataFrame(1, "x", F.END_STREAM));
    expect(heard).toEqual(["data x", "end", "close"]);
  });

  test("without END_STREAM (the default): HEADERS flags 0x4, then DATA", () => {
    const { t, session, open } = server();
    const { st } = open(1);
    st.respond(STATUS);
    expect(st.write(Buffer.from("hi"))).toBe(true);
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/hi"]);
  });

  test("after a reset: no HEADERS", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    t.feed(rst(1, E.CANCEL));
    st.respond(STATUS);
    expect(untilPingAck(t, session)).toEqual([]);
    expect(heard).toEqual(["reset 8 stream reset by the peer (CANCEL)", "close"]);
  });
});

describe("write, writev, end after the stream's side is over", () => {
  test("after a local reset: write and writev say true and queue nothing, end sends nothing", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    st.respond(STATUS);
    st.reset();
    expect(st.write(Buffer.from("w"))).toBe(true);
    expect(st.writev(Buffer.from("a"), Buffer.from("b"))).toBe(true);
    st.end(TRAILERS);
    st.end();
    expect(st.bufferedBytes).toBe(0);
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, `${T.RST_STREAM}/0/1/${E.CANCEL}`]);
    expect(heard).toEqual(["close"]);
  });

  test("after end() while DATA waits for window: later writes are refused (true, nothing queued), a second end() changes nothing", () => {
    const { t, session, open } = server({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st, heard } = open(1, ES_EH);
    st.respond(STATUS);
    expect(st.write(Buffer.from("abc"))).toBe(true);
    st.end(TRAILERS);
    expect(st.write(Buffer.from("w"))).toBe(true);
    expect(st.writev(Buffer.from("v1"), Buffer.from("v2"))).toBe(true);
    st.end([["grpc-status", "13"]]);
    st.end();
    expect(st.bufferedBytes).toBe(3);
    expect(untilPingAck(t, session)).toEqual([HEADERS_1]);
    t.feed(windowUpdate(1, 100));
    expect(untilPingAck(t, session)).toEqual(["0/0/1/abc", HEADERS_END_1]);
    expect(heard).toEqual(["end", "close"]);
  });

  test("end() without trailers after queued DATA: END_STREAM rides on the last DATA frame", () => {
    const { t, session, open } = server({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st } = open(1);
    st.respond(STATUS);
    st.write(Buffer.from("abc"));
    st.end();
    expect(st.write(Buffer.from("late"))).toBe(true);
    t.feed(windowUpdate(1, 100));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/1/1/abc"]);
  });
});

describe("empty writes", () => {
  test("write of nothing sends no DATA frame and says true", () => {
    const { t, session, open } = server();
    const { st } = open(1);
    st.respond(STATUS);
    expect(st.write(new Uint8Array(0))).toBe(true);
    expect(untilPingAck(t, session)).toEqual([HEADERS_1]);
    st.write(Buffer.from("x"));
    expect(untilPingAck(t, session)).toEqual(["0/0/1/x"]);
  });

  test("writev of two empty pieces sends no DATA frame; an empty piece beside a full one is left out", () => {
    const { t, session, open } = server({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st } = open(1);
    st.respond(STATUS);
    expect(st.writev(new Uint8Array(0), new Uint8Array(0))).toBe(true);
    t.feed(windowUpdate(1, 100));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1]);
    st.writev(Buffer.from("abc"), Buffer.from("defgh"));
    expect(st.bufferedBytes).toBe(0);
    expect(untilPingAck(t, session)).toEqual(["0/0/1/abcdefgh"]);
  });

  test("writev counts both pieces as buffered until the window opens", () => {
    const { t, session, open } = server({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st } = open(1);
    st.respond(STATUS);
    st.writev(Buffer.from("abc"), Buffer.from("defgh"));
    expect(st.bufferedBytes).toBe(8);
    st.writev(new Uint8Array(0), Buffer.from("ij"));
    expect(st.bufferedBytes).toBe(10);
    t.feed(windowUpdate(1, 4));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/abcd"]);
    expect(st.bufferedBytes).toBe(6);
    t.feed(windowUpdate(1, 100));
    expect(untilPingAck(t, session)).toEqual(["0/0/1/efghij"]);
    expect(st.bufferedBytes).toBe(0);
  });
});

describe("reset and abort", () => {
  test("reset(): RST_STREAM CANCEL (8) once, queued DATA dropped; the handlers hear onClose only, once", () => {
    const { t, session, open } = server({}, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st, heard } = open(1);
    st.respond(STATUS);
    st.write(Buffer.from("queued"));
    st.end(TRAILERS);
    st.reset();
    st.reset(E.INTERNAL_ERROR);
    st.abort(E.PROTOCOL_ERROR, "twice");
    expect(st.bufferedBytes).toBe(0);
    t.feed(windowUpdate(0, 1000)); // the connection's window: nothing is left to send
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, `${T.RST_STREAM}/0/1/${E.CANCEL}`]);
    expect(heard).toEqual(["close"]);
    expect(session.streams.has(1)).toBe(false);
  });

  test("abort(): RST_STREAM with the code once; the handlers hear onReset with code and reason, then onClose", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    st.abort(E.PROTOCOL_ERROR, "bad message");
    st.abort(E.INTERNAL_ERROR, "again");
    st.reset();
    expect(untilPingAck(t, session)).toEqual([`${T.RST_STREAM}/0/1/${E.PROTOCOL_ERROR}`]);
    expect(heard).toEqual(["reset 1 bad message", "close"]);
  });

  test("a stream that closed normally is not reset afterwards: no RST_STREAM, onClose stays single", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1, ES_EH);
    st.respond(STATUS);
    st.end(TRAILERS);
    expect(heard).toEqual(["end", "close"]);
    st.reset();
    st.abort(E.PROTOCOL_ERROR, "late");
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, HEADERS_END_1]);
    expect(heard).toEqual(["end", "close"]);
  });

  test("the peer's WINDOW_UPDATE of 0 on a stream: RST_STREAM PROTOCOL_ERROR (1), the connection goes on", () => {
    const { t, session, open } = server();
    const { heard } = open(1);
    t.feed(windowUpdate(1, 0));
    expect(untilPingAck(t, session)).toEqual([`${T.RST_STREAM}/0/1/${E.PROTOCOL_ERROR}`]);
    expect(heard).toEqual(["reset 1 stream WINDOW_UPDATE of 0", "close"]);
    expect(session.closed).toBe(false);
  });

  test("a stream window pushed past 2^31-1: RST_STREAM FLOW_CONTROL_ERROR (3); exactly 2^31-1 is fine", () => {
    const { t, session, open } = server(); // the peer's initial window: 65,535
    const a = open(1);
    t.feed(windowUpdate(1, 2 ** 31 - 1 - 65_535));
    const b = open(3);
    t.feed(windowUpdate(3, 2 ** 31 - 1 - 65_535 + 1));
    expect(untilPingAck(t, session)).toEqual([`${T.RST_STREAM}/0/3/${E.FLOW_CONTROL_ERROR}`]);
    expect(a.heard).toEqual([]);
    expect(b.heard).toEqual(["reset 3 stream window above 2^31-1", "close"]);
  });

  test("DATA after the peer's END_STREAM: RST_STREAM STREAM_CLOSED (5), the data is not delivered", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1, ES_EH);
    st.respond(STATUS);
    t.feed(dataFrame(1, "late"));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, `${T.RST_STREAM}/0/1/${E.STREAM_CLOSED}`]);
    expect(heard).toEqual(["end", "reset 5 DATA after the peer ended the stream", "close"]);
  });

  test("the peer's RST_STREAM: onReset with its code, onClose; nothing is sent back", () => {
    const { t, session, open } = server();
    const { heard } = open(1);
    t.feed(rst(1, E.REFUSED_STREAM));
    expect(untilPingAck(t, session)).toEqual([]);
    expect(heard).toEqual(["reset 7 stream reset by the peer (REFUSED_STREAM)", "close"]);
  });
});

describe("receive credit: held while paused, returned once", () => {
  // streamWindow 1000: credit goes back once 250 bytes (a quarter) are consumed, or at resume.
  test("not paused: 100 bytes are held (under a quarter), 300 more return 400 at once", () => {
    const { t, session, open } = server({ streamWindow: 1000 });
    const { st, heard } = open(1);
    t.feed(dataFrame(1, "a".repeat(100)));
    st.resume(); // not paused: nothing forced out
    expect(untilPingAck(t, session)).toEqual([]);
    t.feed(dataFrame(1, "b".repeat(300)));
    expect(untilPingAck(t, session)).toEqual([`${T.WINDOW_UPDATE}/0/1/400`]);
    expect(heard.length).toBe(2);
  });

  test("paused: nothing returned however much arrives; resume returns all of it in one WINDOW_UPDATE, and only once", () => {
    const { t, session, open } = server({ streamWindow: 1000 });
    const { st } = open(1);
    st.pause();
    t.feed(dataFrame(1, "a".repeat(100)), dataFrame(1, "b".repeat(500)));
    expect(untilPingAck(t, session)).toEqual([]);
    st.resume();
    st.resume();
    expect(untilPingAck(t, session)).toEqual([`${T.WINDOW_UPDATE}/0/1/600`]);
    // Resumed: credit flows again at the quarter mark.
    t.feed(dataFrame(1, "c".repeat(300)));
    expect(untilPingAck(t, session)).toEqual([`${T.WINDOW_UPDATE}/0/1/300`]);
  });

  test("resume with less than a quarter held still returns it (forced)", () => {
    const { t, session, open } = server({ streamWindow: 1000 });
    const { st } = open(1);
    st.pause();
    t.feed(dataFrame(1, "a".repeat(10)));
    expect(untilPingAck(t, session)).toEqual([]);
    st.resume();
    expect(untilPingAck(t, session)).toEqual([`${T.WINDOW_UPDATE}/0/1/10`]);
  });

  test("a stream without an onData handler: DATA is consumed and credited, the session goes on", () => {
    const { t, session, open } = server({ streamWindow: 1000 });
    const { st } = open(1);
    st.handlers = {};
    t.feed(dataFrame(1, "z".repeat(300)));
    expect(untilPingAck(t, session)).toEqual([`${T.WINDOW_UPDATE}/0/1/300`]);
    expect(session.closed).toBe(false);
  });
});

describe("the high-water mark and onDrain", () => {
  test("write says false once 10 of a 10-byte mark are queued (9 is fine); onDrain comes once, when the queue has gone out", () => {
    const { t, session, open } = server({ highWaterMark: 10 }, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st, heard } = open(1);
    st.respond(STATUS);
    expect(st.write(Buffer.from("123456789"))).toBe(true);
    expect(st.write(Buffer.from("a"))).toBe(false); // 10 queued
    expect(st.write(Buffer.from("bcdefghijk"))).toBe(false); // 20 queued
    t.feed(windowUpdate(1, 5));
    t.feed(windowUpdate(1, 6)); // 9 left, but the window is used up: onDrain waits for the queue to go out
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/12345", "0/0/1/6789ab"]);
    expect(heard).toEqual([]);
    t.feed(windowUpdate(1, 9));
    expect(heard).toEqual(["drain"]);
    expect(st.write(Buffer.from("l"))).toBe(true);
    t.feed(windowUpdate(1, 100));
    expect(st.write(Buffer.from("m"))).toBe(true);
    expect(untilPingAck(t, session)).toEqual(["0/0/1/cdefghijk", "0/0/1/l", "0/0/1/m"]);
    expect(heard).toEqual(["drain"]);
  });

  test("no onDrain for writes that never said false", () => {
    const { t, session, open } = server({ highWaterMark: 10 }, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st, heard } = open(1);
    st.respond(STATUS);
    expect(st.write(Buffer.from("abc"))).toBe(true);
    t.feed(windowUpdate(1, 1));
    expect(st.write(Buffer.from("def"))).toBe(true);
    t.feed(windowUpdate(1, 100));
    expect(st.write(new Uint8Array(0))).toBe(true);
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/a", "0/0/1/bcdef"]);
    expect(heard).toEqual([]);
  });

  test("an empty write at the mark says false too, and onDrain follows", () => {
    const { t, session, open } = server({ highWaterMark: 4 }, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st, heard } = open(1);
    st.respond(STATUS);
    expect(st.write(Buffer.from("abc"))).toBe(true);
    expect(st.write(new Uint8Array(0))).toBe(true);
    expect(st.write(Buffer.from("d"))).toBe(false);
    expect(st.write(new Uint8Array(0))).toBe(false);
    t.feed(windowUpdate(1, 100));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/abcd"]);
    expect(heard).toEqual(["drain"]);
  });

  test("a full socket: write says false with little queued; no onDrain while the socket stays full, one once it drains", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    st.respond(STATUS);
    t.room = 0;
    session.flush(); // the socket takes nothing: the writer is blocked
    expect(st.write(Buffer.from("x"))).toBe(false);
    t.feed(windowUpdate(1, 10)); // a pump while the socket is still full
    t.feed(windowUpdate(0, 10));
    expect(heard).toEqual([]);
    t.room = Infinity;
    t.ev!.drain();
    expect(heard).toEqual(["drain"]);
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/x"]);
    t.feed(windowUpdate(1, 10));
    st.write(Buffer.from("y"));
    expect(untilPingAck(t, session)).toEqual(["0/0/1/y"]);
    expect(heard).toEqual(["drain"]);
  });

  test("a stream that closes as its last bytes go out hears onClose last, no onDrain after it", () => {
    const { t, session, open } = server({ highWaterMark: 4 }, [[S.INITIAL_WINDOW_SIZE, 0]]);
    const { st, heard } = open(1, ES_EH);
    st.respond(STATUS);
    expect(st.write(Buffer.from("abcdef"))).toBe(false);
    st.end(TRAILERS);
    t.feed(windowUpdate(1, 100));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, "0/0/1/abcdef", HEADERS_END_1]);
    expect(heard).toEqual(["end", "close"]);
  });
});

describe("the peer's headers and END_STREAM", () => {
  test("client: response headers count 1, trailers 2; trailers end the stream", () => {
    const t = new MemTransport();
    const session = new H2Session(t, { role: "client" });
    t.feed(settings());
    const st = session.request(REQUEST, true);
    const heard = listen(st);
    expect(st.headersSeen).toBe(0);
    t.feed(headersFrame(1, STATUS));
    expect(st.headersSeen).toBe(1);
    t.feed(dataFrame(1, "m"));
    t.feed(headersFrame(1, TRAILERS, ES_EH));
    expect(st.headersSeen).toBe(2);
    expect(heard).toEqual(["headers :status=200 end=false", "data m", "headers grpc-status=0 end=true", "end", "close"]);
  });

  test("a second END_STREAM on HEADERS is not a second onEnd: the stream is reset STREAM_CLOSED (RFC 9113 §5.1)", () => {
    const { t, session, open } = server();
    const { heard } = open(1, ES_EH);
    t.feed(headersFrame(1, TRAILERS, ES_EH));
    expect(untilPingAck(t, session)).toEqual([`${T.RST_STREAM}/0/1/${E.STREAM_CLOSED}`]);
    expect(heard.filter((h) => h === "end")).toEqual(["end"]);
    expect(heard.some((h) => h.startsWith("headers") && h.includes("grpc-status"))).toBe(false);
  });

  test("trailers whose handler resets the stream: no onEnd after the reset", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    st.respond(STATUS);
    const onHeaders = st.handlers.onHeaders!;
    st.handlers.onHeaders = (h, end) => {
      onHeaders(h, end);
      st.reset(E.CANCEL);
    };
    t.feed(headersFrame(1, TRAILERS, ES_EH));
    expect(untilPingAck(t, session)).toEqual([HEADERS_1, `${T.RST_STREAM}/0/1/${E.CANCEL}`]);
    expect(heard).toEqual(["headers grpc-status=0 end=true", "close"]);
  });

  test("HEADERS without END_STREAM do not end the stream", () => {
    const { t, session, open } = server();
    const { heard } = open(1);
    t.feed(headersFrame(1, [["x-more", "1"]]));
    untilPingAck(t, session);
    expect(heard).toEqual(["headers x-more=1 end=false"]);
  });
});

describe("connection-wide endings reach each stream once", () => {
  test("GOAWAY with an error: a stream reset by another's onReset hears onClose once and no onReset", () => {
    const { t, open } = server();
    const a = open(1);
    const b = open(3);
    const onReset = a.st.handlers.onReset!;
    a.st.handlers.onReset = (code, why) => {
      onReset(code, why);
      b.st.reset();
    };
    const goaway = Buffer.alloc(8);
    goaway.writeUInt32BE(3, 0);
    goaway.writeUInt32BE(E.INTERNAL_ERROR, 4);
    t.feed(rawFrame(T.GOAWAY, 0, 0, goaway));
    expect(a.heard).toEqual(["reset 2 the peer sent GOAWAY (INTERNAL_ERROR)", "close"]);
    expect(b.heard).toEqual(["close"]);
  });

  test("our graceful close: a stream that sent everything is released (onClose, no onReset) when the connection ends", () => {
    const { t, session, open } = server();
    const { st, heard } = open(1);
    st.respond(STATUS);
    st.end(TRAILERS);
    session.close(5000);
    expect(t.ended).toBe(true);
    expect(heard).toEqual([]);
    t.ev!.close(undefined);
    expect(heard).toEqual(["close"]);
    expect(st.closed).toBe(true);
    st.reset();
    expect(heard).toEqual(["close"]);
  });

  test("our graceful close: a released stream whose onClose resets another released one; each hears onClose once", () => {
    const { t, session, open } = server();
    const a = open(1);
    const b = open(3);
    for (const x of [a, b]) {
      x.st.respond(STATUS);
      x.st.end(TRAILERS);
    }
    const onClose = a.st.handlers.onClose!;
    a.st.handlers.onClose = () => {
      onClose();
      b.st.reset();
    };
    session.close(5000);
    t.ev!.close(undefined);
    expect(a.heard).toEqual(["close"]);
    expect(b.heard).toEqual(["close"]);
  });

  test("a released stream without an onClose handler: the connection still closes cleanly", () => {
    let closed: string | undefined;
    const t = new MemTransport();
    const session = new H2Session(t, { role: "server", onStream: (st) => st.respond(STATUS), onClose: (e) => (closed = e?.message ?? "clean") });
    t.feed(CLIENT_PREFACE, settings(), headersFrame(1, REQUEST));
    const st = session.streams.get(1)!;
    st.end(TRAILERS);
    session.close(5000);
    t.ev!.close(undefined);
    expect(closed).toBe("clean");
    expect(st.closed).toBe(true);
  });
});
