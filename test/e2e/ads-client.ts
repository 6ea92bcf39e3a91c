// A raw ADS client on the agent's XDS Unix socket, as Envoy talks to it: HTTP/2 + gRPC framing
// done here (not by grpc-js, which would hide a truncated message behind a synthesized status),
// every response decoded with Envoy's own protos and checked (see big-config.ts), every response
// ACKed. It reports how the stream ended: the grpc-status the agent sent (trailers or
// trailers-only), or none, and how many bytes of an unfinished message were pending.

import http2 from "node:http2";
import net from "node:net";
import { decodeDiscoveryResponse, encodeDiscoveryRequest } from "./envoy-resources.ts";
import { checkResources } from "./big-config.ts";

export const SOTW_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
export const E2E_NODE_ID = "sidecar~127.0.0.1~greeter-client-0.demo~demo.svc.cluster.local";

export interface ReceivedResponse {
  typeUrl: string;
  version: string;
  resources: number;
  /** gRPC message length. */
  bytes: number;
  /** big-config generation carried by the resources, if any. */
  gen?: number;
  /** What was wrong with it (undecodable, inconsistent, corrupted); undefined = whole and valid. */
  problem?: string;
  /** Local receive time (ms since epoch). */
  t: number;
}

export interface StreamEnd {
  /** grpc-status sent by the agent (trailers, or headers of a trailers-only response). */
  status?: number;
  message?: string;
  /** Bytes of a message whose header arrived but whose body did not complete before the end. */
  partialBytes: number;
  /** Declared length of that unfinished message. */
  partialOf: number;
  /** Transport error, if the stream ended with one (e.g. the connection was reset). */
  error?: string;
}

export class AdsClient {
  readonly received: ReceivedResponse[] = [];
  readonly ended: Promise<StreamEnd>;
  private readonly session: http2.ClientHttp2Session;
  private readonly req: http2.ClientHttp2Stream;
  private buf: Buffer = Buffer.alloc(0);
  private status?: number;
  private message?: string;
  private error?: string;
  private firstRequest = true;

  /**
   * `readDelayMs`: after each message stop reading that long, as a busy Envoy applying config
   * would (HTTP/2 flow control then backs up into the agent's relay).
   */
  constructor(
    socketPath: string,
    private readonly onResponse: (r: ReceivedResponse) => void = () => {},
    private readonly readDelayMs = 0,
  ) {
    this.session = http2.connect("http://localhost", { createConnection: () => net.connect(socketPath) });
    this.session.on("error", (e) => (this.error ??= e.message));
    this.req = this.session.request({ ":method": "POST", ":path": SOTW_PATH, "content-type": "application/grpc", te: "trailers" });
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) {
        this.status = Number(h["grpc-status"]);
        this.message = h["grpc-message"] === undefined ? "" : decodeURIComponent(String(h["grpc-message"]));
      }
    };
    this.req.on("response", take);
    this.req.on("trailers", take);
    this.req.on("data", (c: Buffer) => this.onData(c));
    this.req.on("error", (e) => (this.error ??= e.message));
    this.ended = new Promise((resolve) =>
      this.req.on("close", () => {
        const partialOf = this.buf.length >= 5 ? this.buf.readUInt32BE(1) : 0;
        resolve({ status: this.status, message: this.message, partialBytes: this.buf.length, partialOf, error: this.error });
        this.session.close();
      }),
    );
  }

  /** A SotW request (first one carries the node, as Envoy's). */
  request(typeUrl: string, opts: { names?: string[]; version?: string; nonce?: string } = {}): void {
    const msg = encodeDiscoveryRequest({
      type_url: typeUrl,
      version_info: opts.version ?? "",
      response_nonce: opts.nonce ?? "",
      resource_names: opts.names ?? [],
      ...(this.firstRequest ? { node: { id: E2E_NODE_ID, cluster: "greeter-client.demo" } } : {}),
    });
    this.firstRequest = false;
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt32BE(msg.length, 1);
    frame.set(msg, 5);
    if (!this.req.closed && !this.req.destroyed) this.req.write(frame);
  }

  close(): void {
    if (!this.req.closed) this.req.close(http2.constants.NGHTTP2_CANCEL);
    this.session.close();
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    while (this.buf.length >= 5) {
      const len = this.buf.readUInt32BE(1);
      if (this.buf.length < 5 + len) return;
      const compressed = this.buf[0] !== 0;
      const body = this.buf.subarray(5, 5 + len);
      this.buf = this.buf.subarray(5 + len);
      this.onMessage(body, compressed);
      if (this.readDelayMs > 0) {
        this.req.pause();
        setTimeout(() => this.req.resume(), this.readDelayMs);
      }
    }
  }

  private onMessage(body: Buffer, compressed: boolean): void {
    const r: ReceivedResponse = { typeUrl: "", version: "", resources: 0, bytes: body.length, t: Date.now() };
    let nonce = "";
    try {
      if (compressed) throw new Error("compressed flag set (identity encoding was asked)");
      const res = decodeDiscoveryResponse(body);
      Object.assign(r, { typeUrl: res.typeUrl, version: res.versionInfo, resources: res.resources.length });
      nonce = res.nonce;
      const check = checkResources(res.typeUrl, res.resources);
      r.gen = check.gen;
      r.problem = check.problem;
    } catch (e) {
      r.problem = `undecodable DiscoveryResponse of ${body.length} bytes: ${(e as Error).message}`;
    }
    this.received.push(r);
    this.onResponse(r);
    // ACK, as Envoy does (a broken response is recorded above; the test fails on it).
    if (r.typeUrl) this.request(r.typeUrl, { version: r.version, nonce });
  }
}
