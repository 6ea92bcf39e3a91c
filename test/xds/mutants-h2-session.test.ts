// H2Session's connection half (session.ts up to onSocketData): construction and the SETTINGS it
// sends, request(), close()/GOAWAY, destroy, the output queue, DATA out under flow control (pump),
// receive credit (WINDOW_UPDATE out) and the transport's events. The session runs on a scripted
// H2Transport in process: the test decides how much of each write the "socket" takes and when it
// drains, ends or closes, and reads every frame the session wrote. Timers are Bun's fake timers
// where a test is about time (keepalive, the close grace, the GOAWAY linger), so nothing sleeps.
// Expected values are RFC 9113 literals (frame types, flags, error codes, SETTINGS ids, windows).

import { afterEach, describe, expect, jest, test } from "bun:test";
import { HpackDecoder, type HeaderList } from "../../src/xds/h2/hpack.ts";
import { H2Error, H2Session, type H2SessionOptions, type H2Stream } from "../../src/xds/h2/session.ts";
import type { H2Transport, H2TransportEvents } from "../../src/xds/h2/transport.ts";
import {
  CLIENT_PREFACE,
  E,
  F,
  GRPC_REQUEST,
  S,
  SETTINGS_ACK,
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

/** A transport the test drives: takes up to `room` bytes, records end/shutdown/destroy, hands events on. */
class ScriptedTransport implements H2Transport {
  readonly retainsWrites = true;
  destroyed = false;
  ended = false;
  /** Bytes the "socket" still takes before it reports full. */
  room = Infinity;
  readonly calls: string[] = [];
  private bytes: Buffer[] = [];
  ev!: H2TransportEvents;

  write(data: Uint8Array): number {
    const n = Math.min(data.length, this.room);
    if (n > 0) this.bytes.push(Buffer.from(data.subarray(0, n)));
    this.room -= n;
    return n;
  }
  end(): void {
    this.calls.push("end");
    this.ended = true;
  }
  shutdown(): void {
    this.calls.push("shutdown");
    this.ended = true;
  }
  destroy(): void {
    this.calls.push("destroy");
    this.destroyed = true;
  }
  listen(ev: H2TransportEvents): void {
    this.ev = ev;
  }
  /** Everything written so far, as one buffer. */
  written(): Buffer {
    return Buffer.concat(this.bytes);
  }
}

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
  const closes: (H2Error | undefined)[] = [];
  const streams: Rec[] = [];
  const goaways: [number, number, string][] = [];
  const s = new H2Session(t, {
    onStream: (st) => streams.push(record(st)),
    onClose: (e) => closes.push(e),
    onGoaway: (code, last, debug) => goaways.push([code, last, debug]),
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
  return { t, s, out, feed, closes, streams, goaways };
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

afterEach(() => {
  jest.useRealTimers();
});

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
