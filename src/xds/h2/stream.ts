// One HTTP/2 stream of an H2Session: headers, DATA as views, trailers, reset, and the two halves
// of flow control (a send queue limited by the peer's windows; receive credit held while paused).

import { H2Code } from "./frames.ts";
import type { HeaderList } from "./hpack.ts";

/**
 * What a stream needs from the connection it lives on (the session implements it). The stream
 * owns this interface so that it does not depend on the session's module.
 */
export interface StreamHost {
  /** The peer's SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window. */
  readonly peerInitialWindow: number;
  /** Our initial window per stream: a new stream's receive window. */
  readonly streamWindow: number;
  /** Bytes a stream may queue before write() asks its caller to wait. */
  readonly highWaterMark: number;
  /** The socket refused the last write; streams wait for its drain. */
  readonly socketBlocked: boolean;
  /**
   * How far the writer's output is out (writer.ts `handedTotal`), when its transport copies what
   * it takes (Bun's sockets); undefined when the transport may keep references (node streams).
   */
  readonly outputHanded: number | undefined;
  sendHeaders(id: number, headers: HeaderList, endStream: boolean): void;
  sendReset(id: number, code: number): void;
  /** Writes what the stream has queued, as far as windows and the socket allow. */
  pump(s: H2Stream): void;
  /** Returns receive credit to the peer (WINDOW_UPDATE) once enough has been consumed, or now when forced. */
  releaseCredit(s: H2Stream, force: boolean): void;
  /** The stream is closed both ways: forget it. */
  streamClosed(s: H2Stream): void;
  /**
   * DATA sent on a stream: keepalive ping strikes start over. (grpc-go resets them on HEADERS
   * too; then a client that opens a stream before each PING is never struck.)
   */
  resetPingStrikes(): void;
}

export interface H2StreamHandlers {
  /** Response headers (client), or trailers (`endStream` set) on either side. */
  onHeaders?(headers: HeaderList, endStream: boolean): void;
  /** Payload bytes as they arrive: a view, valid for the duration of the call unless kept. */
  onData?(chunk: Uint8Array): void;
  /** The peer ended its side (END_STREAM). */
  onEnd?(): void;
  /** The stream died before both sides ended: RST_STREAM, GOAWAY or connection loss. */
  onReset?(code: number, reason: string): void;
  /** A write that returned false may continue. */
  onDrain?(): void;
  /** Both sides ended or the stream was reset; fires once, last. */
  onClose?(): void;
}

export class H2Stream {
  handlers: H2StreamHandlers = {};
  localEnded = false;
  remoteEnded = false;
  closed = false;
  paused = false;
  /** Received headers blocks so far (the first is the request/response headers). */
  headersSeen = 0;

  sendWindow: number;
  recvWindow: number;
  /** Receive credit not yet returned to the peer. */
  credit = 0;
  readonly queue: Uint8Array[] = [];
  queued = 0;
  pendingEnd: { trailers?: HeaderList } | undefined;
  private wantDrain = false;
  /** Bytes accepted by write/writev, from the first. */
  writtenTotal = 0;
  /** Of those, bytes moved into the writer (or dropped), from the first. */
  private pumpedTotal = 0;
  /** Pairs (stream bytes pumped, writer position after them) not yet out: see releasedBytes. */
  private marks: number[] = [];
  private marksHead = 0;
  private releasedTotal = 0;

  constructor(
    private readonly session: StreamHost,
    readonly id: number,
  ) {
    this.sendWindow = session.peerInitialWindow;
    this.recvWindow = session.streamWindow;
  }

  /** Server: send response headers. */
  respond(headers: HeaderList, endStream = false): void {
    if (this.closed || this.localEnded) return;
    this.session.sendHeaders(this.id, headers, endStream);
    if (endStream) {
      this.localEnded = true;
      this.maybeClosed();
    }
  }

  /** Queue payload (kept by reference, not copied); false = wait for onDrain before writing more. */
  write(data: Uint8Array): boolean {
    if (this.closed || this.localEnded || this.pendingEnd) return true;
    if (data.length === 0) return this.writable();
    this.queue.push(data);
    this.queued += data.length;
    this.writtenTotal += data.length;
    return this.afterQueued();
  }

  private afterQueued(): boolean {
    this.session.resetPingStrikes();
    this.session.pump(this);
    return this.writable();
  }

  private writable(): boolean {
    const ok = this.queued < this.session.highWaterMark && !this.session.socketBlocked;
    if (!ok) this.wantDrain = true;
    return ok;
  }

  /** Queue `a` then `b` and pump once, so a small `a` shares `b`'s DATA frame. */
  writev(a: Uint8Array, b: Uint8Array): boolean {
    if (this.closed || this.localEnded || this.pendingEnd) return true;
    if (a.length > 0) this.queue.push(a);
    if (b.length > 0) this.queue.push(b);
    this.queued += a.length + b.length;
    this.writtenTotal += a.length + b.length;
    return this.afterQueued();
  }

