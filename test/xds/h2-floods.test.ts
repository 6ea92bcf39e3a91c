// The HTTP/2 session's counted flood limits (issue 34), in process on the scripted transport so that
// each limit is hit exactly at its edge: CONTINUATION frames per header block, consecutive empty
// frames, control frames and frames queued for a peer that does not read. Frames are built by
// h2-support.ts (RFC 9113, independent of src); the limits are the literals the docs state.
// The compiled agent under the same floods: test/faults/h2-floods.test.ts.

import { describe, expect, test } from "bun:test";
import { F, GRPC_REQUEST, T, literalBlock, ping, rawFrame, settings } from "./h2-support.ts";
import { ENHANCE_YOUR_CALM, SENTINEL, data, goawayOf, pingAcks, server, settingsAcks } from "./h2-session-rig.ts";

/** The request's header block cut into `n` non-empty pieces: HEADERS, then n-1 CONTINUATIONs, the last with END_HEADERS. */
function splitBlock(id: number, n: number): Buffer[] {
  const block = literalBlock(GRPC_REQUEST);
  expect(block.length).toBeGreaterThanOrEqual(n);
  const frames: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const piece = block.subarray(Math.floor((i * block.length) / n), Math.floor(((i + 1) * block.length) / n));
    const flags = i === n - 1 ? F.END_HEADERS : 0;
    frames.push(rawFrame(i === 0 ? T.HEADERS : T.CONTINUATION, flags, id, piece));
  }
  return frames;
}

