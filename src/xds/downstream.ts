// The downstream side: an h2c gRPC server on the Unix socket `<ConfigPath>/XDS` where Envoy (or a
// proxyless gRPC client) opens ADS streams. Connections are checked with SO_PEERCRED before any
// HTTP/2 byte is read; rejected peers are closed, logged with pid/uid and counted. Streams are
// handed to the proxy as `DownstreamCall`s that carry gRPC-framed bytes and end with a status.
// The socket is one of Bun's own (`Bun.listen`), not node:net: it writes straight to the kernel
// and reports how much it took, so the session's writer reuses one output buffer and the runtime
// queues nothing (docs/xds.md, "Fourth pass").
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "../lib/log.ts";
import type { PeerAuthorizer } from "../lib/peerauth.ts";
import { FailureReport } from "../lib/component.ts";
import { XdsError } from "./errors.ts";
import { H2Code } from "./h2/frames.ts";
import { headerValue, type HeaderList } from "./h2/hpack.ts";
import { H2Session, type H2Stream } from "./h2/session.ts";
import { BunTransport } from "./h2/transport.ts";
import { bunSocketFd } from "../../native/peercred.ts";
import { DEFAULT_RESET_BUDGET, type RateBudgetOptions } from "./h2/ratebudget.ts";
import { GrpcDeframer, MessageBuffer, grpcFrame } from "./grpcframe.ts";
import type { ReflectionIndex } from "./reflection.ts";
import { Code, DELTA_PATH, REFLECTION_PATHS, SOTW_PATH, type GrpcStatus } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export interface DownstreamCall {
  readonly delta: boolean;
  readonly path: string;
  /** Send gRPC-framed response bytes (kept by reference); false = wait for onDrain. */
  write(bytes: Uint8Array): boolean;
  /** Both, in order, as one write (a message's prefix and its first chunk: one DATA frame). */
  writev?(a: Uint8Array, b: Uint8Array): boolean;
  pause(): void;
  resume(): void;
  /** End the call with a gRPC status (trailers). Idempotent. */
  finish(status: GrpcStatus): void;
  readonly finished: boolean;
}

export interface DownstreamHandlers {
  onData(chunk: Uint8Array): void;
  onDrain(): void;
  /** The client half-closed (`ended`) or went away (reset / connection loss). */
  onClientGone(ended: boolean): void;
}

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

const RESPONSE_HEADERS: HeaderList = [
  [":status", "200"],
  ["content-type", "application/grpc"],
  ["grpc-accept-encoding", "identity"],
];

class ServerCall implements DownstreamCall {
  finished = false;

  constructor(
    private readonly stream: H2Stream,
    readonly path: string,
    readonly delta: boolean,
  ) {
    stream.respond(RESPONSE_HEADERS);
  }

  write(bytes: Uint8Array): boolean {
    if (this.finished || this.stream.closed) return true;
    return this.stream.write(bytes);
  }
  writev(a: Uint8Array, b: Uint8Array): boolean {
    if (this.finished || this.stream.closed) return true;
    return this.stream.writev(a, b);
  }
  pause(): void {
    this.stream.pause();
  }
  resume(): void {
    this.stream.resume();
  }
  finish(s: GrpcStatus): void {
    if (this.finished) return;
    this.finished = true;
    if (this.stream.closed) return;
    this.stream.end(statusTrailers(s));
    // A client that stops reading must not pin the stream forever once it is finished.
    const t = setTimeout(() => this.stream.reset(H2Code.CANCEL), 10_000);
    t.unref?.();
    const prev = this.stream.handlers.onClose;
    this.stream.handlers.onClose = () => {
      clearTimeout(t);
      prev?.();
    };
  }
}

export interface DownstreamServerOptions {
  socketPath: string;
  authorizer: PeerAuthorizer;
  log: Logger;
  /** A rejected peer, for metrics. */
  onRejected(): void;
  /** A new ADS stream; return its handlers. */
  onCall(call: DownstreamCall): DownstreamHandlers;
  maxConcurrentStreams?: number;
  /** Server keepalive (Istio: ping after 30 s idle, 10 s to answer). */
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** Streams a connection may reset (rapid-reset protection; default nghttp2's 1000 burst, 33/s). */
  resetBudget?: RateBudgetOptions;
  /** Keepalive enforcement (Istio: client pings at most every 15 s). */
  minPingIntervalMs?: number;
}

/** Largest reflection request accepted (they are a few dozen bytes). */
const REFLECTION_MAX_REQUEST = 64 * 1024;

export class DownstreamServer {
  private reflection: Promise<ReflectionIndex> | undefined;
  private listener: Bun.UnixSocketListener<BunTransport | undefined> | undefined;
  private readonly sessions = new Set<H2Session>();
  /**
   * A failure after start. Bun's listener surfaces no accept(2) errors (node:net's did, as an
   * `error` event): kept so the component's contract (and the root's reaction) stays one place.
   */
  private readonly failure = new FailureReport();
  /** The listener died after start. */
  readonly failed = this.failure.failed;

  constructor(private readonly o: DownstreamServerOptions) {}

  async listen(): Promise<void> {
    const p = this.o.socketPath;
    try {
      mkdirSync(dirname(p), { recursive: true, mode: 0o750 });
      rmSync(p, { force: true });
    } catch (e) {
      throw new XdsError("downstream", `preparing socket ${p}: ${errorMessage(e)}`, { cause: e });
    }
    try {
      this.listener = Bun.listen<BunTransport | undefined>({
        unix: p,
        socket: {
          open: (sock) => {
            sock.data = this.onConnection(sock);
          },
          data: (sock, chunk) => sock.data?.onData(chunk),
          drain: (sock) => sock.data?.onDrain(),
          end: (sock) => sock.data?.onEnd(),
          error: (sock, e) => sock.data?.onError(e),
          close: (sock, e) => sock.data?.onClose(e),
        },
      });
    } catch (e) {
      throw new XdsError("downstream", `listening on ${p}: ${errorMessage(e)}`, { cause: e });
    }
    chmodSync(p, 0o666);
  }

