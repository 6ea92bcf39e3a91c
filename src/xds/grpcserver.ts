// An h2c gRPC server on a Unix socket, the agent's own (no grpc-js): the XDS socket where Envoy
// opens ADS streams (downstream.ts) and the SDS socket (src/sds/server.ts) both run on it.
// Every accepted connection is checked with SO_PEERCRED before any HTTP/2 byte is read; a refused
// peer is closed and handed to the owner to log and count. An allowed one gets an H2Session with
// the flood protections of both sockets: SETTINGS_MAX_CONCURRENT_STREAMS enforced (REFUSED_STREAM
// past it, at most MAX_STREAMS_PER_CONNECTION), a budget of stream resets (rapid reset: GOAWAY
// ENHANCE_YOUR_CALM), gRPC's ping enforcement, a bounded header list, and the session's counted
// caps on CONTINUATION and empty frames and on output queued for a peer that does not read. A
// connection closed for abuse is logged (rate-limited) naming the peer and the limit. Streams are checked as gRPC requests (POST,
// application/grpc, identity encoding) and routed by `:path`; an unknown path is answered
// UNIMPLEMENTED. The socket is one of Bun's own (`Bun.listen`): it writes straight to the kernel
// and reports how much it took, so the session's writer reuses one output buffer (docs/xds.md).
// It can listen on a loopback TCP port instead (listenTcp, no peer check): local mode's ADS server.

import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "../lib/log.ts";
import type { PeerAuthorizer, PeerDecision } from "../lib/peerauth.ts";
import { errorMessage } from "../lib/errors.ts";
import { DEFAULT_LOG_LIMIT, LogLimiter } from "../lib/loglimit.ts";
import { bunSocketFd, peerCredentials } from "../../native/peercred.ts";
import { H2Code } from "./h2/frames.ts";
import { headerValue, type HeaderList } from "./h2/hpack.ts";
import { DEFAULT_RESET_BUDGET, type RateBudgetOptions } from "./h2/ratebudget.ts";
import { H2Session, type H2Stream } from "./h2/session.ts";
import { BunTransport } from "./h2/transport.ts";
import { respondTrailersOnly } from "./grpccall.ts";
import { Code } from "./types.ts";
import { MAX_STREAMS_PER_CONNECTION } from "../config/env.ts";

export { MAX_STREAMS_PER_CONNECTION };

/** Serves one call: the stream's response headers are the handler's to send. */
export type GrpcMethod = (stream: H2Stream, path: string) => void;

export interface UnixGrpcServerOptions {
  socketPath: string;
  authorizer: PeerAuthorizer;
  log: Logger;
  /** What the connection log lines call this server ("downstream", "SDS"). */
  name: string;
  /** The handler for a `:path`, or undefined: the call is answered UNIMPLEMENTED. */
  route(path: string): GrpcMethod | undefined;
  /** The grpc-message of that UNIMPLEMENTED answer. */
  unknownMethodMessage(path: string): string;
  /** A peer refused before any byte was read (the connection is already being closed). */
  onRejected(d: PeerDecision & { allowed: false }): void;
  /** The error thrown by listen() when the socket cannot be prepared or bound. */
  listenError(message: string, cause: unknown): Error;
  /** SETTINGS_MAX_CONCURRENT_STREAMS (default 100,000, Istio's). */
  maxConcurrentStreams?: number;
  /** Our receive window per stream (default the session's, 1 MiB). */
  streamWindow?: number;
  /** Server keepalive pings; none when unset. */
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** Streams a connection may reset (rapid-reset protection; default nghttp2's 1000 burst, 33/s). */
  resetBudget?: RateBudgetOptions;
  /** Keepalive enforcement: client pings closer than this are strikes (default 15 s, 2 strikes allowed). */
  minPingIntervalMs?: number;
  /** The socket file's mode (default 0666). */
  socketMode?: number;
  /** Clock for the rate limit of the abuse log lines (milliseconds); performance.now when omitted. */
  now?: () => number;
}

export class UnixGrpcServer {
  private listener: Bun.UnixSocketListener<BunTransport | undefined> | Bun.TCPSocketListener<BunTransport | undefined> | undefined;
  /** Listening on TCP (listenTcp): there is no socket file to remove. */
  private tcp = false;
  private readonly sessions = new Set<H2Session>();
  private readonly logLimit: LogLimiter;

  constructor(private readonly o: UnixGrpcServerOptions) {
    this.logLimit = new LogLimiter({ ...DEFAULT_LOG_LIMIT, now: o.now ?? (() => performance.now()) });
  }

