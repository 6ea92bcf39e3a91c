// One DNS-over-TCP client connection: 2-byte length-prefixed messages (RFC 1035 4.2.2), pipelined
// queries answered as they complete (RFC 7766 6.2.1.1), with the bounds a client cannot push past:
// - at most `maxInflight` queries of this connection wait for an answer at once; past that the
//   connection is not read (the client's own sends back up) until one is answered;
// - replies the client does not read are kept up to `maxQueuedReplyBytes`, then reading stops too;
// - a query must arrive whole within `queryMs` of its first byte (miekg/dns's read timeout, 2 s,
//   in Istio's agent); a byte at a time does not stretch it;
// - with nothing pending, the connection is closed after `idleMs` (miekg/dns's 8 s).
// Socket-free: the listener hands it the socket's events (server.ts); timers are injected.

import type { TimerHandle } from "../lib/clock.ts";
import type { Reply } from "./handler.ts";

/** The part of a socket a connection uses (Bun's socket; tests use a fake). */
export interface TcpPeer {
  /** Bytes the kernel took (the rest is the caller's to keep), or -1 when closed. */
  write(b: Uint8Array): number;
  pause(): void;
  resume(): void;
  end(): void;
}

export interface TcpLimits {
  idleMs: number;
  queryMs: number;
  maxInflight: number;
  maxQueuedReplyBytes: number;
}

export interface TcpConnectionDeps {
  handle(msg: Uint8Array): Reply | Promise<Reply>;
  timer(ms: number, fn: () => void): TimerHandle;
  /** A query handler threw or rejected (the query is dropped, the connection goes on). */
  onHandlerError(e: unknown): void;
  /** The connection was closed for taking longer than `queryMs` to send a query. */
  onQueryTimeout(): void;
}

export class TcpDnsConnection {
  private buf: Uint8Array = new Uint8Array(0);
  private inflight = 0;
  private readonly out: Uint8Array[] = [];
  private outBytes = 0;
  private paused = false;
  private closed = false;
  private idle: TimerHandle | undefined;
  private queryDeadline: TimerHandle | undefined;

  constructor(
    private readonly peer: TcpPeer,
    private readonly limits: TcpLimits,
    private readonly deps: TcpConnectionDeps,
  ) {
    this.settle(false);
  }

  /** Queries read and not yet answered. */
  get pending(): number {
    return this.inflight;
  }

  onData(chunk: Uint8Array): void {
    if (this.closed) return;
    if (this.buf.length === 0)
      this.buf = new Uint8Array(chunk); // the socket's chunk is not ours to keep
    else {
      const merged = new Uint8Array(this.buf.length + chunk.length);
      merged.set(this.buf);
      merged.set(chunk, this.buf.length);
      this.buf = merged;
    }
    this.pump();
  }

  onDrain(): void {
    if (this.closed) return;
    while (this.out.length > 0) {
      const head = this.out[0]!;
      const n = this.peer.write(head);
      if (n < 0) return this.onClose();
      this.outBytes -= Math.max(n, 0);
      if (n < head.length) {
        this.out[0] = head.subarray(n);
        return;
      }
      this.out.shift();
    }
    this.pump();
  }

  onClose(): void {
    this.closed = true;
    this.idle?.cancel();
    this.queryDeadline?.cancel();
    this.out.length = 0;
    this.outBytes = 0;
  }

  /** Dispatch the complete messages buffered while under the limits, then decide reading and timers. */
  private pump(): void {
    let consumed = false;
    let off = 0;
    while (!this.closed && this.buf.length - off >= 2 && !this.full()) {
      const len = (this.buf[off]! << 8) | this.buf[off + 1]!;
      if (this.buf.length - off < 2 + len) break;
      const msg = Buffer.from(this.buf.buffer, this.buf.byteOffset + off + 2, len);
      off += 2 + len;
      consumed = true;
      this.dispatch(msg);
    }
    if (off > 0) this.buf = this.buf.slice(off); // a copy: the handler may keep views of what it got
    this.settle(consumed);
  }

  private full(): boolean {
    return this.inflight >= this.limits.maxInflight || this.outBytes >= this.limits.maxQueuedReplyBytes;
  }

  private dispatch(msg: Uint8Array): void {
    let r: Reply | Promise<Reply>;
    try {
      r = this.deps.handle(msg);
    } catch (e) {
      this.deps.onHandlerError(e);
      return;
    }
    if (!(r instanceof Promise)) return this.send(r);
    this.inflight++;
    r.then(
      (reply) => this.answered(reply),
      (e: unknown) => {
        this.deps.onHandlerError(e);
        this.answered(undefined);
      },
    );
  }

  private answered(reply: Reply): void {
    this.inflight--;
    if (this.closed) return;
    this.send(reply);
    this.pump();
  }

  private send(reply: Reply): void {
    if (!reply || this.closed) return;
    const frame = new Uint8Array(reply.length + 2);
    frame[0] = reply.length >> 8;
    frame[1] = reply.length & 0xff;
    frame.set(reply, 2);
    if (this.out.length > 0) {
      this.out.push(frame);
      this.outBytes += frame.length;
      return;
    }
    const n = this.peer.write(frame);
    if (n < 0) return this.onClose();
    if (n < frame.length) {
      this.out.push(frame.subarray(n));
      this.outBytes += frame.length - n;
    }
  }

  /** Reading, the whole-query deadline and the idle timer, from what is pending now. */
  private settle(consumed: boolean): void {
    if (this.closed) return;
    const waiting = this.buf.length >= 2 && this.buf.length >= 2 + ((this.buf[0]! << 8) | this.buf[1]!);
    const partial = this.buf.length > 0 && !waiting;
    // Reading: stop while a complete query waits for room; go on otherwise.
    const stop = waiting || this.full();
    if (stop !== this.paused) {
      this.paused = stop;
      if (stop) this.peer.pause();
      else this.peer.resume();
    }
    // The query deadline runs from a query's first byte until it is whole.
    if (consumed || !partial) {
      this.queryDeadline?.cancel();
      this.queryDeadline = undefined;
    }
    if (partial && !this.queryDeadline) {
      this.queryDeadline = this.deps.timer(this.limits.queryMs, () => {
        this.queryDeadline = undefined;
        if (this.closed) return;
        this.deps.onQueryTimeout();
        this.peer.end();
        this.onClose();
      });
    }
    // Idle: nothing read, nothing to answer, nothing to write.
    const idle = this.buf.length === 0 && this.inflight === 0 && this.out.length === 0;
    if (!idle) {
      this.idle?.cancel();
      this.idle = undefined;
    } else if (!this.idle || consumed) {
      this.idle?.cancel();
      this.idle = this.deps.timer(this.limits.idleMs, () => {
        this.idle = undefined;
        if (this.closed) return;
        this.peer.end();
        this.onClose();
      });
    }
  }
}
