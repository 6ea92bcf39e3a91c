// Frees the memory under the chunks read from istiod as soon as nothing references them, instead
// of leaving it to the garbage collector. Every socket read in Bun is a freshly allocated buffer,
// and the relay forwards views of it (docs/xds.md: nothing is copied), so relaying N MiB allocated
// N MiB that stayed resident until JavaScriptCore's next collection: the peak RSS of a push
// (docs/memory.md, "Burst memory"). Detaching an ArrayBuffer (`transfer(0)`) hands its memory back
// to the allocator at once, where the next read reuses it.
//
// A chunk is held with a mark: how many bytes its reader had written downstream once it was
// handled (every view of it is among them: the relay forwards in order and copies what it
// gathers). It is released once the reader says that many bytes are out (`released()`: handed to
// a socket that copies what it takes, or dropped). Checked after the turn that delivered a chunk
// (its microtasks included: the writer hands its queue to the socket in one) and whenever the
// owner calls `check` (the relay does when Envoy's next request arrives). Only chunks that are the
// whole of their buffer are held. Whatever is never released is left to the collector, as before.

/** Chunks held at most; past it the oldest are left to the garbage collector. */
export const MAX_HELD_CHUNKS = 1024;

export interface ReleaseSource {
  /** Bytes written downstream so far: a chunk handled now is released once `released()` reaches this. */
  mark(): number;
  /** Bytes written downstream that nothing references any more, counted from the first. */
  released(): number;
}

export class ChunkReleaser {
  private buffers: ArrayBuffer[] = [];
  private marks: number[] = [];
  private checkQueued = false;
  /** Bytes released so far. */
  releasedBytes = 0;

  constructor(private readonly source: ReleaseSource) {}

  /** A chunk was delivered (and handled) in this turn: hold it, and check once this turn's microtasks have run. */
  hold(chunk: Uint8Array): void {
    const buffer = chunk.buffer;
    if (!(buffer instanceof ArrayBuffer) || chunk.byteOffset !== 0 || chunk.byteLength !== buffer.byteLength || buffer.byteLength === 0) return;
    if (this.buffers.length >= MAX_HELD_CHUNKS) {
      this.buffers.shift();
      this.marks.shift();
    }
    this.buffers.push(buffer);
    this.marks.push(this.source.mark());
    if (this.checkQueued) return;
    this.checkQueued = true;
    queueMicrotask(() => {
      this.checkQueued = false;
      this.check();
    });
  }

  /** Release, oldest first, every chunk held whose bytes are all out. */
  check(): void {
    if (this.buffers.length === 0) return;
    const out = this.source.released();
    let n = 0;
    while (n < this.buffers.length && this.marks[n]! <= out) {
      const b = this.buffers[n++]!;
      if (b.detached) continue;
      this.releasedBytes += b.byteLength;
      b.transfer(0);
    }
    if (n === 0) return;
    this.buffers.splice(0, n);
    this.marks.splice(0, n);
  }

  /** Forget what is held (the stream is gone): the collector frees it. */
  drop(): void {
    this.buffers = [];
    this.marks = [];
  }

  /** Chunks held now (tests, debug). */
  get held(): number {
    return this.buffers.length;
  }
}
