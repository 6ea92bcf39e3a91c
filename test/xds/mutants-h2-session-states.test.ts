// H2Session and RFC 9113's stream states (§5.1) and settings synchronisation (§6.5.3): frames on
// idle and closed streams, and our SETTINGS left unacknowledged. The in-memory rig of the frame
// tests (h2-session-rig.ts) with its ManualClock: time moves only when a test advances it.
// Expected codes, ids and debug texts are RFC 9113 literals and the session's documented messages.

import { describe, expect, test } from "bun:test";
import { F, GRPC_REQUEST, SETTINGS_ACK, T, headersFrame, literalBlock, ping, rawFrame, rst, settings } from "./h2-support.ts";
import { CANCEL, PROTOCOL_ERROR, SENTINEL, STREAM_CLOSED, client, goawayOf, pingAcks, record, rig, rstsOf, server } from "./h2-session-rig.ts";

const SETTINGS_TIMEOUT = 4;
const responseEnd = (id: number) => rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, literalBlock([[":status", "200"]]));
/** A request that ends at once, answered and ended by the server inside onStream: closed both ways. */
const answered = () => server({}, (r) => r.st.respond([[":status", "200"]], true));
const requestEnd = (id: number) => headersFrame(id, GRPC_REQUEST, F.END_HEADERS | F.END_STREAM);

describe("HEADERS on a closed stream", () => {
  test("server: after both sides ended it, GOAWAY STREAM_CLOSED naming it; nothing after it is acted on", () => {
    const { t, out, recs, s } = answered();
    t.feed(requestEnd(1), SENTINEL);
    expect(recs[0]!.events).toEqual(["close"]);
    expect(pingAcks(out())).toEqual(["sentinel"]);
    t.feed(headersFrame(1), SENTINEL);
    const fs = out();
    expect(goawayOf(fs)).toEqual({ last: 1, code: STREAM_CLOSED, debug: "HEADERS on closed stream 1" });
    expect(pingAcks(fs)).toEqual([]);
    expect(recs.length).toBe(1);
    expect(s.closed).toBe(true);
  });

  test("server: after the client reset it, GOAWAY STREAM_CLOSED", () => {
    const { t, out } = server();
    t.feed(headersFrame(1), rst(1, CANCEL), headersFrame(1));
    expect(goawayOf(out())).toEqual({ last: 1, code: STREAM_CLOSED, debug: "HEADERS on closed stream 1" });
  });

  test("server: after we reset it while the client was still sending, ignored (its late frames are allowed, §5.1)", () => {
    const { t, out, recs } = server();
    t.feed(headersFrame(1));
    recs[0]!.st.reset(CANCEL);
    t.feed(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, literalBlock([["x-trailer", "1"]])), SENTINEL);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(rstsOf(fs)).toEqual([[1, CANCEL]]);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("client: a second response on a stream its server ended: GOAWAY STREAM_CLOSED", () => {
    const { t, s, out } = client();
    const r = record(s.request(GRPC_REQUEST, true));
    t.feed(responseEnd(1), SENTINEL);
    expect(r.events).toEqual(["headers:true", "end", "close"]);
    expect(pingAcks(out())).toEqual(["sentinel"]);
    t.feed(responseEnd(1));
    expect(goawayOf(out())).toEqual({ last: 0, code: STREAM_CLOSED, debug: "HEADERS on closed stream 1" });
  });

  test("client: a response on a stream we reset is dropped, the connection lives on", () => {
    const { t, s, out } = client();
    record(s.request(GRPC_REQUEST, true)).st.reset(CANCEL);
    t.feed(responseEnd(1), SENTINEL);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("256 finished streams are remembered: the 257th back is forgotten and its HEADERS ignored, the 256th back is not", () => {
    const a = answered();
    for (let id = 1; id <= 513; id += 2) a.t.feed(requestEnd(id)); // 257 streams
    a.t.feed(headersFrame(1), SENTINEL);
    let fs = a.out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
    a.t.feed(headersFrame(3));
    fs = a.out();
    expect(goawayOf(fs)).toEqual({ last: 513, code: STREAM_CLOSED, debug: "HEADERS on closed stream 3" });
  });
});

describe("HEADERS on an idle stream, client side", () => {
  test("on a stream the client has not opened: GOAWAY PROTOCOL_ERROR", () => {
    const { t, s, out } = client();
    record(s.request(GRPC_REQUEST));
    t.feed(responseEnd(3), SENTINEL);
    const fs = out();
    expect(goawayOf(fs)).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "HEADERS on stream 3, which we did not open" });
    expect(pingAcks(fs)).toEqual([]);
  });

  test("on an even stream (a server cannot open one: push is off): GOAWAY PROTOCOL_ERROR", () => {
    const { t, out } = client();
    t.feed(responseEnd(2));
    expect(goawayOf(out())).toEqual({ last: 0, code: PROTOCOL_ERROR, debug: "HEADERS on stream 2, which we did not open" });
  });
});

describe("SETTINGS_TIMEOUT (§6.5.3)", () => {
  test("our SETTINGS unacknowledged for 10 s: GOAWAY SETTINGS_TIMEOUT naming it, not a moment before", () => {
    for (const role of ["server", "client"] as const) {
      const { t, out, clock, closes, s } = rig(role);
      clock.advance(9_999);
      t.feed(SENTINEL);
      expect(pingAcks(out())).toEqual(["sentinel"]);
      clock.advance(1);
      const fs = out();
      expect(goawayOf(fs)).toEqual({ last: 0, code: SETTINGS_TIMEOUT, debug: "the peer did not acknowledge our SETTINGS within 10000 ms" });
      expect(s.closed).toBe(true);
      expect(closes.map((e) => e?.code)).toEqual([SETTINGS_TIMEOUT]);
      expect(t.shutdowns).toBe(1); // lingers like every connection error
    }
  });

  test("the ACK stops the wait: nothing happens at 10 s or long after", () => {
    const { t, out, clock, s } = rig("server");
    t.feed(SETTINGS_ACK);
    out();
    expect(clock.pending()).toBe(0);
    clock.advance(60_000);
    expect(goawayOf(out())).toBeUndefined();
    expect(s.closed).toBe(false);
  });

  test("the peer's own SETTINGS (not an ACK) does not stop the wait", () => {
    const { t, out, clock } = rig("client", {}, undefined, false);
    t.feed(settings(), ping(Buffer.from("early...")));
    out();
    clock.advance(10_000);
    expect(goawayOf(out())?.code).toBe(SETTINGS_TIMEOUT);
  });

  test("settingsTimeoutMs sets the wait; below 1 ms it is 1 ms", () => {
    const a = rig("server", { settingsTimeoutMs: 250 });
    expect(a.clock.pendingMs()).toEqual([250]);
    a.clock.advance(250);
    expect(goawayOf(a.out())?.debug).toBe("the peer did not acknowledge our SETTINGS within 250 ms");
    const b = rig("server", { settingsTimeoutMs: -5 });
    expect(b.clock.pendingMs()).toEqual([1]);
  });

  test("a destroyed session leaves no timer behind", () => {
    const { s, clock } = rig("client", { keepalive: { intervalMs: 1000, timeoutMs: 1000 } });
    expect(clock.pending()).toBe(2);
    s.destroy();
    expect(clock.pending()).toBe(0);
  });
});
