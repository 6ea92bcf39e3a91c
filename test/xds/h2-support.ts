// Test helpers for the HTTP/2 session tests: a hand-rolled frame builder and a raw HTTP/2 peer that
// reads frames off a socket, written from RFC 9113 independently of src/xds/h2 (so the tests do
// not share the implementation's mistakes), plus temp Unix sockets and bounded waits.

import net from "node:net";
import { Duplex } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { H2Session, type H2SessionOptions } from "../../src/xds/h2/session.ts";
import type { H2Transport, H2TransportEvents } from "../../src/xds/h2/transport.ts";

export const T = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;
export const E = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
} as const;
export const CLIENT_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export interface RawFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export function rawFrame(type: number, flags: number, stream: number, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}

export function settings(...pairs: [number, number][]): Buffer {
  const p = Buffer.alloc(pairs.length * 6);
  pairs.forEach(([id, v], i) => {
    p.writeUInt16BE(id, i * 6);
    p.writeUInt32BE(v, i * 6 + 2);
  });
  return rawFrame(T.SETTINGS, 0, 0, p);
}
export const SETTINGS_ACK = rawFrame(T.SETTINGS, F.ACK, 0);
export const S = { HEADER_TABLE_SIZE: 1, ENABLE_PUSH: 2, MAX_CONCURRENT_STREAMS: 3, INITIAL_WINDOW_SIZE: 4, MAX_FRAME_SIZE: 5 } as const;

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}
export const windowUpdate = (stream: number, inc: number) => rawFrame(T.WINDOW_UPDATE, 0, stream, u32(inc));
export const rst = (stream: number, code: number) => rawFrame(T.RST_STREAM, 0, stream, u32(code));
export const ping = (data: Buffer, ack = false) => rawFrame(T.PING, ack ? F.ACK : 0, 0, data);

/** HPACK literal-without-indexing fields with new names (RFC 7541 §6.2.2), raw strings. */
export function literalBlock(headers: [string, string][]): Buffer {
  const out: number[] = [];
  const int7 = (n: number) => {
    if (n < 127) return out.push(n);
    out.push(127);
    n -= 127;
    while (n >= 128) {
      out.push((n % 128) | 0x80);
      n = Math.floor(n / 128);
    }
    out.push(n);
  };
  for (const [n, v] of headers) {
    out.push(0x00);
    int7(n.length);
    out.push(...Buffer.from(n, "latin1"));
    int7(v.length);
    out.push(...Buffer.from(v, "latin1"));
  }
  return Buffer.from(out);
}

export const GRPC_REQUEST: [string, string][] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"],
  [":authority", "localhost"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
];

export const headersFrame = (stream: number, headers: [string, string][] = GRPC_REQUEST, flags: number = F.END_HEADERS) =>
  rawFrame(T.HEADERS, flags, stream, literalBlock(headers));

/** A raw HTTP/2 peer: sends what it is told, parses what comes back into frames. */
export class RawPeer {
  readonly frames: RawFrame[] = [];
  readonly seen: RawFrame[] = [];
  private buf = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  ended = false;
  readonly closed: Promise<void>;

  constructor(
    readonly socket: net.Socket,
    /** Strip a client preface from what arrives (we are the server). */
    private expectPreface = false,
  ) {
    socket.on("data", (d: Buffer) => this.onData(d));
    socket.on("error", () => {});
    this.closed = new Promise((r) =>
      socket.on("close", () => {
        this.ended = true;
        this.wake();
        r();
      }),
    );
  }

  static async connect(path: string, opts: { preface?: boolean; settings?: [number, number][] } = {}): Promise<RawPeer> {
    const sock = net.connect(path);
    await new Promise<void>((res, rej) => {
      sock.once("connect", () => res());
      sock.once("error", rej);
    });
    const p = new RawPeer(sock);
    if (opts.preface !== false) p.send(CLIENT_PREFACE, settings(...(opts.settings ?? [])));
    return p;
  }

