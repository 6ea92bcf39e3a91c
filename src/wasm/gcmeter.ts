// Memory of Wasm downloads, bounded by count rather than by the collector's mood. A download holds
// only a few 16 KiB chunks at a time, but every chunk it has finished with stays in RSS until the
// garbage collector runs, and Bun runs it late when a stream moves hundreds of MiB: six 256 MiB
// inflates grew RSS by ~50 MiB of dead chunks. The meter counts the bytes all downloads pass
// (received, inflated, copied) and asks for a collection after every `everyBytes`, so dead chunks
// never exceed that much plus what the collector frees at once. Each collection is a few ms on
// the main thread (the agent's heap is small): a few dozen per 256 MiB module.

export class GcMeter {
  private since = 0;

  constructor(
    private readonly everyBytes: number,
    private readonly collect: () => void,
  ) {}

  count(bytes: number): void {
    this.since += bytes;
    if (this.since < this.everyBytes) return;
    this.since = 0;
    this.collect();
  }
}
