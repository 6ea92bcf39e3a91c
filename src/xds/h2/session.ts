// A small HTTP/2 connection (RFC 9113) on a transport (transport.ts: a node:net / node:tls socket,
// or one of Bun's own): the xDS relay's data path. It does what gRPC streaming needs and nothing
// more — no push, no priorities — and it never copies or re-frames payload on the way in: DATA is
// delivered as views into the socket's chunks as they arrive (cut-through, even inside a frame),
// and queued out as views; the writer (writer.ts) hands them to the socket in batches. Flow
// control both ways: the peer's windows are honoured (per stream and per connection), and our
// receive windows are credited back only while the consumer is not paused, so backpressure
// reaches the sender through HTTP/2 itself.

import type { Duplex } from "node:stream";
import {
  DEFAULT_WINDOW,
  FRAME_HEADER_BYTES,
  Flag,
  FrameType,
  H2Code,
  MAX_FRAME_SIZE,
  MAX_WINDOW,
  MIN_FRAME_SIZE,
  PREFACE,
  Setting,
  frame,
  goawayFrame,
  h2CodeName,
  headerFrames,
  rstStreamFrame,
  settingsFrame,
  windowUpdateFrame,
  writeFrameHeader,
} from "./frames.ts";
import { HpackDecoder, HpackError, encodeHeaders, type HeaderList } from "./hpack.ts";
import { H2Stream, type StreamHost } from "./stream.ts";
import { RateBudget, type RateBudgetOptions } from "./ratebudget.ts";
import { NODE_SOCKET_BUDGET, NodeTransport, type H2Transport } from "./transport.ts";
import { H2Writer, MAX_OUTBOUND_CONTROL_FRAMES, MAX_OUTBOUND_FRAMES, Piece, type PieceKind } from "./writer.ts";
import { MAX_TIMER_MS, systemClock, type Clock, type TimerHandle } from "../../lib/clock.ts";
import { stallTolerantDeadline } from "../../lib/deadline.ts";

export { H2Stream, type H2StreamHandlers } from "./stream.ts";
export { MAX_OUTBOUND_CONTROL_FRAMES, MAX_OUTBOUND_FRAMES, WRITE_BATCH } from "./writer.ts";

/** Unwritten bytes a node socket may hold before the writer waits for its drain. */
export const SOCKET_BUDGET = NODE_SOCKET_BUDGET;

/**
 * How long our SETTINGS may go unacknowledged before the connection fails with SETTINGS_TIMEOUT
 * (RFC 9113 §6.5.3); nghttpx's default. A peer answers in one round trip.
 */
export const SETTINGS_ACK_TIMEOUT_MS = 10_000;

/**
 * Closed streams the peer had finished (END_STREAM or RST_STREAM) that are remembered, newest
 * last, so that HEADERS on one is known to be a STREAM_CLOSED connection error. An older closed
 * stream is no longer told apart from one we reset, whose late frames must be ignored (nghttp2
 * keeps a bounded list the same way).
 */
export const REMEMBERED_CLOSED_STREAMS = 256;

/**
 * How long a connection we end waits for the peer to end its side before it is closed anyway.
 * grpc-go's server (Istio's agent serves Envoy with it) waits the same second for its reader to
 * finish before closing, for the same reason (grpc/grpc-go#5358).
 */
export const LINGER_MS = 1000;

/**
 * CONTINUATION frames one header block may have. A block is at most twice our header-list limit
 * (512 KiB by default), 32 frames of the 16 KiB we accept; more is a CONTINUATION flood (empty
 * frames cost the sender 9 bytes each), answered GOAWAY ENHANCE_YOUR_CALM.
 */
export const MAX_CONTINUATION_FRAMES = 64;

/**
 * Server: consecutive HEADERS, CONTINUATION and DATA frames with an empty payload and no
 * END_STREAM accepted (Envoy's max_consecutive_inbound_frames_with_empty_payload default): such
 * frames carry nothing, and a stream of them costs the sender 9 bytes a frame.
 */
export const MAX_CONSECUTIVE_EMPTY_FRAMES = 1;

