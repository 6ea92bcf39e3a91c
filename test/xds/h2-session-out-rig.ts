// The scripted rig of the HTTP/2 session's connection-half tests (mutants-h2-session and
// mutants-h2-session-flow): a session on h2-support's ScriptedTransport with a ManualClock, so the
// test decides how much of each write the "socket" takes and when time moves; each stream's
// headers, data, ends, resets, closes and drains are counted; what the session wrote is parsed
// back frame by frame. Expected values in the tests are RFC 9113 literals.

import { expect } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import type { HeaderList } from "../../src/xds/h2/hpack.ts";
import { H2Error, H2Session, type H2SessionOptions, type H2Stream } from "../../src/xds/h2/session.ts";
import { CLIENT_PREFACE, F, SETTINGS_ACK, ScriptedTransport, T, literalBlock, parseFrames, rawFrame, settings, type RawFrame } from "./h2-support.ts";

export interface Rec {
  st: H2Stream;
  headers: HeaderList[];
  data: Buffer[];
  ended: number;
  resets: [number, string][];
  closed: number;
  drains: number;
}

export function record(st: H2Stream): Rec {
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
export function rig(role: "client" | "server", opts: Partial<H2SessionOptions> = {}) {
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
export function serverUp(opts: Partial<H2SessionOptions> = {}, peerSettings: [number, number][] = []) {
  const r = rig("server", opts);
  r.feed(CLIENT_PREFACE, settings(...peerSettings), SETTINGS_ACK);
  r.out();
  return r;
}

/** A client rig after the server's SETTINGS (and our ACK of them); its own preface frames consumed. */
export function clientUp(opts: Partial<H2SessionOptions> = {}, peerSettings: [number, number][] = []) {
  const r = rig("client", opts);
  r.feed(settings(...peerSettings), SETTINGS_ACK);
  r.out();
  return r;
}

export const settingsOf = (f: RawFrame) =>
  Array.from({ length: f.payload.length / 6 }, (_, i) => [f.payload.readUInt16BE(i * 6), f.payload.readUInt32BE(i * 6 + 2)]);
export const kinds = (fs: RawFrame[]) => fs.map((f) => `${f.type}/${f.flags}/${f.stream}/${f.payload.length}`);
export const goawayOf = (f: RawFrame) => ({
  last: f.payload.readUInt32BE(0) & 0x7fffffff,
  code: f.payload.readUInt32BE(4),
  debug: f.payload.subarray(8).toString("utf8"),
});
export const dataOn = (id: number, n: number, flags = 0, fill = 0x61) => rawFrame(T.DATA, flags, id, Buffer.alloc(n, fill));
export const PING_SENTINEL = Buffer.from("sentinel");
/** Frames up to (not including) our ACK of the sentinel PING; fails if the ACK is missing. */
export function untilSentinel(fs: RawFrame[]): RawFrame[] {
  const i = fs.findIndex((f) => f.type === T.PING && f.flags === F.ACK && f.payload.equals(PING_SENTINEL));
  expect(i).toBeGreaterThanOrEqual(0);
  return fs.slice(0, i);
}
export const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);
export const responseEnd = (id: number) => rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, literalBlock([[":status", "200"]]));
