// A unary gRPC call over the agent's own HTTP/2 client (h2/session.ts), as grpc-go makes one: one
// connection, dialed on the first call and reused by the next ones until it fails, is told to go
// away (GOAWAY: then it is closed gracefully at once, its calls finishing there) or has been idle
// for `idleMs`; then the next call dials again. Each call sends
// grpc-go's request headers (grpc-timeout from its deadline), one length-prefixed message and
// END_STREAM, and reads one response message (at most `maxResponseBytes`) and the status from the
// trailers or a trailers-only response. A non-200 HTTP answer is mapped as gRPC maps it; the
// deadline ends a stalled call (connecting included). Failures reject with GrpcCallError.

import type { Duplex } from "node:stream";
import { codeName, httpStatusToCode, resetStatus, trailerStatus } from "./grpcstatus.ts";
import { GrpcDeframer, MessageBuffer, grpcHeader } from "./grpcframe.ts";
import { H2Code } from "./h2/frames.ts";
import { headerValue, type HeaderList } from "./h2/hpack.ts";
import { H2Session, type H2Stream } from "./h2/session.ts";
import { Code } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";
import { systemClock, type Clock, type TimerHandle } from "../lib/clock.ts";
import { stallTolerantDeadline } from "../lib/deadline.ts";

/** gRPC's default limit on a received message (grpc-go and grpc-js: 4 MiB). */
export const DEFAULT_MAX_RESPONSE_BYTES = 4 << 20;
/** gRPC's default channel idle timeout: an unused connection is closed after 30 minutes. */
export const DEFAULT_IDLE_MS = 30 * 60_000;
/** The User-Agent of the agent's own gRPC calls: CSRs and the upstream xDS stream (docs/compat.md). */
export const AGENT_USER_AGENT = "istio-agent-ts";
/** Largest grpc-timeout value: 8 digits (gRPC's PROTOCOL-HTTP2). */
const MAX_TIMEOUT_DIGITS = 99_999_999;

export class GrpcCallError extends Error {
  override name = "GrpcCallError";
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(`${codeName(code)}: ${details}`);
  }
}

export interface UnaryChannelOptions {
  /** Time for each call's deadline; the real clock when omitted. */
  clock?: Pick<Clock, "now" | "timer">;
  /** Opens a connection; a throw (a missing root file, say) fails the call with that error as is. */
  dial(): Duplex;
  scheme: "http" | "https";
  /** :authority of every call. */
  authority: string;
  maxResponseBytes?: number;
  idleMs?: number;
  userAgent?: string;
}

/** grpc-timeout for a deadline `ms` from now: milliseconds, or seconds past 8 digits. */
export function grpcTimeout(ms: number): string {
  const m = Math.max(1, Math.ceil(ms));
  return m <= MAX_TIMEOUT_DIGITS ? `${m}m` : `${Math.min(Math.ceil(m / 1000), MAX_TIMEOUT_DIGITS)}S`;
}

export class UnaryChannel {
  private session: H2Session | undefined;
  /** Connections the server sent GOAWAY on, closing once their calls are done. */
  private readonly retiring = new Set<H2Session>();
  private inFlight = 0;
  /** The longest deadline of any call so far: how long a retiring connection may take to finish. */
  private longestCallMs = 0;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Connections dialed so far (for tests and logs). */
  dials = 0;

  constructor(private readonly o: UnaryChannelOptions) {}

  /** Calls `path` with one request message; resolves with the response message's bytes. */
  call(path: string, metadata: HeaderList, request: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    clearTimeout(this.idleTimer);
    this.inFlight++;
    this.longestCallMs = Math.max(this.longestCallMs, timeoutMs);
    return new Promise<Uint8Array>((resolve, reject) =>
      new UnaryCall(this.o, resolve, reject).start(() => this.connection(), path, metadata, request, timeoutMs),
    ).finally(() => this.settled());
  }

  /** Drops the connection; calls in flight end CANCELLED. The next call dials again. */
  close(): void {
    clearTimeout(this.idleTimer);
    const all = [...this.retiring, ...(this.session ? [this.session] : [])];
    this.retiring.clear();
    this.session = undefined;
    for (const s of all) {
      for (const st of [...s.streams.values()]) st.reset(H2Code.CANCEL);
      s.close(0);
    }
  }

  private connection(): H2Session {
    const cur = this.session;
    if (cur && !cur.closed && !cur.goaway) return cur;
    this.session = undefined;
    const socket = this.o.dial();
    this.dials++;
    const s = new H2Session(socket, {
      role: "client",
      // Told to go away: closed gracefully at once (the session waits for its calls' answers);
      // new calls get a new connection.
      onGoaway: () => {
        if (this.session === s) this.session = undefined;
        this.retiring.add(s);
        s.close(this.longestCallMs);
      },
      onClose: () => {
        if (this.session === s) this.session = undefined;
        this.retiring.delete(s);
      },
    });
    this.session = s;
    return s;
  }