  /**
   * Stop accepting; send GOAWAY on every connection and let what is queued (the last messages,
   * the trailers) reach the clients, up to `graceMs`; then close what is left.
   */
  async close(graceMs = 0): Promise<void> {
    this.listener?.stop(false);
    this.listener = undefined;
    const gone = [...this.sessions].map(
      (s) =>
        new Promise<void>((r) => {
          if (s.closed) return r();
          s.onTransportClosed(() => r());
          s.close(graceMs);
        }),
    );
    await Promise.all(gone);
    rmSync(this.o.socketPath, { force: true });
  }

  /** A new connection: its peer checked before any byte is read; its session's transport, or undefined when refused. */
  private onConnection(sock: Bun.Socket<BunTransport | undefined>): BunTransport | undefined {
    const d = this.o.authorizer.checkFd(bunSocketFd(sock));
    if (!d.allowed) {
      this.o.onRejected();
      const who = d.cred ? `pid=${d.cred.pid} uid=${d.cred.uid}` : "unknown peer";
      this.o.log.warn(
        `rejected connection on ${this.o.socketPath} from ${who}: ${d.reason}`,
        ids({ path: this.o.socketPath, ...(d.cred ? { pid: d.cred.pid } : {}) }),
      );
      sock.end();
      return undefined;
    }
    const transport = new BunTransport(sock);
    const ka = this.o.keepalive ?? { intervalMs: 30_000, timeoutMs: 10_000 };
    const session: H2Session = new H2Session(transport, {
      role: "server",
      maxConcurrentStreams: this.o.maxConcurrentStreams ?? 100_000,
      keepalive: ka.intervalMs > 0 ? ka : undefined,
      pingPolicy: { minIntervalMs: this.o.minPingIntervalMs ?? 15_000, maxStrikes: 2 },
      resetBudget: this.o.resetBudget ?? DEFAULT_RESET_BUDGET,
      onStream: (stream, headers) => this.onStream(stream, headers),
      onClose: (err) => {
        this.sessions.delete(session);
        if (err?.code === H2Code.ENHANCE_YOUR_CALM) this.o.log.warn(`downstream connection closed: ${err.message}`);
        else if (err) this.o.log.debug(`downstream connection closed: ${err.message}`);
      },
    });
    this.sessions.add(session);
    return transport;
  }

  /** Server reflection: each request answered in order; the index is built on first use. */
  private serveReflection(stream: H2Stream): void {
    stream.respond(RESPONSE_HEADERS);
    let answered: Promise<unknown> = Promise.resolve();
    let msg: MessageBuffer | undefined;
    const fail = (message: string) => {
      this.o.log.warn(`reflection: ${message}`);
      stream.end(statusTrailers({ code: Code.INVALID_ARGUMENT, message }));
    };
    const deframer = new GrpcDeframer({
      onHeader: (compressed, length) => {
        if (compressed || length > REFLECTION_MAX_REQUEST) throw new Error(compressed ? "compressed request" : `request of ${length} bytes`);
        msg = new MessageBuffer(length);
      },
      onBody: (b) => msg!.append(b),
      onEnd: () => {
        const bytes = Buffer.from(msg!.view());
        answered = answered.then(async () => {
          this.reflection ??= import("./reflection.ts").then((m) => m.reflectionIndex());
          const index = await this.reflection;
          if (!stream.closed && !stream.localEnded) stream.write(grpcFrame(index.answer(bytes)));
        });
        answered.catch((e: unknown) => fail(`malformed ServerReflectionRequest: ${errorMessage(e)}`));
      },
    });
    stream.handlers = {
      onData: (c) => {
        try {
          deframer.push(c);
        } catch (e) {
          fail(`malformed ServerReflectionRequest: ${errorMessage(e)}`);
        }
      },
      onEnd: () =>
        void answered.then(
          () => stream.end(statusTrailers({ code: Code.OK, message: "" })),
          () => {},
        ),
    };
  }

  private onStream(stream: H2Stream, headers: HeaderList): void {
    const path = headerValue(headers, ":path") ?? "";
    const ct = headerValue(headers, "content-type") ?? "";
    if (headerValue(headers, ":method") !== "POST" || !ct.startsWith("application/grpc")) {
      stream.respond([[":status", ct.startsWith("application/grpc") ? "405" : "415"]], true);
      return;
    }
    const trailersOnly = (s: GrpcStatus) => stream.respond([...RESPONSE_HEADERS, ...statusTrailers(s)], true);
    const enc = headerValue(headers, "grpc-encoding");
    if (enc !== undefined && enc !== "identity") return trailersOnly({ code: Code.UNIMPLEMENTED, message: `grpc-encoding ${enc} is not supported` });
    if (REFLECTION_PATHS.has(path)) return this.serveReflection(stream);
    if (path !== SOTW_PATH && path !== DELTA_PATH) return trailersOnly({ code: Code.UNIMPLEMENTED, message: `unknown method ${path}` });
    const call = new ServerCall(stream, path, path === DELTA_PATH);
    const h = this.o.onCall(call);
    let gone = false;
    const goneOnce = (ended: boolean) => {
      if (gone) return;
      gone = true;
      h.onClientGone(ended);
    };
    stream.handlers = {
      ...stream.handlers,
      onData: (c) => h.onData(c),
      onDrain: () => h.onDrain(),
      onEnd: () => goneOnce(true),
      onReset: () => goneOnce(false),
    };
  }
}
