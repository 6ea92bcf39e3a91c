// The in-memory rig of the HTTP/2 session's frame tests (mutants-h2-session-frames and
// mutants-h2-session-states): a session on h2-support's ScriptedTransport with a ManualClock, each
// stream's events recorded in order, and what the session wrote parsed back into frames. Error
// codes are RFC 9113 §7 literals.

import { expect } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { H2Error, H2Session, type H2SessionOptions, type H2Stream } from "../../src/xds/h2/session.ts";
import type { HeaderList } from "../../src/xds/h2/hpack.ts";
import { CLIENT_PREFACE, F, ScriptedTransport, T, parseFrames, ping, rawFrame, settings, u32, type RawFrame } from "./h2-support.ts";

/** RFC 9113 §7 error codes, as literals. */
export const PROTOCOL_ERROR = 1;
export const FLOW_CONTROL_ERROR = 3;
export const STREAM_CLOSED = 5;
export const FRAME_SIZE_ERROR = 6;
export const REFUSED_STREAM = 7;
export const CANCEL = 8;
export const COMPRESSION_ERROR = 9;
export const ENHANCE_YOUR_CALM = 11;

export interface Rec {
  st: H2Stream;
  headers: HeaderList;
  /** "data:<text>", "headers:<endStream>", "end", "reset:<code>", "close", in order. */
  events: string[];
  bytes: number;
  reset?: [number, string];
  trailers: HeaderList[];
}

export function record(st: H2Stream, headers: HeaderList = []): Rec {
  const r: Rec = { st, headers, events: [], bytes: 0, trailers: [] };
  st.handlers = {
    onHeaders: (h, end) => {
      r.trailers.push(h);
      r.events.push(`headers:${end}`);
    },
    onData: (c) => {
      r.bytes += c.length;
      r.events.push(`data:${c.length}`);
    },
    onEnd: () => r.events.push("end"),
    onReset: (code, why) => {
      r.reset = [code, why];
      r.events.push(`reset:${code}`);
    },
    onClose: () => r.events.push("close"),
  };
  return r;
}

/** A session on a ScriptedTransport, with what it wrote read back frame by frame. */
export function rig(role: "server" | "client", opts: Partial<H2SessionOptions> = {}, onStream?: (r: Rec) => void, greet = true) {
  const t = new ScriptedTransport();
  const clock = new ManualClock();
  const recs: Rec[] = [];
  const closes: (H2Error | undefined)[] = [];
  const goaways: [number, number, string][] = [];
  const s = new H2Session(t, {
    onStream: (st, h) => {
      const r = record(st, h);
      recs.push(r);
      onStream?.(r);
    },
    onGoaway: (code, last, debug) => goaways.push([code, last, debug]),
    clock,
    ...opts,
    role,
    onClose: (e) => closes.push(e),
  });
  let read = 0;
  const all = (): RawFrame[] => {
    s.flush();
    const bytes = t.written();
    return parseFrames(role === "client" ? bytes.subarray(24) : bytes);
  };
  /** Frames written since the last call. */
  const out = (): RawFrame[] => {
    const fs = all();
    const fresh = fs.slice(read);
    read = fs.length;
    return fresh;
  };
  if (!greet) return { t, s, recs, closes, goaways, out, all, clock };
  if (role === "server") t.feed(CLIENT_PREFACE, settings());
  else t.feed(settings());
  out(); // our SETTINGS, the connection WINDOW_UPDATE and the ACK of the peer's SETTINGS
  return { t, s, recs, closes, goaways, out, all, clock };
}

export const server = (opts: Partial<H2SessionOptions> = {}, onStream?: (r: Rec) => void) => rig("server", opts, onStream);
export const client = (opts: Partial<H2SessionOptions> = {}) => rig("client", opts);

export const data = (id: number, body: Buffer | string, flags = 0) => rawFrame(T.DATA, flags, id, Buffer.from(body));
export const goawayFrame = (last: number, code: number, debug = "") => rawFrame(T.GOAWAY, 0, 0, Buffer.concat([u32(last), u32(code), Buffer.from(debug)]));

export function goawayOf(fs: RawFrame[]): { last: number; code: number; debug: string } | undefined {
  const g = fs.filter((f) => f.type === T.GOAWAY);
  expect(g.length).toBeLessThanOrEqual(1);
  if (!g[0]) return undefined;
  return { last: g[0].payload.readUInt32BE(0), code: g[0].payload.readUInt32BE(4), debug: g[0].payload.subarray(8).toString("utf8") };
}

export const rstsOf = (fs: RawFrame[]) => fs.filter((f) => f.type === T.RST_STREAM).map((f) => [f.stream, f.payload.readUInt32BE(0)]);
export const pingAcks = (fs: RawFrame[]) => fs.filter((f) => f.type === T.PING && f.flags === F.ACK).map((f) => f.payload.toString("latin1"));
export const windowUpdates = (fs: RawFrame[]) => fs.filter((f) => f.type === T.WINDOW_UPDATE).map((f) => [f.stream, f.payload.readUInt32BE(0)]);
export const settingsAcks = (fs: RawFrame[]) => fs.filter((f) => f.type === T.SETTINGS && f.flags === F.ACK && f.payload.length === 0).length;
/** A PING whose ACK is the sentinel: the session parsed everything before it and is still serving. */
export const SENTINEL = ping(Buffer.from("sentinel"));
