// What an H2Session runs on: a byte stream that reports how much of a write it took. Two kinds:
// a node:net / node:tls socket (the upstream to istiod, and the tests' in-memory sockets), and a
// socket of Bun's own (`Bun.listen` / `Bun.connect`), which writes straight to the kernel, takes
// only what the kernel accepts and keeps no reference to what it was given, so the writer may
// reuse one output buffer (the downstream data path: no allocation, no copy queue in the runtime).

import type { Duplex } from "node:stream";

export interface H2TransportEvents {
  data(chunk: Buffer): void;
  /** A write that took less than it was given may be retried. */
  drain(): void;
  /** The peer ended its side. */
  end(): void;
  /** The connection is gone (`error` when it failed). */
  close(error: Error | undefined): void;
}

export interface H2Transport {
  /**
   * Hand bytes to the socket; returns how many it took. Fewer than given: the socket is full and
   * `drain` follows; the rest stays the caller's to write again.
   */
  write(data: Uint8Array): number;
  /** The transport may keep a reference to bytes it took (node streams queue them): a buffer handed to it must not be reused. */
  readonly retainsWrites: boolean;
  readonly destroyed: boolean;
  /** Our side was ended (no more writes). */
  readonly ended: boolean;
  /** End our side once what was taken is out; the connection closes when the peer ends too (or at once, for Bun's sockets). */
  end(): void;
  /** End our side but keep reading (a GOAWAY that must not be lost to a reset), closing on the peer's end. */
  shutdown(): void;
  destroy(): void;
  /** Where events go; set once, by the session. */
  listen(events: H2TransportEvents): void;
}

/** Bytes a node socket may hold unwritten before it is treated as full (it buffers without limit otherwise). */
export const NODE_SOCKET_BUDGET = 256 * 1024;

/** A node:net / node:tls socket (or any Duplex): takes a write whole until it holds NODE_SOCKET_BUDGET unwritten bytes. */
export class NodeTransport implements H2Transport {
  readonly retainsWrites = true;

  constructor(readonly socket: Duplex) {}

  get destroyed(): boolean {
    return this.socket.destroyed;
  }
  get ended(): boolean {
    return this.socket.writableEnded;
  }

  write(data: Uint8Array): number {
    // The socket said "full" on an earlier write (past its own high-water mark): its drain follows.
    if (this.socket.writableLength >= NODE_SOCKET_BUDGET) return 0;
    this.socket.write(data);
    return data.length;
  }

  end(): void {
    this.socket.end();
  }

  shutdown(): void {
    const sock = this.socket;
    sock.once("end", () => sock.destroy());
    sock.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  listen(ev: H2TransportEvents): void {
    let error: Error | undefined;
    this.socket.on("data", (chunk: Buffer) => ev.data(chunk));
    this.socket.on("drain", () => ev.drain());
    this.socket.on("error", (e: Error) => (error ??= e));
    this.socket.on("end", () => ev.end());
    this.socket.on("close", () => ev.close(error));
  }
}

/** The part of a Bun socket this transport uses (`Bun.listen` / `Bun.connect`). */
export interface BunSocketLike {
  write(data: Uint8Array): number;
  end(): void;
  shutdown(halfClose?: boolean): void;
  readonly fd?: number;
}

/**
 * A socket of Bun's own. The owner (listener or connector) routes that socket's handlers here:
 * `onData`, `onDrain`, `onEnd`, `onError`, `onClose`. Bun calls `close` synchronously from
 * `end()`, so every path here tolerates being re-entered.
 */
export class BunTransport implements H2Transport {
  readonly retainsWrites = false;
  destroyed = false;
  ended = false;
  private ev: H2TransportEvents | undefined;
  private error: Error | undefined;
  private lingering = false;

  constructor(readonly socket: BunSocketLike) {}

  write(data: Uint8Array): number {
    if (this.destroyed || this.ended) return data.length; // gone: what is written goes nowhere, as on node
    const n = this.socket.write(data);
    return n > 0 ? n : 0;
  }

  end(): void {
    if (this.destroyed || this.ended) return;
    this.ended = true;
    this.socket.end();
  }

  shutdown(): void {
    if (this.destroyed || this.ended) return;
    this.ended = true;
    this.lingering = true;
    this.socket.shutdown();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.ended = true;
    this.socket.end(); // Bun's sockets hold nothing unwritten: ending is closing
  }

  listen(ev: H2TransportEvents): void {
    this.ev = ev;
  }

  onData(chunk: Buffer): void {
    if (!this.destroyed) this.ev?.data(chunk);
  }
  onDrain(): void {
    if (!this.destroyed) this.ev?.drain();
  }
  onEnd(): void {
    if (this.lingering) return this.destroy();
    this.ev?.end();
  }
  onError(e: Error): void {
    this.error ??= e;
  }
  onClose(e?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.ended = true;
    this.ev?.close(this.error ?? e);
  }
}