export class H2Error extends Error {
  override name = "H2Error";
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export interface H2SessionOptions {
  role: "client" | "server";
  /** Our SETTINGS_INITIAL_WINDOW_SIZE (receive window per stream). */
  streamWindow?: number;
  /** Our connection receive window. */
  connectionWindow?: number;
  /** Our SETTINGS_MAX_FRAME_SIZE. */
  maxFrameSize?: number;
  /** Server: SETTINGS_MAX_CONCURRENT_STREAMS we advertise and enforce. */
  maxConcurrentStreams?: number;
  /** Largest decoded header list accepted. */
  maxHeaderListSize?: number;
  /** Bytes queued on a stream above which write() asks the caller to wait for onDrain. */
  highWaterMark?: number;
  /** Send a PING after this long without receiving anything; fail if unanswered in `timeoutMs`. */
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** Server: PINGs closer together than `minIntervalMs` are strikes; more than `maxStrikes` ends the connection (gRPC's too_many_pings). */
  pingPolicy?: { minIntervalMs: number; maxStrikes: number };
  /** Server: streams the client may reset (token bucket); past it GOAWAY ENHANCE_YOUR_CALM (rapid reset). */
  resetBudget?: RateBudgetOptions;
  /** Time for keepalive, the ping policy, the reset budget and every timeout; the real clock when omitted. */
  clock?: Clock;
  /** Our SETTINGS unacknowledged this long: GOAWAY SETTINGS_TIMEOUT. 1 ms to 2^31-1 ms; SETTINGS_ACK_TIMEOUT_MS when omitted. */
  settingsTimeoutMs?: number;
  /** Server: a new stream opened by the peer, with its request headers. */
  onStream?(stream: H2Stream, headers: HeaderList): void;
  /** The connection is gone; `error` says why when it was not a clean close. */
  onClose?(error: H2Error | undefined): void;
  /** The peer sent GOAWAY. */
  onGoaway?(code: number, lastStreamId: number, debug: string): void;
}

type ParseState = "preface" | "header" | "payload" | "data";

export class H2Session implements StreamHost {
  readonly streams = new Map<number, H2Stream>();
  closed = false;
  /** The peer's GOAWAY, once received. */
  goaway: { code: number; lastStreamId: number; debug: string } | undefined;

  // peer settings (what we send must respect)
  peerInitialWindow = DEFAULT_WINDOW;
  peerMaxFrame = MIN_FRAME_SIZE;
  private peerMaxStreams = Infinity;
  private peerHeaderTableSize = 4096;
  private tableSizeUpdateOwed = false;
  private connSendWindow = DEFAULT_WINDOW;
  private readonly blocked = new Set<H2Stream>();

  // our settings
  readonly streamWindow: number;
  private readonly connWindow: number;
  private readonly maxFrame: number;
  private readonly maxStreams: number;
  readonly highWaterMark: number;
  private connRecvWindow: number;
  private connCredit = 0;

  // output
  readonly transport: H2Transport;
  private readonly writer: H2Writer;
  /** Called once the transport is closed (graceful waits use it). */
  private readonly closeWaiters: (() => void)[] = [];

  // input
  private state: ParseState;
  private prefaceHave = 0;
  private readonly hdr = Buffer.alloc(FRAME_HEADER_BYTES);
  private hdrHave = 0;
  private fLen = 0;
  private fType = 0;
  private fFlags = 0;
  private fStream = 0;
  private payload: Buffer = Buffer.alloc(0);
  private payloadHave = 0;
  private dataStream: H2Stream | undefined;
  private dataLeft = 0;
  private padLeft = 0;
  private padPending = false;
  private readonly hpack: HpackDecoder;
  private headerBlock: { stream: number; parts: Buffer[]; bytes: number; frames: number; endStream: boolean } | undefined;
  /** Consecutive HEADERS/CONTINUATION/DATA frames with no payload and no END_STREAM (server). */
  private emptyFrames = 0;

  private nextStreamId = 1;
  private lastPeerStream = 0;
  /** Closed streams the peer had finished, oldest first (REMEMBERED_CLOSED_STREAMS of them). */
  private readonly finishedByPeer = new Set<number>();
  private readonly clock: Clock;
  private lastReceiveAt: number;
  private pingSentAt: number | undefined;
  private lastPeerPingAt: number | undefined;
  private pingStrikes = 0;
  private readonly resetBudget: RateBudget | undefined;
  /** Timers that end with the session: the SETTINGS ACK wait and the keepalive tick. */
  private settingsTimer: TimerHandle | undefined;
  private keepaliveTimer: TimerHandle | undefined;
  private error: H2Error | undefined;

  constructor(
    socket: Duplex | H2Transport,
    private readonly o: H2SessionOptions,
  ) {
    this.transport = "listen" in socket && "retainsWrites" in socket ? socket : new NodeTransport(socket);
    this.writer = new H2Writer(this.transport, () => this.onWriterRoom());
    this.streamWindow = o.streamWindow ?? 1 << 20;
    this.connWindow = Math.max(o.connectionWindow ?? 2 << 20, DEFAULT_WINDOW);
    this.maxFrame = Math.min(Math.max(o.maxFrameSize ?? MIN_FRAME_SIZE, MIN_FRAME_SIZE), MAX_FRAME_SIZE);
    this.maxStreams = o.maxConcurrentStreams ?? 100_000;
    this.highWaterMark = o.highWaterMark ?? 256 * 1024;
    this.connRecvWindow = this.connWindow;
    this.hpack = new HpackDecoder(4096, o.maxHeaderListSize ?? 256 * 1024);
    this.clock = o.clock ?? systemClock;
    const clock = this.clock;
    this.resetBudget = o.role === "server" && o.resetBudget ? new RateBudget(o.resetBudget, () => clock.now()) : undefined;
    this.state = o.role === "server" ? "preface" : "header";
    this.lastReceiveAt = clock.now();

    // A close is clean when either side said GOAWAY first or nothing was in progress.
    const clean = () => this.goaway !== undefined || this.closing || this.streams.size === 0;
    this.transport.listen({
      data: (chunk) => this.onSocketData(chunk),
      drain: () => this.onSocketDrain(),
      end: () => {
        if (this.closed) return this.transport.destroy(); // after our GOAWAY: the peer is done too
        this.destroy(this.error ?? (clean() ? undefined : new H2Error(H2Code.INTERNAL_ERROR, "connection closed by the peer")));
      },
      close: (e) => {
        if (e) this.error ??= new H2Error(H2Code.INTERNAL_ERROR, e.message);
        this.destroy(this.error ?? (clean() ? undefined : new H2Error(H2Code.INTERNAL_ERROR, "connection closed")));
        for (const w of this.closeWaiters.splice(0)) w();
      },
    });
    if (o.role === "client") this.push(PREFACE, Piece.PAYLOAD);
    const settings: [number, number][] = [
      [Setting.INITIAL_WINDOW_SIZE, this.streamWindow],
      [Setting.MAX_FRAME_SIZE, this.maxFrame],
      [Setting.MAX_HEADER_LIST_SIZE, o.maxHeaderListSize ?? 256 * 1024],
    ];
    if (o.role === "client") settings.unshift([Setting.ENABLE_PUSH, 0]);
    else settings.unshift([Setting.MAX_CONCURRENT_STREAMS, this.maxStreams]);
    this.push(settingsFrame(settings), Piece.CONTROL);
    const settingsTimeout = Math.min(Math.max(o.settingsTimeoutMs ?? SETTINGS_ACK_TIMEOUT_MS, 1), MAX_TIMER_MS);
    // Stall-tolerant: a SETTINGS ACK that arrived while the agent was not running is read first.
    this.settingsTimer = stallTolerantDeadline(clock, settingsTimeout, () =>
      this.fail(H2Code.SETTINGS_TIMEOUT, `the peer did not acknowledge our SETTINGS within ${settingsTimeout} ms`),
    );
    if (this.connWindow > DEFAULT_WINDOW) this.push(windowUpdateFrame(0, this.connWindow - DEFAULT_WINDOW));
    if (o.keepalive) this.startKeepalive(o.keepalive.intervalMs, o.keepalive.timeoutMs);
  }

  /** Client: open a stream with request headers. */
  request(headers: HeaderList, endStream = false): H2Stream {
    if (this.o.role !== "client") throw new Error("request() on a server session");
    if (this.closed || this.closing) throw new H2Error(H2Code.INTERNAL_ERROR, "connection closed");
    if (this.goaway) throw new H2Error(H2Code.REFUSED_STREAM, "the peer sent GOAWAY");
    if (this.streams.size >= this.peerMaxStreams) throw new H2Error(H2Code.REFUSED_STREAM, "peer's concurrent stream limit reached");
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    const s = new H2Stream(this, id);
    this.streams.set(id, s);
    this.sendHeaders(id, headers, endStream);
    if (endStream) s.localEnded = true;
    return s;
  }

  /**
   * Graceful: GOAWAY(NO_ERROR), then the socket is ended after the queued bytes once nothing more
   * is owed: a server's streams have sent all they will send (ended or reset); a client's have
   * also had their answers (closed both ways), since a server may drop the responses of a client
   * whose socket ended (node's does), as Go's ClientConn.Shutdown waits. With `graceMs` ≤ 0 the
   * streams still sending are reset. Once ended, the socket is closed when the peer ends its side
   * too, or LINGER_MS later (see linger). Whatever is left after `graceMs` (at least 1 s) is destroyed.
   */
  close(graceMs = 0, code: number = H2Code.NO_ERROR, debug = ""): void {
    if (this.closed || this.closing) return;
    this.closing = true;
    this.writer.push(goawayFrame(this.lastPeerStream, code, debug), Piece.CONTROL);
    const t = this.clock.timer(Math.min(Math.max(graceMs, 1000), MAX_TIMER_MS), () => this.destroy(undefined));
    this.onTransportClosed(() => t.cancel());
    if (graceMs <= 0) for (const st of [...this.streams.values()]) if (!st.localEnded) st.reset(H2Code.CANCEL, "connection closing");
    this.checkClosing();
  }

  private closing = false;
  private endWhenFlushed = false;

  /** While closing: end the socket once nothing more will be sent on any stream. */
  checkClosing(): void {
    if (!this.closing || this.closed) return;
    if (this.o.role === "client" && this.streams.size > 0) return; // answers still to come
    for (const st of this.streams.values()) if (!st.localEnded || st.queued > 0) return;
    this.writer.flush();
    // A full socket: end once the rest has gone (onSocketDrain comes back here).
    this.endWhenFlushed = !this.writer.idle;
    if (!this.endWhenFlushed && !this.transport.ended) this.linger(this.transport);
  }

  /**
   * End our side and keep reading (and dropping) what the peer still sends until it ends too, for
   * at most LINGER_MS; then close. Closing a socket with unread input resets the connection (TCP
   * sends RST; a Unix socket reports ECONNRESET), and a peer told so drops what it had not read
   * yet: the last messages, the trailers, the GOAWAY. An ACK that crosses our last bytes is enough.
   */
  private linger(t: H2Transport): void {
    t.shutdown();
    // A session still open (a graceful close) ends as a whole; one already destroyed only lets go of its socket.
    const timer = this.clock.timer(LINGER_MS, () => {
      if (t.destroyed) return;
      if (this.closed) t.destroy();
      else this.destroy(undefined);
    });
    this.onTransportClosed(() => timer.cancel());
  }

  /** Run `f` once the transport is closed (at once if it already is). */
  onTransportClosed(f: () => void): void {
    if (this.transport.destroyed) f();
    else this.closeWaiters.push(f);
  }

  /** Immediately: every open stream is reset, the socket destroyed (`linger`: after a GOAWAY, see below). */
  destroy(error?: H2Error, linger = false): void {
    if (this.closed) return;
    this.closed = true;
    this.error ??= error;
    this.settingsTimer?.cancel();
    this.keepaliveTimer?.cancel();
    try {
      this.writer.flush();
    } catch {}
    if (linger && !this.transport.destroyed && !this.transport.ended) {
      // After a GOAWAY naming the reason: so it is not lost to a reset.
      this.linger(this.transport);
    } else this.transport.destroy();
    const reason = this.error ? `connection lost: ${this.error.message}` : "connection closed";
    for (const s of [...this.streams.values()]) {
      // After our graceful close, a stream that sent all it had is done, whatever the peer's half.
      if (!this.error && this.closing && s.localEnded) s.release();
      // A connection that went away under an open stream: gRPC reports UNAVAILABLE for it.
      else s.remoteReset(this.error?.code ?? H2Code.INTERNAL_ERROR, reason);
    }
    this.streams.clear();
    this.o.onClose?.(this.error);
  }

  /** PING after `intervalMs` without input; the connection fails if the ACK takes over `timeoutMs`. */
  private startKeepalive(intervalMs: number, timeoutMs: number): void {
    const period = Math.max(10, Math.min(intervalMs, timeoutMs) / 2);
    const tick = () => {
      if (this.closed) return;
      this.keepaliveTimer = this.clock.timer(period, tick);
      const now = this.clock.now();
      if (this.pingSentAt !== undefined) {
        if (now - this.pingSentAt >= timeoutMs) this.fail(H2Code.INTERNAL_ERROR, `keepalive ping not answered within ${timeoutMs} ms`);
        return;
      }
      if (now - this.lastReceiveAt < intervalMs) return;
      this.pingSentAt = now;
      this.push(frame(FrameType.PING, 0, 0, Buffer.alloc(8)), Piece.CONTROL);
    };
    this.keepaliveTimer = this.clock.timer(period, tick);
  }

  // ---- output ----

  /**
   * Queue bytes for the socket; what is queued in one turn goes out together (writer.ts). `kind`
   * says whether they start a frame (counted) and whether it is a control frame. Past
   * MAX_OUTBOUND_CONTROL_FRAMES control frames or MAX_OUTBOUND_FRAMES frames waiting for a peer that
   * does not read, the connection is a flood: GOAWAY ENHANCE_YOUR_CALM and closed.
   */
  push(b: Uint8Array, kind: PieceKind = Piece.FRAME): void {
    this.writer.push(b, kind);
    if (kind === Piece.PAYLOAD || this.closed) return;
    const w = this.writer;
    if (w.controlQueued <= MAX_OUTBOUND_CONTROL_FRAMES && w.framesQueued <= MAX_OUTBOUND_FRAMES) return;
    w.flush(); // what the socket still takes is not waiting: only a peer that does not read is cut off
    let why: string | undefined;
    if (w.controlQueued > MAX_OUTBOUND_CONTROL_FRAMES)
      why = `peer does not read: over ${MAX_OUTBOUND_CONTROL_FRAMES} control frames (SETTINGS/PING ACKs, RST_STREAM) queued`;
    else if (w.framesQueued > MAX_OUTBOUND_FRAMES) why = `peer does not read: over ${MAX_OUTBOUND_FRAMES} frames queued`;
    if (!why) return;
    // The GOAWAY is queued for form's sake: this peer reads nothing, so there is no lingering to
    // let it arrive (lingering would only read and drop what the flood still sends).
    w.push(goawayFrame(this.lastPeerStream, H2Code.ENHANCE_YOUR_CALM, why), Piece.CONTROL);
    this.destroy(new H2Error(H2Code.ENHANCE_YOUR_CALM, why));
  }

  /** Hand the socket what is queued, as far as it takes it. */
  flush(): void {
    this.writer.flush();
  }

  /** The socket is full or the writer holds its limit: streams wait (onWriterRoom). */
  get socketBlocked(): boolean {
    return this.writer.full;
  }

  /** How far the output is out, when the transport copies what it takes (stream.ts releasedBytes). */
  get outputHanded(): number | undefined {
    return this.transport.retainsWrites ? undefined : this.writer.handedTotal;
  }

  /** Bytes queued for the socket and not yet handed to it. */
  get unflushedBytes(): number {
    return this.writer.unflushedBytes;
  }

  sendHeaders(id: number, headers: HeaderList, endStream: boolean): void {
    const block = encodeHeaders(headers, this.tableSizeUpdateOwed);
    this.tableSizeUpdateOwed = false;
    for (const f of headerFrames(id, block, endStream, this.peerMaxFrame)) this.push(f);
  }

  sendReset(id: number, code: number): void {
    this.push(rstStreamFrame(id, code), Piece.CONTROL);
  }

  /** Move a stream's queued DATA out as far as the windows allow. */
  pump(s: H2Stream): void {
    while (s.queue.length > 0 && !this.socketBlocked) {
      const room = Math.min(s.sendWindow, this.connSendWindow);
      if (room <= 0) {
        if (this.connSendWindow <= 0) this.blocked.add(s);
        return;
      }
      // One DATA frame carries as many queued pieces as fit (a gRPC prefix with its message's
      // first chunk, several small messages), each written as the view it is.
      const limit = Math.min(room, this.peerMaxFrame);
      let whole = 0;
      let n = 0;
      while (whole < s.queue.length && n + s.queue[whole]!.length <= limit) n += s.queue[whole++]!.length;
      // The frame is filled up with the start of the next piece when that does not fit whole.
      const partial = whole < s.queue.length ? limit - n : 0;
      n += partial;
      const last = whole === s.queue.length && s.pendingEnd !== undefined && s.pendingEnd.trailers === undefined;
      const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
      writeFrameHeader(h, 0, n, FrameType.DATA, last ? Flag.END_STREAM : 0, s.id);
      this.push(h);
      for (let i = 0; i < whole; i++) this.push(s.queue[i]!, Piece.PAYLOAD);
      if (partial > 0) {
        const next = s.queue[whole]!;
        this.push(next.subarray(0, partial), Piece.PAYLOAD);
        s.queue[whole] = next.subarray(partial);
      }
      if (whole === s.queue.length) s.queue.length = 0;
      else if (whole > 0) s.queue.splice(0, whole);
      s.pumped(n, this.writer.pushedTotal);
      s.queued -= n;
      s.sendWindow -= n;
      this.connSendWindow -= n;
      if (last) {
        s.pendingEnd = undefined;
        s.localEnded = true;
        s.maybeClosed();
        this.checkClosing();
        return;
      }
    }
    if (s.queue.length === 0 && s.pendingEnd) {
      const end = s.pendingEnd;
      s.pendingEnd = undefined;
      if (end.trailers) this.sendHeaders(s.id, end.trailers, true);
      else this.push(frame(FrameType.DATA, Flag.END_STREAM, s.id));
      s.localEnded = true;
      s.maybeClosed();
      this.checkClosing();
    }
    s.maybeDrain();
  }

  /** Return receive credit for `n` consumed bytes of stream `s` (and the connection). */
  credit(s: H2Stream | undefined, n: number): void {
    this.connCredit += n;
    if (this.connCredit >= this.connWindow / 4) {
      this.push(windowUpdateFrame(0, this.connCredit));
      this.connRecvWindow += this.connCredit;
      this.connCredit = 0;
    }
    if (!s) return;
    s.credit += n;
    if (!s.paused) this.releaseCredit(s, false);
  }

  releaseCredit(s: H2Stream, force: boolean): void {
    if (s.credit === 0 || s.remoteEnded || s.closed) return;
    if (!force && s.credit < this.streamWindow / 4) return;
    this.push(windowUpdateFrame(s.id, s.credit));
    s.recvWindow += s.credit;
    s.credit = 0;
  }

  streamClosed(s: H2Stream): void {
    if (s.remoteEnded) this.rememberFinished(s.id);
    this.streams.delete(s.id);
    this.blocked.delete(s);
    this.checkClosing();
  }

  /** Note a stream the peer has finished (END_STREAM or RST_STREAM), forgetting the oldest past the bound. */
  private rememberFinished(id: number): void {
    this.finishedByPeer.add(id);
    if (this.finishedByPeer.size > REMEMBERED_CLOSED_STREAMS) this.finishedByPeer.delete(this.finishedByPeer.values().next().value!);
  }

  private onSocketDrain(): void {
    this.writer.drained();
    if (this.closing && this.endWhenFlushed) this.checkClosing(); // the writer calls onWriterRoom only when a stream waited
  }

  /** The writer has room again: end a closing connection, or move the streams' queued DATA in. */
  private onWriterRoom(): void {
    if (this.closed) return;
    if (this.closing && this.endWhenFlushed) return this.checkClosing();
    for (const s of [...this.streams.values()]) {
      this.pump(s);
      if (this.socketBlocked) return;
    }
  }

  // ---- input ----

  private onSocketData(chunk: Buffer): void {
    if (this.closed) return;
    this.lastReceiveAt = this.clock.now();
    try {
      this.parse(chunk);
    } catch (e) {
      if (e instanceof H2Error) this.fail(e.code, e.message);
      else if (e instanceof HpackError) this.fail(H2Code.COMPRESSION_ERROR, `header block: ${e.message}`);
      else throw e;
    }
  }

  /** Connection error: GOAWAY with the code, then close. */
  fail(code: number, message: string): void {
    if (this.closed) return;
    this.writer.push(goawayFrame(this.lastPeerStream, code, message.slice(0, 200)), Piece.CONTROL);
    this.destroy(new H2Error(code, message), true);
  }

  private parse(chunk: Buffer): void {
    let pos = 0;
    const n = chunk.length;
    while (pos < n && !this.closed) {
      switch (this.state) {
        case "preface": {
          const take = Math.min(PREFACE.length - this.prefaceHave, n - pos);
          for (let i = 0; i < take; i++) {
            if (chunk[pos + i] !== PREFACE[this.prefaceHave + i])
              throw new H2Error(H2Code.PROTOCOL_ERROR, "not an HTTP/2 connection preface (h2c with prior knowledge expected)");
          }
          this.prefaceHave += take;
          pos += take;
          if (this.prefaceHave === PREFACE.length) this.state = "header";
          break;
        }
        case "header": {
          const take = Math.min(FRAME_HEADER_BYTES - this.hdrHave, n - pos);
          chunk.copy(this.hdr, this.hdrHave, pos, pos + take);
          this.hdrHave += take;
          pos += take;
          if (this.hdrHave < FRAME_HEADER_BYTES) break;
          this.hdrHave = 0;
          this.beginFrame();
          break;
        }
        case "payload": {
          const take = Math.min(this.fLen - this.payloadHave, n - pos);
          chunk.copy(this.payload, this.payloadHave, pos, pos + take);
          this.payloadHave += take;
          pos += take;
          if (this.payloadHave === this.fLen) {
            this.state = "header";
            this.onFrame(this.payload.subarray(0, this.fLen));
          }
          break;
        }
        case "data": {
          if (this.padPending) {
            this.padPending = false;
            this.padLeft = chunk[pos++]!;
            this.dataLeft -= 1;
            if (this.padLeft > this.dataLeft) throw new H2Error(H2Code.PROTOCOL_ERROR, "DATA padding longer than the frame");
            this.dataLeft -= this.padLeft;
            this.credit(this.dataStream, 1 + this.padLeft); // padding is consumed at once
            if (this.dataLeft === 0 && this.padLeft === 0) this.endData();
            break;
          }
          if (this.dataLeft > 0) {
            const take = Math.min(this.dataLeft, n - pos);
            const view = chunk.subarray(pos, pos + take);
            pos += take;
            this.dataLeft -= take;
            const s = this.dataStream;
            if (s && !s.closed) {
              s.deliver(view);
              this.credit(s, take);
            } else {
              this.credit(undefined, take);
            }
          } else {
            const take = Math.min(this.padLeft, n - pos);
            pos += take;
            this.padLeft -= take;
          }
          if (this.dataLeft === 0 && this.padLeft === 0) this.endData();
          break;
        }
      }
    }
  }

  private beginFrame(): void {
    const h = this.hdr;
    this.fLen = (h[0]! << 16) | (h[1]! << 8) | h[2]!;
    this.fType = h[3]!;
    this.fFlags = h[4]!;
    this.fStream = (h[5]! & 0x7f) * 2 ** 24 + (h[6]! << 16) + (h[7]! << 8) + h[8]!;
    if (this.fLen > this.maxFrame) throw new H2Error(H2Code.FRAME_SIZE_ERROR, `frame of ${this.fLen} bytes exceeds SETTINGS_MAX_FRAME_SIZE ${this.maxFrame}`);
    if (this.headerBlock && (this.fType !== FrameType.CONTINUATION || this.fStream !== this.headerBlock.stream)) {
      throw new H2Error(H2Code.PROTOCOL_ERROR, "header block interrupted by another frame");
    }
    if (this.o.role === "server") this.countEmptyFrame();
    if (this.fType === FrameType.DATA) {
      this.beginData();
      return;
    }
    if (this.payload.length < this.fLen) this.payload = Buffer.allocUnsafe(Math.max(this.fLen, 1024));
    this.payloadHave = 0;
    if (this.fLen === 0) this.onFrame(this.payload.subarray(0, 0));
    else this.state = "payload";
  }

  /** Consecutive frames that carry nothing and end nothing: past MAX_CONSECUTIVE_EMPTY_FRAMES, a flood. */
  private countEmptyFrame(): void {
    const t = this.fType;
    if (t !== FrameType.DATA && t !== FrameType.HEADERS && t !== FrameType.CONTINUATION) return;
    const ends = t !== FrameType.CONTINUATION && (this.fFlags & Flag.END_STREAM) !== 0;
    if (this.fLen > 0 || ends) {
      this.emptyFrames = 0;
      return;
    }
    if (++this.emptyFrames > MAX_CONSECUTIVE_EMPTY_FRAMES)
      throw new H2Error(H2Code.ENHANCE_YOUR_CALM, `more than ${MAX_CONSECUTIVE_EMPTY_FRAMES} consecutive empty HEADERS/CONTINUATION/DATA frames`);
  }

  private beginData(): void {
    const id = this.fStream;
    if (id === 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "DATA on stream 0");
    this.connRecvWindow -= this.fLen;
    if (this.connRecvWindow < 0) throw new H2Error(H2Code.FLOW_CONTROL_ERROR, "peer exceeded the connection flow-control window");
    const s = this.streams.get(id);
    this.dataStream = undefined;
    if (s && !s.remoteEnded && !s.closed) {
      s.recvWindow -= this.fLen;
      if (s.recvWindow < 0) {
        s.abort(H2Code.FLOW_CONTROL_ERROR, "peer exceeded the stream flow-control window");
      } else {
        this.dataStream = s;
      }
    } else if (this.isIdle(id)) {
      throw new H2Error(H2Code.PROTOCOL_ERROR, `DATA on idle stream ${id}`);
    } else if (s && s.remoteEnded && !s.closed) {
      s.abort(H2Code.STREAM_CLOSED, "DATA after the peer ended the stream");
    }
    this.dataLeft = this.fLen;
    this.padLeft = 0;
    this.padPending = (this.fFlags & Flag.PADDED) !== 0;
    if (this.padPending && this.fLen === 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "padded DATA frame without a pad length");
    if (this.fLen === 0) this.endData();
    else this.state = "data";
  }

  private endData(): void {
    this.state = "header";
    const s = this.dataStream;
    this.dataStream = undefined;
    if (s && !s.closed && this.fFlags & Flag.END_STREAM) s.remoteEnd();
  }

  /**
   * Idle (RFC 9113 §5.1): a stream id neither side has used yet — above the last one the peer
   * opened, or, among ids of our parity, one we have not opened (a server opens none: its
   * nextStreamId stays 1, below every even id).
   */
  private isIdle(id: number): boolean {
    const ours = id % 2 === (this.o.role === "client" ? 1 : 0);
    return ours ? id >= this.nextStreamId : id > this.lastPeerStream;
  }

  private onFrame(p: Buffer): void {
    const id = this.fStream;
    switch (this.fType) {
      case FrameType.HEADERS:
        return this.onHeadersFrame(p);
      case FrameType.CONTINUATION: {
        const hb = this.headerBlock;
        if (!hb) throw new H2Error(H2Code.PROTOCOL_ERROR, "CONTINUATION without HEADERS");
        if (++hb.frames > MAX_CONTINUATION_FRAMES)
          throw new H2Error(H2Code.ENHANCE_YOUR_CALM, `more than ${MAX_CONTINUATION_FRAMES} CONTINUATION frames in one header block`);
        if (p.length > 0) hb.parts.push(Buffer.from(p));
        hb.bytes += p.length;
        if (hb.bytes > (this.o.maxHeaderListSize ?? 256 * 1024) * 2) throw new H2Error(H2Code.ENHANCE_YOUR_CALM, "header block too large");
        if (this.fFlags & Flag.END_HEADERS) this.endHeaderBlock();
        return;
      }
      case FrameType.SETTINGS:
        return this.onSettings(p);
      case FrameType.WINDOW_UPDATE: {
        if (p.length !== 4) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "WINDOW_UPDATE must be 4 bytes");
        const inc = p.readUInt32BE(0) & MAX_WINDOW;
        if (id === 0) {
          if (inc === 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "connection WINDOW_UPDATE of 0");
          this.connSendWindow += inc;
          if (this.connSendWindow > MAX_WINDOW) throw new H2Error(H2Code.FLOW_CONTROL_ERROR, "connection window above 2^31-1");
          const waiting = [...this.blocked];
          this.blocked.clear();
          for (const s of waiting) this.pump(s);
          return;
        }
        const s = this.streams.get(id);
        if (!s) {
          if (this.isIdle(id)) throw new H2Error(H2Code.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${id}`);
          return; // a closed stream: the peer may credit it after we ended it (§5.1)
        }
        if (inc === 0) return s.abort(H2Code.PROTOCOL_ERROR, "stream WINDOW_UPDATE of 0");
        s.sendWindow += inc;
        if (s.sendWindow > MAX_WINDOW) return s.abort(H2Code.FLOW_CONTROL_ERROR, "stream window above 2^31-1");
        this.pump(s);
        return;
      }
      case FrameType.PING: {
        if (p.length !== 8) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "PING must be 8 bytes");
        if (id !== 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "PING on a stream");
        if (this.fFlags & Flag.ACK) {
          this.pingSentAt = undefined;
          return;
        }
        this.checkPingPolicy();
        if (!this.closed) this.push(frame(FrameType.PING, Flag.ACK, 0, Buffer.from(p)), Piece.CONTROL);
        return;
      }
      case FrameType.RST_STREAM: {
        if (p.length !== 4) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "RST_STREAM must be 4 bytes");
        if (id === 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "RST_STREAM on stream 0");
        if (this.isIdle(id)) throw new H2Error(H2Code.PROTOCOL_ERROR, `RST_STREAM on idle stream ${id}`);
        const code = p.readUInt32BE(0);
        const st = this.streams.get(id);
        if (st) {
          this.rememberFinished(id);
          st.remoteReset(code, `stream reset by the peer (${h2CodeName(code)})`);
        } // else a closed stream: both sides may reset it at once (§5.1)
        if (this.resetBudget && !this.resetBudget.take()) {
          const b = this.o.resetBudget!;
          this.writer.push(goawayFrame(this.lastPeerStream, H2Code.ENHANCE_YOUR_CALM, "too_many_resets"), Piece.CONTROL);
          this.destroy(
            new H2Error(H2Code.ENHANCE_YOUR_CALM, `client reset streams faster than ${b.perSecond}/s after a burst of ${b.burst} (too_many_resets)`),
            true,
          );
        }
        return;
      }
      case FrameType.GOAWAY: {
        if (p.length < 8) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
        const last = p.readUInt32BE(0) & MAX_WINDOW;
        const code = p.readUInt32BE(4);
        const debug = p.subarray(8).toString("utf8");
        this.goaway = { code, lastStreamId: last, debug };
        this.o.onGoaway?.(code, last, debug);
        const why = `the peer sent GOAWAY (${h2CodeName(code)}${debug ? `: ${debug}` : ""})`;
        for (const s of [...this.streams.values()]) {
          if (s.id > last && this.o.role === "client") s.remoteReset(H2Code.REFUSED_STREAM, why);
          else if (code !== H2Code.NO_ERROR) s.remoteReset(code, why);
        }
        if (this.streams.size === 0) this.destroy(code === H2Code.NO_ERROR ? undefined : new H2Error(code, why));
        return;
      }
      case FrameType.PUSH_PROMISE:
        throw new H2Error(H2Code.PROTOCOL_ERROR, "PUSH_PROMISE received with push disabled");
      case FrameType.PRIORITY:
        if (p.length !== 5) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "PRIORITY must be 5 bytes");
        return;
      default:
        return; // unknown frame types are ignored (RFC 9113 §4.1)
    }
  }

  private checkPingPolicy(): void {
    const pol = this.o.pingPolicy;
    if (!pol) return;
    const now = this.clock.now();
    if (this.lastPeerPingAt !== undefined && now - this.lastPeerPingAt < pol.minIntervalMs) {
      this.pingStrikes++;
      if (this.pingStrikes > pol.maxStrikes) {
        this.writer.push(goawayFrame(this.lastPeerStream, H2Code.ENHANCE_YOUR_CALM, "too_many_pings"), Piece.CONTROL);
        // Linger as fail() does, so the flooding client reads the GOAWAY instead of a reset.
        this.destroy(new H2Error(H2Code.ENHANCE_YOUR_CALM, `client pings more often than every ${pol.minIntervalMs} ms (too_many_pings)`), true);
        return;
      }
    }
    this.lastPeerPingAt = now;
  }

  /** Data or headers sent on a stream: ping strikes start over (gRPC's enforcement rule). */
  resetPingStrikes(): void {
    this.pingStrikes = 0;
    this.lastPeerPingAt = undefined;
  }

  private onHeadersFrame(p: Buffer): void {
    const id = this.fStream;
    if (id === 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "HEADERS on stream 0");
    let start = 0;
    let end = p.length;
    if (this.fFlags & Flag.PADDED) {
      if (p.length < 1) throw new H2Error(H2Code.PROTOCOL_ERROR, "padded HEADERS without a pad length");
      const pad = p[0]!;
      start = 1;
      end -= pad;
    }
    if (this.fFlags & Flag.PRIORITY) start += 5;
    if (start > end) throw new H2Error(H2Code.PROTOCOL_ERROR, "HEADERS padding/priority longer than the frame");
    this.headerBlock = {
      stream: id,
      parts: [Buffer.from(p.subarray(start, end))],
      bytes: end - start,
      frames: 0,
      endStream: (this.fFlags & Flag.END_STREAM) !== 0,
    };
    if (this.fFlags & Flag.END_HEADERS) this.endHeaderBlock();
  }

  private endHeaderBlock(): void {
    const hb = this.headerBlock!;
    this.headerBlock = undefined;
    // Always decode: the HPACK table is shared by the whole connection.
    const headers = this.hpack.decode(hb.parts.length === 1 ? hb.parts[0]! : Buffer.concat(hb.parts));
    const existing = this.streams.get(hb.stream);
    if (existing) {
      // Half-closed (remote): more HEADERS are a stream error STREAM_CLOSED (RFC 9113 §5.1), as DATA is.
      if (existing.remoteEnded) {
        if (!existing.closed) existing.abort(H2Code.STREAM_CLOSED, "HEADERS after the peer ended the stream");
        return;
      }
      existing.receiveHeaders(headers, hb.endStream);
      return;
    }
    // A closed stream the peer had finished: it knows, so this is its error (§5.1 "closed").
    if (this.finishedByPeer.has(hb.stream)) throw new H2Error(H2Code.STREAM_CLOSED, `HEADERS on closed stream ${hb.stream}`);
    if (this.o.role === "client") {
      if (this.isIdle(hb.stream)) throw new H2Error(H2Code.PROTOCOL_ERROR, `HEADERS on stream ${hb.stream}, which we did not open`);
      return; // a stream we reset (or closed long ago): its late answer is dropped
    }
    if (hb.stream % 2 === 0) throw new H2Error(H2Code.PROTOCOL_ERROR, `client opened even stream ${hb.stream}`);
    if (hb.stream <= this.lastPeerStream) return; // a stream we reset (or closed long ago): ignored
    this.lastPeerStream = hb.stream;
    if (this.goaway || this.closing || this.closed) return this.sendReset(hb.stream, H2Code.REFUSED_STREAM);
    if (this.streams.size >= this.maxStreams) return this.sendReset(hb.stream, H2Code.REFUSED_STREAM);
    const s = new H2Stream(this, hb.stream);
    this.streams.set(hb.stream, s);
    if (hb.endStream) s.remoteEnded = true;
    this.o.onStream?.(s, headers);
    if (hb.endStream && !s.closed) s.remoteEnd(true);
  }

  private onSettings(p: Buffer): void {
    if (this.fStream !== 0) throw new H2Error(H2Code.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (this.fFlags & Flag.ACK) {
      if (p.length !== 0) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      this.settingsTimer?.cancel();
      this.settingsTimer = undefined;
      return;
    }
    if (p.length % 6 !== 0) throw new H2Error(H2Code.FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6");
    for (let i = 0; i < p.length; i += 6) {
      const id = p.readUInt16BE(i);
      const v = p.readUInt32BE(i + 2);
      switch (id) {
        case Setting.ENABLE_PUSH:
          if (v > 1) throw new H2Error(H2Code.PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH must be 0 or 1");
          break;
        case Setting.MAX_CONCURRENT_STREAMS:
          this.peerMaxStreams = v;
          break;
        case Setting.INITIAL_WINDOW_SIZE: {
          if (v > MAX_WINDOW) throw new H2Error(H2Code.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1");
          const delta = v - this.peerInitialWindow;
          this.peerInitialWindow = v;
          for (const s of this.streams.values()) {
            s.sendWindow += delta;
            if (s.sendWindow > MAX_WINDOW)
              throw new H2Error(H2Code.FLOW_CONTROL_ERROR, `SETTINGS_INITIAL_WINDOW_SIZE change takes stream ${s.id}'s window above 2^31-1`);
          }
          break;
        }
        case Setting.MAX_FRAME_SIZE:
          if (v < MIN_FRAME_SIZE || v > MAX_FRAME_SIZE) throw new H2Error(H2Code.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${v} out of range`);
          this.peerMaxFrame = v;
          break;
        case Setting.HEADER_TABLE_SIZE:
          if (v !== this.peerHeaderTableSize) this.tableSizeUpdateOwed = true;
          this.peerHeaderTableSize = v;
          break;
        default:
          break; // advisory or unknown
      }
    }
    this.push(frame(FrameType.SETTINGS, Flag.ACK, 0), Piece.CONTROL);
    if (this.closed) return;
    for (const s of this.streams.values()) this.pump(s);
  }
}
