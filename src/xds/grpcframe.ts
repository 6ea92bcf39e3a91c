// gRPC length-prefixed message framing (gRPC over HTTP/2: 1 byte compressed flag, 4 bytes
// big-endian length, then the message). The deframer is incremental and copies nothing: it hands
// out subarrays of the chunks it is given, so the relay can forward a large message's bytes as
// they arrive (cut-through) while small ones are gathered whole.

export const GRPC_HEADER_BYTES = 5;

export interface DeframeSink {
  /**
   * A message starts: its flag and length are known. `header` is the 5 raw bytes and stays valid
   * after the call (a view into the pushed chunk, or its own copy when it spanned two chunks), so
   * the relay can forward it without copying.
   */
  onHeader(compressed: boolean, length: number, header: Uint8Array): void;
  /** Next bytes of the current message's body (a view into the pushed chunk). */
  onBody(bytes: Uint8Array): void;
  /** The current message is complete. */
  onEnd(): void;
}

export class GrpcDeframer {
  private readonly header = new Uint8Array(GRPC_HEADER_BYTES);
  private headerHave = 0;
  /** Body bytes still expected for the current message; -1 = reading a header. */
  private remaining = -1;

  constructor(private readonly sink: DeframeSink) {}

  /** True when no message is partially received. */
  get idle(): boolean {
    return this.remaining < 0 && this.headerHave === 0;
  }

  push(chunk: Uint8Array): void {
    let pos = 0;
    const n = chunk.length;
    while (pos < n) {
      if (this.remaining < 0 && this.headerHave === 0 && n - pos >= GRPC_HEADER_BYTES) {
        // The whole prefix is in this chunk: hand out a view of it, nothing copied.
        const h = chunk.subarray(pos, pos + GRPC_HEADER_BYTES);
        pos += GRPC_HEADER_BYTES;
        this.begin(h);
        continue;
      }
      if (this.remaining < 0) {
        const take = Math.min(GRPC_HEADER_BYTES - this.headerHave, n - pos);
        this.header.set(chunk.subarray(pos, pos + take), this.headerHave);
        this.headerHave += take;
        pos += take;
        if (this.headerHave < GRPC_HEADER_BYTES) return;
        this.headerHave = 0;
        this.begin(this.header.slice()); // split over chunks: the sink gets its own copy
        continue;
      }
      const take = Math.min(this.remaining, n - pos);
      this.sink.onBody(chunk.subarray(pos, pos + take));
      pos += take;
      this.remaining -= take;
      if (this.remaining === 0) {
        this.remaining = -1;
        this.sink.onEnd();
      }
    }
  }

  /** A whole prefix `h` was read: start the message (and end it at once when empty). */
  private begin(h: Uint8Array): void {
    const length = ((h[1]! << 24) >>> 0) + (h[2]! << 16) + (h[3]! << 8) + h[4]!;
    this.remaining = length;
    this.sink.onHeader((h[0]! & 1) === 1, length, h);
    if (length === 0) {
      this.remaining = -1;
      this.sink.onEnd();
    }
  }
}

/** The 5-byte gRPC prefix for an uncompressed message of `length` bytes. */
export function grpcHeader(length: number): Buffer {
  const b = Buffer.allocUnsafe(GRPC_HEADER_BYTES);
  b[0] = 0;
  b.writeUInt32BE(length, 1);
  return b;
}

/** A whole message with its gRPC prefix. */
export function grpcFrame(message: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(GRPC_HEADER_BYTES + message.length);
  b[0] = 0;
  b.writeUInt32BE(message.length, 1);
  b.set(message, GRPC_HEADER_BYTES);
  return b;
}

/** Gathers a message's body chunks into one buffer without re-copying on every chunk. */
export class MessageBuffer {
  private buf: Buffer;
  private have = 0;

  constructor(
    readonly total: number,
    initial = 16 * 1024,
  ) {
    this.buf = Buffer.allocUnsafe(Math.min(total, initial));
  }

  get length(): number {
    return this.have;
  }

  append(bytes: Uint8Array): void {
    if (this.have + bytes.length > this.buf.length) {
      let cap = Math.max(64, this.buf.length * 2);
      while (cap < this.have + bytes.length) cap *= 2;
      const next = Buffer.allocUnsafe(Math.min(cap, this.total));
      next.set(this.buf.subarray(0, this.have));
      this.buf = next;
    }
    this.buf.set(bytes, this.have);
    this.have += bytes.length;
  }

  /** The bytes gathered so far (a view, valid until the next append). */
  view(): Buffer {
    return this.buf.subarray(0, this.have);
  }
}