describe("CONTINUATION frames per header block (64)", () => {
  test("a block in HEADERS + 64 CONTINUATIONs opens the stream", () => {
    const { t, recs, out } = server();
    t.feed(...splitBlock(1, 65), SENTINEL);
    expect(recs.map((r) => r.st.id)).toEqual([1]);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("the 65th CONTINUATION of one block: GOAWAY ENHANCE_YOUR_CALM naming the limit, no stream", () => {
    const { t, s, recs, closes, out } = server();
    t.feed(...splitBlock(1, 66), SENTINEL);
    expect(recs).toEqual([]);
    expect(goawayOf(out())).toEqual({ last: 0, code: ENHANCE_YOUR_CALM, debug: "more than 64 CONTINUATION frames in one header block" });
    expect(s.closed).toBe(true);
    expect(closes[0]?.code).toBe(ENHANCE_YOUR_CALM);
  });

  test("the count is per block: two blocks of 64 CONTINUATIONs each are both accepted", () => {
    const { t, recs, out } = server();
    t.feed(...splitBlock(1, 65), ...splitBlock(3, 65), SENTINEL);
    expect(recs.map((r) => r.st.id)).toEqual([1, 3]);
    expect(goawayOf(out())).toBeUndefined();
  });
});

describe("consecutive empty frames without END_STREAM (1, Envoy's default)", () => {
  test("empty CONTINUATIONs: the second in a row is GOAWAY ENHANCE_YOUR_CALM", () => {
    const { t, s, out } = server();
    const [first] = splitBlock(1, 2);
    t.feed(first!, rawFrame(T.CONTINUATION, 0, 1), rawFrame(T.CONTINUATION, 0, 1), SENTINEL);
    expect(goawayOf(out())).toEqual({ last: 0, code: ENHANCE_YOUR_CALM, debug: "more than 1 consecutive empty HEADERS/CONTINUATION/DATA frames" });
    expect(s.closed).toBe(true);
  });

  test("one empty CONTINUATION, even one ending the block, is allowed", () => {
    const { t, recs, out } = server();
    const [first, second] = splitBlock(1, 2);
    t.feed(
      first!,
      rawFrame(T.CONTINUATION, 0, 1),
      second!,
      rawFrame(T.HEADERS, 0, 3, literalBlock(GRPC_REQUEST)),
      rawFrame(T.CONTINUATION, F.END_HEADERS, 3),
      SENTINEL,
    );
    expect(recs.map((r) => r.st.id)).toEqual([1, 3]);
    const fs = out();
    expect(goawayOf(fs)).toBeUndefined();
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("empty DATA: two in a row without END_STREAM are GOAWAY; with END_STREAM, or apart, they are not", () => {
    const a = server();
    a.t.feed(...splitBlock(1, 1), data(1, ""), data(1, "x"), data(1, ""), data(3 - 2, "", F.END_STREAM), SENTINEL);
    expect(goawayOf(a.out())).toBeUndefined();
    const b = server();
    b.t.feed(...splitBlock(1, 1), data(1, ""), ping(Buffer.from("between.")), data(1, ""), SENTINEL);
    expect(goawayOf(b.out())?.code).toBe(ENHANCE_YOUR_CALM);
  });
});

/**
 * The peer stops reading: the socket takes nothing more, and the next write (the sentinel's ACK)
 * is left over for its drain, so the writer is blocked and everything queued after waits.
 */
function stopReading(r: ReturnType<typeof server>): void {
  r.t.room = 0;
  r.t.feed(SENTINEL);
  r.s.flush();
}

describe("output queued for a peer that does not read", () => {
  test("1,000 SETTINGS ACKs may wait; the 1,001st is GOAWAY ENHANCE_YOUR_CALM and the connection closes", () => {
    const r = server();
    const { t, s, closes } = r;
    stopReading(r);
    t.feed(...Array.from({ length: 1000 }, () => settings()));
    expect(s.closed).toBe(false);
    t.feed(settings());
    expect(s.closed).toBe(true);
    expect(closes[0]?.code).toBe(ENHANCE_YOUR_CALM);
    expect(closes[0]?.message).toBe("peer does not read: over 1000 control frames (SETTINGS/PING ACKs, RST_STREAM) queued");
    expect(t.calls).toEqual(["destroy"]); // closed at once: a peer that reads nothing gets no linger
  });

  test("PING ACKs count the same (no ping policy)", () => {
    const r = server();
    const { t, s, closes } = r;
    stopReading(r);
    t.feed(...Array.from({ length: 1001 }, (_, i) => ping(Buffer.alloc(8, i))));
    expect(s.closed).toBe(true);
    expect(closes[0]?.message).toMatch(/over 1000 control frames/);
  });

  test("a peer that reads is not cut off, however many SETTINGS arrive in one chunk", () => {
    const { t, s, out } = server();
    t.feed(...Array.from({ length: 5000 }, () => settings()), SENTINEL);
    expect(s.closed).toBe(false);
    const fs = out();
    expect(settingsAcks(fs)).toBe(5000);
    expect(pingAcks(fs)).toEqual(["sentinel"]);
  });

  test("10,000 response HEADERS may wait; the 10,001st is GOAWAY ENHANCE_YOUR_CALM", () => {
    const r = server({}, (rec) => rec.st.respond([[":status", "200"]], true));
    const { t, s, closes } = r;
    stopReading(r);
    const req = (id: number) => rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, literalBlock(GRPC_REQUEST));
    t.feed(...Array.from({ length: 10_000 }, (_, i) => req(2 * i + 1)));
    expect(s.closed).toBe(false);
    t.feed(req(20_001));
    expect(s.closed).toBe(true);
    expect(closes[0]?.message).toBe("peer does not read: over 10000 frames queued");
  });

  test("DATA never trips the frame limit: streams stop at 5,000 queued frames and go on once the peer reads", () => {
    let st: import("../../src/xds/h2/session.ts").H2Stream | undefined;
    const { t, s, out } = server({}, (r) => (st = r.st));
    t.feed(...splitBlock(1, 1));
    st!.respond([[":status", "200"]]);
    out();
    t.room = 0;
    let accepted = 0;
    for (let i = 0; i < 12_000; i++) if (st!.write(Buffer.from([i & 0xff]))) accepted++;
    expect(s.closed).toBe(false);
    expect(accepted).toBeLessThan(5_001);
    t.room = Infinity;
    t.ev.drain();
    const fs = out();
    const body = Buffer.concat(fs.filter((f) => f.type === T.DATA && f.stream === 1).map((f) => f.payload));
    expect(body.length).toBe(12_000);
    expect(body[11_999]).toBe(11_999 & 0xff);
    expect(goawayOf(fs)).toBeUndefined();
  });
});
