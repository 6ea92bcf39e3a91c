// The downstream side: an h2c gRPC server on the Unix socket `<ConfigPath>/XDS` where Envoy (or a
// proxyless gRPC client) opens ADS streams. Connections are checked with SO_PEERCRED before any
// HTTP/2 byte is read; rejected peers are closed, logged with pid/uid and counted. Streams are
// handed to the proxy as `DownstreamCall`s that carry gRPC-framed bytes and end with a status.
// The listener, the peer check, the HTTP/2 sessions and the routing are grpcserver.ts's (the SDS
// socket runs on the same); this file is the ADS and reflection methods.
import type { Logger } from "../lib/log.ts";
import { refusalLog, type PeerAuthorizer } from "../lib/peerauth.ts";
import { FailureReport } from "../lib/component.ts";
import { XdsError } from "./errors.ts";
import type { H2Stream } from "./h2/session.ts";
import type { RateBudgetOptions } from "./h2/ratebudget.ts";
import { GrpcDeframer, MessageBuffer, grpcFrame } from "./grpcframe.ts";
import { GRPC_RESPONSE_HEADERS, GrpcServerCall, statusTrailers } from "./grpccall.ts";
import { UnixGrpcServer } from "./grpcserver.ts";
import type { ReflectionIndex } from "./reflection.ts";
import { Code, DELTA_PATH, REFLECTION_PATHS, SOTW_PATH, type GrpcStatus } from "./types.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export { encodeGrpcMessage, statusTrailers } from "./grpccall.ts";

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
  /** Bytes written so far, counted from the first (absent: not counted). */
  readonly written?: number;
  /** Of those, how many from the first nothing references any more: handed to a socket that copies them, or dropped. */
  releasedBytes?(): number;
}

export interface DownstreamHandlers {
  onData(chunk: Uint8Array): void;
  onDrain(): void;
  /** The client half-closed (`ended`) or went away (reset / connection loss). */
  onClientGone(ended: boolean): void;
}

class ServerCall extends GrpcServerCall implements DownstreamCall {
  constructor(
    stream: H2Stream,
    path: string,
    readonly delta: boolean,
  ) {
    super(stream, path);
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
  private readonly server: UnixGrpcServer;
  /**
   * A failure after start. Bun's listener surfaces no accept(2) errors (node:net's did, as an
   * `error` event): kept so the component's contract (and the root's reaction) stays one place.
   */
  private readonly failure = new FailureReport();
  /** The listener died after start. */
  readonly failed = this.failure.failed;

  constructor(private readonly o: DownstreamServerOptions) {
    const refused = refusalLog(o.log);
    this.server = new UnixGrpcServer({
      socketPath: o.socketPath,
      authorizer: o.authorizer,
      log: o.log,
      name: "downstream",
      route: (path) =>
        REFLECTION_PATHS.has(path)
          ? (stream) => this.serveReflection(stream)
          : path === SOTW_PATH || path === DELTA_PATH
            ? (stream) => this.serveAds(stream, path)
            : undefined,
      unknownMethodMessage: (path) => `unknown method ${path}`,
      onRejected: (d) => {
        o.onRejected();
        const who = d.cred ? `pid=${d.cred.pid} uid=${d.cred.uid}` : "unknown peer";
        refused(`rejected connection on ${o.socketPath} from ${who}: ${d.reason}`, ids({ path: o.socketPath, ...(d.cred ? { pid: d.cred.pid } : {}) }));
      },
      listenError: (message, cause) => new XdsError("downstream", message, { cause }),
      ...(o.maxConcurrentStreams !== undefined ? { maxConcurrentStreams: o.maxConcurrentStreams } : {}),
      keepalive: o.keepalive ?? { intervalMs: 30_000, timeoutMs: 10_000 },
      ...(o.resetBudget ? { resetBudget: o.resetBudget } : {}),
      ...(o.minPingIntervalMs !== undefined ? { minPingIntervalMs: o.minPingIntervalMs } : {}),
    });
  }

  async listen(): Promise<void> {
    this.server.listen();
  }

  /**
   * Stop accepting; send GOAWAY on every connection and let what is queued (the last messages,
   * the trailers) reach the clients, up to `graceMs`; then close what is left.
   */
  async close(graceMs = 0): Promise<void> {
    await this.server.close(graceMs);
  }

  /** Server reflection: each request answered in order; the index is built on first use. */
  private serveReflection(stream: H2Stream): void {
    stream.respond(GRPC_RESPONSE_HEADERS);
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

  /** An ADS stream (SotW or Delta): handed to the proxy as a DownstreamCall. */
  private serveAds(stream: H2Stream, path: string): void {
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