  private settled(): void {
    this.inFlight--;
    if (this.inFlight > 0 || !this.session) return;
    const t = setTimeout(() => this.close(), this.o.idleMs ?? DEFAULT_IDLE_MS);
    t.unref?.();
    this.idleTimer = t;
  }
}

/** One call's state: response headers, the message being gathered, the final status. */
class UnaryCall {
  private done = false;
  private stream: H2Stream | undefined;
  private timer: TimerHandle | undefined;
  private httpStatus = 0;
  private trailers: HeaderList | undefined;
  private message: Uint8Array | undefined;
  private body: MessageBuffer | undefined;
  private readonly max: number;

  constructor(
    private readonly o: UnaryChannelOptions,
    private readonly resolve: (m: Uint8Array) => void,
    private readonly reject: (e: unknown) => void,
  ) {
    this.max = o.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  start(connect: () => H2Session, path: string, metadata: HeaderList, request: Uint8Array, timeoutMs: number): void {
    // Time the agent did not run (a stall, a stop) is granted again: an answer already waiting in
    // the kernel is read before the verdict (src/lib/deadline.ts).
    this.timer = stallTolerantDeadline(this.o.clock ?? systemClock, timeoutMs, () =>
      this.fail(Code.DEADLINE_EXCEEDED, `Deadline exceeded after ${timeoutMs} ms`),
    );
    let session: H2Session;
    try {
      session = connect();
    } catch (e) {
      return this.end(() => this.reject(e));
    }
    const headers: HeaderList = [
      [":method", "POST"],
      [":scheme", this.o.scheme],
      [":path", path],
      [":authority", this.o.authority],
      ["content-type", "application/grpc"],
      ["user-agent", this.o.userAgent ?? AGENT_USER_AGENT],
      ["te", "trailers"],
      ["grpc-timeout", grpcTimeout(timeoutMs)],
      ...metadata,
    ];
    let s: H2Stream;
    try {
      s = session.request(headers);
    } catch (e) {
      return this.fail(Code.UNAVAILABLE, errorMessage(e));
    }
    this.stream = s;
    const deframer = new GrpcDeframer({
      onHeader: (compressed, length) => this.beginMessage(compressed, length),
      onBody: (bytes) => this.body?.append(bytes),
      onEnd: () => {
        if (this.body) this.message = this.body.view();
        this.body = undefined;
      },
    });
    s.handlers = {
      onHeaders: (h, endStream) => {
        if (s.headersSeen === 1) this.httpStatus = Number(headerValue(h, ":status"));
        if (endStream || s.headersSeen > 1) this.trailers = h;
      },
      onData: (chunk) => {
        // A non-200 answer's body is not gRPC (an HTML error page, say): its HTTP status decides.
        if (!this.done && this.httpStatus === 200) deframer.push(chunk);
      },
      onEnd: () => this.finish(),
      onReset: (code, reason) => {
        const st = resetStatus(code, reason);
        this.fail(st.code, st.message);
      },
      onClose: () => this.fail(Code.CANCELLED, "call cancelled"),
    };
    s.writev(grpcHeader(request.length), request);
    s.end();
  }

  private beginMessage(compressed: boolean, length: number): void {
    if (this.done) return;
    if (this.message !== undefined) return this.fail(Code.INTERNAL, "more than one response message for a unary call");
    if (compressed) return this.fail(Code.INTERNAL, "compressed response message, but no compression was negotiated");
    if (length > this.max) return this.fail(Code.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs. ${this.max})`);
    this.body = new MessageBuffer(length);
  }

  /** The server ended the stream: its status decides (grpc-go: a non-200 HTTP status first). */
  private finish(): void {
    if (this.done) return;
    if (this.httpStatus !== 200) return this.fail(httpStatusToCode(this.httpStatus), `Received HTTP status code ${this.httpStatus}`);
    if (!this.trailers || headerValue(this.trailers, "grpc-status") === undefined) return this.fail(Code.UNKNOWN, "No status information received");
    const st = trailerStatus(this.trailers);
    if (st.code !== Code.OK) return this.fail(st.code, st.message);
    const m = this.message;
    if (m === undefined) return this.fail(Code.INTERNAL, "the server sent no response message");
    this.end(() => this.resolve(m));
  }

  private fail(code: number, details: string): void {
    this.end(() => this.reject(new GrpcCallError(code, details)));
  }

  /** Settles the call once; a stream still open is reset (after `done`, so its own close is not a second outcome). */
  private end(settle: () => void): void {
    if (this.done) return;
    this.done = true;
    this.timer?.cancel();
    if (this.stream && !this.stream.closed) this.stream.reset(H2Code.CANCEL);
    settle();
  }
}
