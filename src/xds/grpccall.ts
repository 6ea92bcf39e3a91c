// The server side of one gRPC call on an HTTP/2 stream (gRPC over HTTP/2): response headers at
// once, gRPC-framed messages as DATA, and the status as trailers (or a trailers-only response when
// the call is refused before it starts). Shared by the agent's two h2c gRPC servers, the XDS
// socket (downstream.ts) and the SDS socket (src/sds/server.ts).

import { H2Code } from "./h2/frames.ts";
import type { HeaderList } from "./h2/hpack.ts";
import type { H2Stream } from "./h2/stream.ts";
import type { GrpcStatus } from "./types.ts";

/** A gRPC message for `grpc-message`: percent-encode what HTTP/2 headers may not carry. */
export function encodeGrpcMessage(m: string): string {
  return m.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

/** The trailers (or trailers-only response) carrying a gRPC status. */
export function statusTrailers(s: GrpcStatus): HeaderList {
  const t: HeaderList = [["grpc-status", String(s.code)]];
  if (s.message) t.push(["grpc-message", encodeGrpcMessage(s.message)]);
  return t;
}

export const GRPC_RESPONSE_HEADERS: HeaderList = [
  [":status", "200"],
  ["content-type", "application/grpc"],
  ["grpc-accept-encoding", "identity"],
];

/** Refuse a call before it starts: one HEADERS frame with the status, ending the stream. */
export function respondTrailersOnly(stream: H2Stream, s: GrpcStatus): void {
  stream.respond([...GRPC_RESPONSE_HEADERS, ...statusTrailers(s)], true);
}

/** A client that stops reading must not pin a finished stream for longer than this. */
const FINISHED_STREAM_LINGER_MS = 10_000;

export class GrpcServerCall {
  finished = false;

  constructor(
    protected readonly stream: H2Stream,
    readonly path: string,
  ) {
    stream.respond(GRPC_RESPONSE_HEADERS);
  }

  /** Send gRPC-framed bytes (kept by reference); false = wait for the stream's onDrain. */
  write(bytes: Uint8Array): boolean {
    if (this.finished || this.stream.closed) return true;
    return this.stream.write(bytes);
  }
  writev(a: Uint8Array, b: Uint8Array): boolean {
    if (this.finished || this.stream.closed) return true;
    return this.stream.writev(a, b);
  }
  /** Bytes written to this call so far (stream.ts `writtenTotal`). */
  get written(): number {
    return this.stream.writtenTotal;
  }
  /** Of those, how many from the first nothing references any more (stream.ts). */
  releasedBytes(): number {
    return this.stream.releasedBytes();
  }
  /** Stop crediting the client's flow-control window: it stalls once the window is used. */
  pause(): void {
    this.stream.pause();
  }
  resume(): void {
    this.stream.resume();
  }
  /** End the call with a gRPC status (trailers after what is queued). Idempotent. */
  finish(s: GrpcStatus): void {
    if (this.finished) return;
    this.finished = true;
    if (this.stream.closed) return;
    this.stream.end(statusTrailers(s));
    const t = setTimeout(() => this.stream.reset(H2Code.CANCEL), FINISHED_STREAM_LINGER_MS);
    t.unref?.();
    const prev = this.stream.handlers.onClose;
    this.stream.handlers.onClose = () => {
      clearTimeout(t);
      prev?.();
    };
  }
}