  /** End our side after what is queued: with trailers (server) or an empty END_STREAM DATA. */
  end(trailers?: HeaderList): void {
    if (this.closed || this.localEnded || this.pendingEnd) return;
    this.pendingEnd = { trailers };
    this.session.pump(this);
  }

  /** Abort the stream: RST_STREAM to the peer, queued data dropped. */
  reset(code: number = H2Code.CANCEL, reason = "reset by the agent"): void {
    if (this.closed) return;
    this.session.sendReset(this.id, code);
    this.terminate(code, reason, true);
  }

  /** The peer broke the stream's rules: RST_STREAM to it, and the handlers hear onReset. */
  abort(code: number, reason: string): void {
    if (this.closed) return;
    this.session.sendReset(this.id, code);
    this.terminate(code, reason, false);
  }

  /** Stop returning receive credit: the peer stalls once the window is used. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.session.releaseCredit(this, true);
  }

  /** Bytes queued and not yet sent. */
  get bufferedBytes(): number {
    return this.queued;
  }

  /**
   * Of the bytes written (`writtenTotal`), how many from the first nothing references any more:
   * the writer handed them to a transport that copies what it takes, or they were dropped (a
   * reset). Their memory may then be freed (chunkrelease.ts). 0 on a transport that keeps
   * references (node streams).
   */
  releasedBytes(): number {
    const handed = this.session.outputHanded;
    if (handed === undefined) return 0;
    this.prune(handed);
    // Nothing pumped is still in the writer and nothing waits in the queue: what left the queue
    // without being pumped was dropped (a reset), so every byte written is released.
    if (this.marksHead === this.marks.length && this.queue.length === 0) this.releasedTotal = this.writtenTotal;
    return this.releasedTotal;
  }

  /** Drop the marks the writer has handed over (up to `handed`), moving releasedTotal past them. */
  private prune(handed: number): void {
    const m = this.marks;
    while (this.marksHead < m.length && m[this.marksHead + 1]! <= handed) {
      this.releasedTotal = m[this.marksHead]!;
      this.marksHead += 2;
    }
    if (this.marksHead === m.length) {
      this.marks = [];
      this.marksHead = 0;
    } else if (this.marksHead > 1024) {
      this.marks = m.slice(this.marksHead);
      this.marksHead = 0;
    }
  }

  // ---- called by the session ----

  /** `bytes` of the queue went into the writer, which had then been given `writerPosition` bytes in all. */
  pumped(bytes: number, writerPosition: number): void {
    this.pumpedTotal += bytes;
    // Nothing to count behind a transport that keeps references; otherwise what the writer has
    // handed over is pruned here too, so a stream nobody asks (SDS, requests to istiod) keeps
    // only the marks of what is still in the writer.
    const handed = this.session.outputHanded;
    if (handed === undefined) return;
    this.prune(handed);
    this.marks.push(this.pumpedTotal, writerPosition);
  }

  deliver(view: Uint8Array): void {
    this.handlers.onData?.(view);
  }

  receiveHeaders(headers: HeaderList, endStream: boolean): void {
    this.headersSeen++;
    this.handlers.onHeaders?.(headers, endStream);
    if (endStream && !this.closed) this.remoteEnd();
  }

  remoteEnd(alreadyMarked = false): void {
    if (this.remoteEnded && !alreadyMarked) return;
    this.remoteEnded = true;
    this.handlers.onEnd?.();
    this.maybeClosed();
  }

  remoteReset(code: number, reason: string): void {
    if (this.closed) return;
    this.terminate(code, reason, false);
  }

  /** Closed without an error: nothing more will be sent or read. */
  release(): void {
    if (this.closed) return;
    this.closed = true;
    this.session.streamClosed(this);
    this.handlers.onClose?.();
  }

  maybeClosed(): void {
    if (this.closed || !this.localEnded || !this.remoteEnded) return;
    this.closed = true;
    this.session.streamClosed(this);
    this.handlers.onClose?.();
  }

  maybeDrain(): void {
    if (!this.wantDrain || this.closed) return;
    if (this.queued < this.session.highWaterMark && !this.session.socketBlocked) {
      this.wantDrain = false;
      this.handlers.onDrain?.();
    }
  }

  private terminate(code: number, reason: string, local: boolean): void {
    this.closed = true;
    this.queue.length = 0;
    this.queued = 0;
    this.pendingEnd = undefined;
    this.session.streamClosed(this);
    if (!local) this.handlers.onReset?.(code, reason);
    this.handlers.onClose?.();
  }
}