  send(...b: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(b));
  }

  private onData(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    if (this.expectPreface) {
      if (this.buf.length < 24) return;
      if (!this.buf.subarray(0, 24).equals(CLIENT_PREFACE)) throw new Error("bad client preface");
      this.buf = this.buf.subarray(24);
      this.expectPreface = false;
    }
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) break;
      const f: RawFrame = {
        type: this.buf[3]!,
        flags: this.buf[4]!,
        stream: this.buf.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(this.buf.subarray(9, 9 + len)),
      };
      this.buf = this.buf.subarray(9 + len);
      this.frames.push(f);
      this.seen.push(f);
    }
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** The first queued (or next arriving) frame matching `pred`, removed from the queue. */
  async next(pred: (f: RawFrame) => boolean = () => true, timeoutMs = 5000, what = "a frame"): Promise<RawFrame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.frames.findIndex(pred);
      if (i >= 0) return this.frames.splice(i, 1)[0]!;
      if (this.ended) throw new Error(`connection closed while waiting for ${what}; frames seen: ${describeFrames(this.seen)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; frames seen: ${describeFrames(this.seen)}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  nextOf(type: number, stream?: number, timeoutMs = 5000): Promise<RawFrame> {
    return this.next(
      (f) => f.type === type && (stream === undefined || f.stream === stream),
      timeoutMs,
      `frame type ${type}${stream === undefined ? "" : ` on stream ${stream}`}`,
    );
  }

  async goaway(timeoutMs = 5000): Promise<{ last: number; code: number; debug: string }> {
    const f = await this.nextOf(T.GOAWAY, 0, timeoutMs);
    return { last: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4), debug: f.payload.subarray(8).toString("utf8") };
  }

  async rstCode(stream: number, timeoutMs = 5000): Promise<number> {
    return (await this.nextOf(T.RST_STREAM, stream, timeoutMs)).payload.readUInt32BE(0);
  }

  /** Wait for the socket to close (bounded). */
  async waitClosed(timeoutMs = 5000): Promise<void> {
    await withTimeout(this.closed, timeoutMs, "the connection to close");
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Split bytes into frames (whole frames only). */
export function parseFrames(buf: Buffer): RawFrame[] {
  const out: RawFrame[] = [];
  let p = 0;
  while (p + 9 <= buf.length) {
    const len = buf.readUIntBE(p, 3);
    if (p + 9 + len > buf.length) break;
    out.push({ type: buf[p + 3]!, flags: buf[p + 4]!, stream: buf.readUInt32BE(p + 5) & 0x7fffffff, payload: Buffer.from(buf.subarray(p + 9, p + 9 + len)) });
    p += 9 + len;
  }
  return out;
}

/** A socket stand-in: what the session writes is kept; `feed` hands it chunks exactly as given. */
export class FakeSocket extends Duplex {
  readonly written: Buffer[] = [];
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.written.push(Buffer.from(chunk));
    cb();
  }
  feed(chunk: Uint8Array): void {
    this.emit("data", Buffer.from(chunk));
  }
  frames(): RawFrame[] {
    return parseFrames(Buffer.concat(this.written));
  }
}

export function describeFrames(fs: RawFrame[]): string {
  return fs.map((f) => `${f.type}/${f.flags}/${f.stream}/${f.payload.length}`).join(" ") || "none";
}

export async function withTimeout<V>(p: Promise<V>, ms: number, what: string): Promise<V> {
  let t: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, rej) => (t = setTimeout(() => rej(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)))]);
  } finally {
    clearTimeout(t);
  }
}

export async function until(cond: () => boolean, ms = 5000, what = "a condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A temp dir holding one Unix socket path; `cleanup()` removes it. */
export function tempSocket(): { path: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), "h2-"));
  return { path: join(dir, "s.sock"), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Our H2Session as a server on a Unix socket: one session per accepted connection. */
export class TestServer {
  readonly sessions: H2Session[] = [];
  readonly closes: ({ error: Error | undefined } | undefined)[] = [];
  private constructor(
    readonly net: net.Server,
    readonly path: string,
    private readonly tmp: { cleanup(): void },
  ) {}

  static async start(opts: (index: number) => Omit<H2SessionOptions, "role">): Promise<TestServer> {
    const tmp = tempSocket();
    let srv!: TestServer;
    const server = net.createServer((sock) => {
      const i = srv.sessions.length;
      srv.closes.push(undefined);
      const o = opts(i);
      srv.sessions.push(
        new H2Session(sock, {
          ...o,
          role: "server",
          onClose: (e) => {
            srv.closes[i] = { error: e };
            o.onClose?.(e);
          },
        }),
      );
    });
    srv = new TestServer(server, tmp.path, tmp);
    await new Promise<void>((r) => server.listen(tmp.path, () => r()));
    return srv;
  }

  async session(i = 0, ms = 5000): Promise<H2Session> {
    await until(() => this.sessions.length > i, ms, `server session ${i}`);
    return this.sessions[i]!;
  }

  async stop(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    await new Promise<void>((r) => this.net.close(() => r()));
    this.tmp.cleanup();
  }
}

/**
 * An in-process transport the test drives: it takes up to `room` bytes of each write (all of them
 * unless told otherwise), keeps them, records end/shutdown/destroy in `calls`, and hands the
 * session whatever the test feeds it, chunk by chunk as given.
 */
export class ScriptedTransport implements H2Transport {
  readonly retainsWrites = true;
  destroyed = false;
  ended = false;
  /** Bytes the "socket" still takes before it reports full. */
  room = Infinity;
  readonly calls: string[] = [];
  private readonly bytes: Buffer[] = [];
  ev!: H2TransportEvents;

  write(data: Uint8Array): number {
    const n = Math.min(data.length, this.room);
    if (n > 0) this.bytes.push(Buffer.from(data.subarray(0, n)));
    this.room -= n;
    return n;
  }
  /** Idempotent, as both real transports' end is (a node socket ignores a second end()). */
  end(): void {
    if (!this.ended) this.calls.push("end");
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
  /** Hand the session these bytes as one chunk. */
  feed(...chunks: Buffer[]): void {
    this.ev.data(Buffer.concat(chunks));
  }
  /** Everything written so far, as one buffer. */
  written(): Buffer {
    return Buffer.concat(this.bytes);
  }
  /** How many times the session half-closed while still reading (a GOAWAY's linger). */
  get shutdowns(): number {
    return this.calls.filter((c) => c === "shutdown").length;
  }
}
