// An SDS client that behaves as Envoy does on one secret: it opens StreamSecrets on the agent's
// workload socket, asks for the named resources (with the Node in the stream's first request),
// ACKs every response with its version and nonce (asking for the same names again), and reopens
// the stream after it ends. Every secret received is kept with the time it arrived, so a test can
// ask "did a push with this certificate arrive?". Works against either agent (ours or Istio's
// pilot-agent): plain h2c gRPC over the Unix socket. The Envoy stand-in opens its SDS streams
// with it too.

import http2 from "node:http2";
import net from "node:net";
import { decodeDiscoveryResponse, decodeSecret, encodeDiscoveryRequest } from "../../e2e/envoy-resources.ts";

export const SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
const PATH = "/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets";

export interface ReceivedSecret {
  at: number;
  name: string;
  certificateChain: string;
  privateKey: string;
}

export interface SdsWatch {
  secrets: ReceivedSecret[];
  /** How each stream ended (grpc-status and message), in order. */
  ends: string[];
  close(): void;
}

export interface SdsWatchOptions {
  /** The Node of each stream's first request (Envoy's: id, cluster, metadata ...). */
  node?: Record<string, unknown>;
  /** Each response's secrets (none for an empty response), as it arrives, before its ACK. */
  onResponse?: (secrets: ReceivedSecret[]) => void;
  /** A response that could not be decoded (it is not ACKed). */
  onError?: (message: string) => void;
  /** The wait before a stream that ended is opened again. */
  reopenMs?: number;
}

export function watchSecrets(socket: string, names: string[], o: SdsWatchOptions = {}): SdsWatch {
  const w: SdsWatch = { secrets: [], ends: [], close: () => {} };
  const node = o.node ?? { id: "sidecar~127.0.0.1~sds-watch.ns~ns.svc.cluster.local" };
  let closed = false;
  let session: http2.ClientHttp2Session | undefined;
  const open = () => {
    if (closed) return;
    const s = http2.connect("http://localhost", { createConnection: () => net.connect(socket) });
    session = s;
    s.on("error", () => {});
    const stream = s.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers" });
    const send = (obj: Record<string, unknown>) => {
      const msg = encodeDiscoveryRequest({ type_url: SECRET_TYPE, resource_names: names, ...obj });
      const frame = Buffer.alloc(5 + msg.length);
      frame.writeUInt32BE(msg.length, 1);
      frame.set(msg, 5);
      if (!stream.closed && !stream.destroyed) stream.write(frame);
    };
    let buf: Buffer = Buffer.alloc(0);
    stream.on("data", (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
        const body = buf.subarray(5, 5 + buf.readUInt32BE(1));
        buf = buf.subarray(5 + body.length);
        let res: ReturnType<typeof decodeDiscoveryResponse>;
        let got: ReceivedSecret[];
        try {
          res = decodeDiscoveryResponse(body);
          got = res.resources.map((r) => ({ at: Date.now(), ...decodeSecret(r.value) }));
        } catch (e) {
          if (!o.onError) throw e;
          o.onError(`undecodable SDS response: ${(e as Error).message}`);
          continue;
        }
        w.secrets.push(...got);
        o.onResponse?.(got);
        send({ version_info: res.versionInfo, response_nonce: res.nonce });
      }
    });
    let trailers = "";
    stream.on("trailers", (t) => (trailers = `${t["grpc-status"] ?? "?"} ${t["grpc-message"] ?? ""}`.trim()));
    stream.on("error", () => {});
    stream.on("close", () => {
      w.ends.push(trailers || "closed");
      s.close();
      // As Envoy: a new stream after a short backoff.
      if (!closed) setTimeout(open, o.reopenMs ?? 500);
    });
    send({ node });
  };
  open();
  w.close = () => {
    closed = true;
    session?.destroy();
  };
  return w;
}