  /** Bun's socket callbacks, the same for the Unix and the TCP listener: each connection's transport gets its events. */
  private readonly socketHandlers: Bun.SocketHandler<BunTransport | undefined> = {
    open: (sock) => {
      sock.data = this.onConnection(sock);
    },
    data: (sock, chunk) => sock.data?.onData(chunk),
    drain: (sock) => sock.data?.onDrain(),
    end: (sock) => sock.data?.onEnd(),
    error: (sock, e) => sock.data?.onError(e),
    close: (sock, e) => sock.data?.onClose(e),
  };

  /** Bind the socket: stale file removed, directory created (0750), socket mode 0666. */
  listen(): void {
    const p = this.o.socketPath;
    try {
      mkdirSync(dirname(p), { recursive: true, mode: 0o750 });
      rmSync(p, { force: true });
    } catch (e) {
      throw this.o.listenError(`preparing socket ${p}: ${errorMessage(e)}`, e);
    }
    try {
      this.listener = Bun.listen<BunTransport | undefined>({
        unix: p,
        socket: this.socketHandlers,
      });
    } catch (e) {
      throw this.o.listenError(`listening on ${p}: ${errorMessage(e)}`, e);
    }
    chmodSync(p, this.o.socketMode ?? 0o666);
  }

  /**
   * Bind a TCP address instead of the Unix socket (local mode's ADS server on loopback; `port` 0:
   * any free one); returns the port bound. SO_PEERCRED means nothing on TCP: give this server an
   * authorizer that allows any peer. `socketPath` is unused.
   */
  listenTcp(host: string, port: number): number {
    try {
      const listener = Bun.listen<BunTransport | undefined>({
        hostname: host,
        port,
        socket: this.socketHandlers,
      });
      this.listener = listener;
      this.tcp = true;
      return listener.port;
    } catch (e) {
      throw this.o.listenError(`listening on ${host.includes(":") ? `[${host}]` : host}:${port}: ${errorMessage(e)}`, e);
    }
  }

  /** Open connections. */
  get connections(): number {
    return this.sessions.size;
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
    if (!this.tcp) rmSync(this.o.socketPath, { force: true });
  }

  /** A new connection: its peer checked before any byte is read; its session's transport, or undefined when refused. */
  private onConnection(sock: Bun.Socket<BunTransport | undefined>): BunTransport | undefined {
    const fd = bunSocketFd(sock);
    const d = this.o.authorizer.checkFd(fd);
    if (!d.allowed) {
      this.o.onRejected(d);
      sock.end();
      return undefined;
    }
    // Who the peer is, for the log line should it be closed for abuse (with XDS_AUTHORIZED_UIDS=*,
    // as in proxyless mode, the authorizer does not read it).
    const cred = d.cred ?? (this.tcp || fd === undefined ? undefined : peerCredentials(fd));
    const transport = new BunTransport(sock);
    const ka = this.o.keepalive;
    const session: H2Session = new H2Session(transport, {
      role: "server",
      maxConcurrentStreams: Math.min(this.o.maxConcurrentStreams ?? 100_000, MAX_STREAMS_PER_CONNECTION),
      ...(this.o.streamWindow !== undefined ? { streamWindow: this.o.streamWindow } : {}),
      keepalive: ka && ka.intervalMs > 0 ? ka : undefined,
      pingPolicy: { minIntervalMs: this.o.minPingIntervalMs ?? 15_000, maxStrikes: 2 },
      resetBudget: this.o.resetBudget ?? DEFAULT_RESET_BUDGET,
      onStream: (stream, headers) => this.onStream(stream, headers),
      onClose: (err) => {
        this.sessions.delete(session);
        if (err?.code === H2Code.ENHANCE_YOUR_CALM) {
          const who = cred ? `pid=${cred.pid} uid=${cred.uid}` : this.tcp ? "a loopback TCP peer" : "an unknown peer";
          this.logLimit.log(this.o.log, "warn", "abuse", `${this.o.name} connection from ${who} closed (GOAWAY ENHANCE_YOUR_CALM): ${err.message}`);
        } else if (err) this.o.log.debug(`${this.o.name} connection closed: ${err.message}`);
      },
    });
    this.sessions.add(session);
    return transport;
  }

  private onStream(stream: H2Stream, headers: HeaderList): void {
    const path = headerValue(headers, ":path") ?? "";
    const ct = headerValue(headers, "content-type") ?? "";
    if (headerValue(headers, ":method") !== "POST" || !ct.startsWith("application/grpc")) {
      stream.respond([[":status", ct.startsWith("application/grpc") ? "405" : "415"]], true);
      return;
    }
    const enc = headerValue(headers, "grpc-encoding");
    if (enc !== undefined && enc !== "identity")
      return respondTrailersOnly(stream, { code: Code.UNIMPLEMENTED, message: `grpc-encoding ${enc} is not supported` });
    const method = this.o.route(path);
    if (!method) return respondTrailersOnly(stream, { code: Code.UNIMPLEMENTED, message: this.o.unknownMethodMessage(path) });
    method(stream, path);
  }
}
