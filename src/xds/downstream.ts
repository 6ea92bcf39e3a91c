// The downstream side: an h2c gRPC server on the Unix socket `<ConfigPath>/XDS` where Envoy (or a
// proxyless gRPC client) opens ADS streams. Connections are checked with SO_PEERCRED before any
// HTTP/2 byte is read; rejected peers are closed, logged with pid/uid and counted. Streams are
// handed to the proxy as `DownstreamCall`s that carry gRPC-framed bytes and end with a status.

import http2 from "node:http2";
import net from "node:net";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "../lib/log.ts";
import type { PeerAuthorizer } from "../lib/peerauth.ts";
import { XdsError } from "./errors.ts";
import { Code, DELTA_PATH, SOTW_PATH, type GrpcStatus } from "./types.ts";

export interface DownstreamCall {
  readonly delta: boolean;
  readonly path: string;
  /** Send gRPC-framed response bytes; false = wait for onDrain. */
  write(bytes: Uint8Array): boolean;
  pause(): void;
  resume(): void;
  /** End the call with a gRPC status (trailers). Idempotent. */
  finish(status: GrpcStatus): void;
  readonly finished: boolean;
}

export interface DownstreamHandlers {
  onData(chunk: Buffer): void;
  onDrain(): void;
  /** The client half-closed (`ended`) or went away (reset / connection loss). */
  onClientGone(ended: boolean): void;
}

/** A gRPC message for `grpc-message`: percent-encode what HTTP/2 headers may not carry. */
export function encodeGrpcMessage(m: string): string {
  return m.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

class ServerCall implements DownstreamCall {
  finished = false;
  private trailers: http2.OutgoingHttpHeaders = { "grpc-status": "0" };

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    readonly path: string,
    readonly delta: boolean,
  ) {
    stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-accept-encoding": "identity" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => {
      try {
        stream.sendTrailers(this.trailers);
      } catch {}
    });
  }

  write(bytes: Uint8Array): boolean {
    if (this.finished || this.stream.destroyed) return true;
    return this.stream.write(bytes);
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
    this.trailers = { "grpc-status": String(s.code) };
    if (s.message) this.trailers["grpc-message"] = encodeGrpcMessage(s.message);
    if (this.stream.destroyed || this.stream.closed) return;
    try {
      this.stream.end();
    } catch {}
    // A client that stops reading must not pin the stream forever once it is finished.
    const t = setTimeout(() => {
      if (!this.stream.destroyed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
    }, 10_000);
    t.unref?.();
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
}

export class DownstreamServer {
  private readonly h2: http2.Http2Server;
  private readonly net: net.Server;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly o: DownstreamServerOptions) {
    this.h2 = http2.createServer({ settings: { maxConcurrentStreams: o.maxConcurrentStreams ?? 100000 } });
    this.h2.on("stream", (stream, headers) => this.onStream(stream as http2.ServerHttp2Stream, headers));
    this.h2.on("sessionError", () => {});
    this.net = net.createServer((sock) => this.onConnection(sock));
  }

  async listen(): Promise<void> {
    const p = this.o.socketPath;
    try {
      mkdirSync(dirname(p), { recursive: true, mode: 0o750 });
      rmSync(p, { force: true });
    } catch (e) {
      throw new XdsError("downstream", `preparing socket ${p}: ${(e as Error).message}`);
    }
    await new Promise<void>((resolve, reject) => {
      this.net.once("error", (e) => reject(new XdsError("downstream", `listening on ${p}: ${e.message}`)));
      this.net.listen(p, () => resolve());
    });
    chmodSync(p, 0o666);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.net.close(() => r()));
    this.h2.close();
    rmSync(this.o.socketPath, { force: true });
  }

  private onConnection(sock: net.Socket): void {
    const d = this.o.authorizer.check(sock);
    if (!d.allowed) {
      this.o.onRejected();
      const who = d.cred ? `pid=${d.cred.pid} uid=${d.cred.uid}` : "unknown peer";
      this.o.log.warn(`rejected connection on ${this.o.socketPath} from ${who}: ${d.reason}`);
      sock.destroy();
      return;
    }
    this.sockets.add(sock);
    sock.on("close", () => this.sockets.delete(sock));
    this.h2.emit("connection", sock);
  }

  private onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const path = String(headers[":path"] ?? "");
    const ct = String(headers["content-type"] ?? "");
    stream.on("error", () => {});
    if (!ct.startsWith("application/grpc")) {
      stream.respond({ ":status": 415 }, { endStream: true });
      return;
    }
    if (path !== SOTW_PATH && path !== DELTA_PATH) {
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": String(Code.UNIMPLEMENTED), "grpc-message": encodeGrpcMessage(`unknown method ${path}`) }, { endStream: true });
      return;
    }
    const enc = headers["grpc-encoding"];
    if (enc !== undefined && enc !== "identity") {
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": String(Code.UNIMPLEMENTED), "grpc-message": encodeGrpcMessage(`grpc-encoding ${enc} is not supported`) }, { endStream: true });
      return;
    }
    const call = new ServerCall(stream, path, path === DELTA_PATH);
    const h = this.o.onCall(call);
    let gone = false;
    const goneOnce = (ended: boolean) => {
      if (gone) return;
      gone = true;
      h.onClientGone(ended);
    };
    stream.on("data", (c: Buffer) => h.onData(c));
    stream.on("drain", () => h.onDrain());
    stream.on("end", () => goneOnce(true));
    stream.on("close", () => goneOnce(false));
    stream.on("aborted", () => goneOnce(false));
  }
}
