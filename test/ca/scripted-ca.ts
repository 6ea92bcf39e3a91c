// A CA endpoint for the CA client's wire tests, on node:http2 (an HTTP/2 implementation
// independent of the agent's): each request is recorded (headers, body, whether the client reset
// it) and answered by a script the test sets, so it can send what a real CA rarely does —
// trailers-only errors, non-gRPC HTTP answers, oversize or malformed messages, nothing at all —
// and be stopped and restarted on the same port.

import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { caCodec } from "../../src/ca/proto.ts";

export interface ScriptedRequest {
  headers: Record<string, string>;
  body: Buffer;
  /** Which connection it came on (1 = the CA's first). */
  session: number;
  /** The client reset the stream (RST_STREAM) before it was answered; its code. */
  resetCode?: number;
}

export type Answer = (stream: http2.ServerHttp2Stream, req: ScriptedRequest) => void;

/** gRPC's 5-byte prefix and `message`. */
export function frame(message: Uint8Array, compressed = false): Buffer {
  const b = Buffer.alloc(5 + message.length);
  b[0] = compressed ? 1 : 0;
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
}

/** An IstioCertificateResponse of `chain`, encoded by protobufjs. */
export function certResponse(chain: string[]): Buffer {
  return caCodec().encodeResponse({ certChain: chain });
}

/** 200, the message, then trailers with `status` (and `message`, sent as given: already encoded). */
export function reply(body: Buffer, status = "0", message?: string): Answer {
  return (stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": status, ...(message !== undefined ? { "grpc-message": message } : {}) }));
    stream.end(body);
  };
}

/** A trailers-only response: one HEADERS frame with END_STREAM carrying the status. */
export function trailersOnly(status: string, message?: string): Answer {
  return (stream) =>
    stream.respond(
      { ":status": 200, "content-type": "application/grpc", "grpc-status": status, ...(message !== undefined ? { "grpc-message": message } : {}) },
      { endStream: true },
    );
}

export class ScriptedCa {
  readonly requests: ScriptedRequest[] = [];
  /** Connections accepted so far. */
  sessions = 0;
  /** Connections that have closed. */
  closedSessions = 0;
  /** The numbers of the connections that have closed. */
  readonly closed = new Set<number>();
  answer: Answer = () => {};
  private server: http2.Http2Server | http2.Http2SecureServer;
  private readonly live = new Set<http2.ServerHttp2Session>();

  private constructor(
    private readonly tls: { key: string; cert: string } | undefined,
    public port: number,
    private readonly settings: http2.Settings,
  ) {
    this.server = this.make();
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  static async start(tls?: { key: string; cert: string }, port = 0, settings: http2.Settings = {}): Promise<ScriptedCa> {
    const ca = new ScriptedCa(tls, port, settings);
    await ca.listen();
    return ca;
  }

  private make(): http2.Http2Server | http2.Http2SecureServer {
    const server = this.tls
      ? http2.createSecureServer({ key: this.tls.key, cert: this.tls.cert, settings: this.settings })
      : http2.createServer({ settings: this.settings });
    const ids = new WeakMap<http2.ServerHttp2Session, number>();
    server.on("session", (s) => {
      const id = ++this.sessions;
      ids.set(s, id);
      this.live.add(s);
      s.on("close", () => {
        this.live.delete(s);
        this.closedSessions++;
        this.closed.add(id);
      });
    });
    server.on("stream", (st, headers) => {
      const stream = st as http2.ServerHttp2Stream;
      const req: ScriptedRequest = { headers: {}, body: Buffer.alloc(0), session: ids.get(stream.session as http2.ServerHttp2Session) ?? 0 };
      for (const [k, v] of Object.entries(headers)) if (typeof v === "string") req.headers[k] = v;
      const parts: Buffer[] = [];
      stream.on("data", (c: Buffer) => parts.push(c));
      stream.on("close", () => {
        if (stream.rstCode !== 0 && !stream.headersSent) req.resetCode = stream.rstCode;
      });
      stream.on("error", () => {});
      stream.on("end", () => {
        req.body = Buffer.concat(parts);
        this.requests.push(req);
        this.answer(stream, req);
      });
    });
    return server;
  }

  private listen(): Promise<void> {
    return new Promise((resolve) =>
      this.server.listen(this.port, "127.0.0.1", () => {
        this.port = (this.server.address() as AddressInfo).port;
        resolve();
      }),
    );
  }

  /** Sends GOAWAY on every open connection. */
  goaway(): void {
    for (const s of this.live) s.goaway();
  }

  /** Resolves once every open connection has answered a PING sent now: what was sent before has reached the client. */
  async pingAll(): Promise<void> {
    await Promise.all([...this.live].map((s) => new Promise<void>((resolve, reject) => s.ping((err) => (err ? reject(err) : resolve())))));
  }

  /** Stops listening and destroys every connection (a CA that went down). */
  async stop(): Promise<void> {
    for (const s of this.live) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Listens again on the same port (a CA that came back). */
  async restart(): Promise<void> {
    this.server = this.make();
    await this.listen();
  }
}
