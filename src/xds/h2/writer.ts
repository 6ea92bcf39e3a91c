// The HTTP/2 session's output: frames and DATA views queued in order and handed to the transport
// in writes of at most WRITE_BATCH bytes. Small pieces (frame headers, control frames, DATA views
// of a few KiB) are copied together into one write; a piece of WRITE_BATCH or more goes as it is.
// On a transport that keeps no reference to what it took (Bun's sockets) the copies go into one
// output buffer reused for every write, so relaying allocates nothing per write; on one that does
// (node streams queue the buffers they are given) each batch is a fresh buffer. What the transport
// does not take waits, in order, for its drain: nothing is handed over while it is full.

import type { H2Transport } from "./transport.ts";

/** Largest write handed to the transport at once; also the size from which a piece is written uncopied. */
export const WRITE_BATCH = 128 * 1024;

/**
 * Bytes queued and not yet handed over past which the writer counts as full: streams stop moving
 * DATA in until it has room, so even what one turn of the event loop writes is bounded.
 */
export const QUEUE_LIMIT = 256 * 1024;

/** The reused output buffer starts this small (a connection that only sends SETTINGS costs little) and grows to WRITE_BATCH. */
const SLAB_START = 16 * 1024;

/**
 * Frames queued and not yet handed over past which the connection is a flood (Envoy's
 * max_outbound_frames default). DATA alone never gets there: `full` stops streams at half of it.
 */
export const MAX_OUTBOUND_FRAMES = 10_000;

/** SETTINGS/PING ACKs, RST_STREAM and GOAWAY queued and not yet handed over: past this, a flood (Envoy's max_outbound_control_frames default). */
export const MAX_OUTBOUND_CONTROL_FRAMES = 1_000;

/** What a queued piece is: the payload of a frame already counted, a frame, or a control frame. */
export const Piece = { PAYLOAD: 0, FRAME: 1, CONTROL: 2 } as const;
export type PieceKind = (typeof Piece)[keyof typeof Piece];

const EMPTY = new Uint8Array(0);

export class H2Writer {
  private out: Uint8Array[] = [];
  /** The kind of each piece of `out` (Piece), for the frame counts below. */
  private kinds: PieceKind[] = [];
  /** Frames (control frames included) queued and not yet handed over. */
  framesQueued = 0;
  /** Control frames queued and not yet handed over. */
  controlQueued = 0;
  /** Index of the first piece of `out` not yet handed over. */
  private outHead = 0;
  private outBytes = 0;
  /** The rest of a write the transport did not take; written first once it drains. */
  private pending: Uint8Array | undefined;
  /** Reused for batches when the transport keeps no reference to what it took. */
  private slab: Buffer | undefined;
  private flushQueued = false;
  /** The transport is full: nothing more is handed over until its drain. */
  blocked = false;
  /** Someone was told "full": tell `onRoom` once there is room again. */
  private owedRoom = false;
  /** Bytes pushed so far, counted from the first. */
  pushedTotal = 0;
  /** Of those, bytes the transport took (or that were dropped with it), from the first: a piece pushed when `pushedTotal` reached P is out once this reaches P. */
  handedTotal = 0;

  constructor(
    private readonly t: H2Transport,
    /** There is room again after `full` said otherwise (the session moves streams' DATA in). */
    private readonly onRoom: () => void = () => {},
  ) {}

  /** The transport is blocked, or QUEUE_LIMIT bytes or half of MAX_OUTBOUND_FRAMES frames wait to be handed over: queue no more DATA. */
  get full(): boolean {
    if (!this.blocked && this.outBytes < QUEUE_LIMIT && this.framesQueued < MAX_OUTBOUND_FRAMES / 2) return false;
    this.owedRoom = true;
    return true;
  }

  /** Queue bytes (kept by reference); what is queued in one turn goes out together. `kind` counts frames (Piece). */
  push(b: Uint8Array, kind: PieceKind = Piece.FRAME): void {
    this.out.push(b);
    this.kinds.push(kind);
    this.outBytes += b.length;
    this.pushedTotal += b.length;
    if (kind !== Piece.PAYLOAD) this.framesQueued++;
    if (kind === Piece.CONTROL) this.controlQueued++;
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  }

  /** Nothing is left to hand over. */
  get idle(): boolean {
    return this.pending === undefined && this.outHead === this.out.length;
  }

  /** Bytes queued and not yet handed over (a pending remainder included). */
  get unflushedBytes(): number {
    return this.outBytes + (this.pending?.length ?? 0);
  }

  /** The transport drained: go on. */
  drained(): void {
    this.blocked = false;
    this.flush();
  }

  flush(): void {
    this.flushQueued = false;
    if (this.t.destroyed || this.t.ended) return this.discard();
    while (!this.blocked) {
      let data = this.pending;
      this.pending = undefined;
      if (!data) {
        if (this.outHead === this.out.length) break;
        data = this.nextBatch();
      }
      const took = this.t.write(data);
      this.handedTotal += took;
      if (took < data.length) {
        this.pending = data.subarray(took);
        this.blocked = true;
      }
    }
    if (this.outHead === this.out.length) {
      this.out = [];
      this.kinds = [];
      this.outHead = 0;
    } else if (this.outHead > 1024) {
      this.out = this.out.slice(this.outHead);
      this.kinds = this.kinds.slice(this.outHead);
      this.outHead = 0;
    }
    if (this.owedRoom && !this.blocked) {
      this.owedRoom = false;
      this.onRoom();
    }
  }

  /** The next write: one large piece as it is, or small ones copied together (up to WRITE_BATCH). */
  private nextBatch(): Uint8Array {
    const first = this.out[this.outHead]!;
    let end = this.outHead + 1;
    let bytes = first.length;
    if (first.length < WRITE_BATCH) {
      while (end < this.out.length && bytes + this.out[end]!.length <= WRITE_BATCH) bytes += this.out[end++]!.length;
    }
    let data: Uint8Array = first;
    if (end - this.outHead > 1) {
      const b = this.batchBuffer(bytes);
      let at = 0;
      for (let i = this.outHead; i < end; i++) {
        b.set(this.out[i]!, at);
        at += this.out[i]!.length;
      }
      data = b.subarray(0, bytes);
    }
    for (let i = this.outHead; i < end; i++) {
      this.out[i] = EMPTY;
      const k = this.kinds[i]!;
      if (k !== Piece.PAYLOAD) this.framesQueued--;
      if (k === Piece.CONTROL) this.controlQueued--;
    }
    this.outHead = end;
    this.outBytes -= bytes;
    return data;
  }

  private batchBuffer(bytes: number): Buffer {
    if (this.t.retainsWrites) return Buffer.allocUnsafe(bytes);
    if (!this.slab || this.slab.length < bytes)
      this.slab = Buffer.allocUnsafe(Math.min(WRITE_BATCH, Math.max(bytes, this.slab ? this.slab.length * 2 : SLAB_START)));
    return this.slab;
  }

  /** Drop everything queued (the transport is gone). */
  discard(): void {
    this.handedTotal = this.pushedTotal;
    this.out = [];
    this.kinds = [];
    this.framesQueued = 0;
    this.controlQueued = 0;
    this.outHead = 0;
    this.outBytes = 0;
    this.pending = undefined;
    this.slab = undefined;
  }
}
