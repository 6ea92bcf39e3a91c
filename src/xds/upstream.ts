// The upstream side of the relay. `Upstream` is the seam: the relay only asks it to open a stream
// and exchanges gRPC-framed bytes with it, so a later local (file-backed, LOCAL_XDS_PATH) source
// can plug in without touching the relay. `IstiodUpstream` dials istiod with node:http2: one fresh
// connection per downstream stream (Istio's behaviour), TLS with ALPN h2 unless plaintext,
// bearer token and headers as gRPC metadata, HTTP/2 keepalive pings.

import http2 from "node:http2";
import { isIP } from "node:net";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import { readFileSync, existsSync } from "node:fs";
import { Code, type GrpcStatus } from "./types.ts";
import { loadTlsMaterial, upstreamMetadata, type FileReader, type UpstreamDialConfig } from "./upstream-config.ts";

export interface StreamMeta {
  /** `/envoy.service.discovery.v3.AggregatedDiscoveryService/<method>` */
  path: string;
  delta: boolean;
}

export interface UpstreamHandlers {
  /** The upstream accepted the stream (response headers arrived). */
  onConnected(): void;
  /** gRPC-framed response bytes, in order. */
  onData(chunk: Buffer): void;
  /** A write that returned false may continue. */
  onDrain(): void;
  /** The stream ended, once. `established` = it got as far as onConnected. */
  onClose(status: GrpcStatus, established: boolean): void;
}

export interface UpstreamStream {
  /** Send gRPC-framed request bytes; false = wait for onDrain before writing more. */
  write(bytes: Uint8Array): boolean;
  pause(): void;
  resume(): void;
  /** Cancel the stream and release its connection; onClose still fires (CANCELLED). */
  close(): void;
}

export interface Upstream {
  /** For logs: where streams go (`istiod.istio-system.svc:15012`). */
  readonly describe: string;
  open(meta: StreamMeta, handlers: UpstreamHandlers): UpstreamStream;
}

export const nodeFiles: FileReader = {
  exists: (p) => existsSync(p),
  read: (p) => {
    try {
      return readFileSync(p);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw e;
    }
  },
};

/** HTTP status of a non-gRPC answer mapped to a gRPC code (gRPC's http-grpc-status-mapping). */
export function httpStatusToCode(status: number): number {
  switch (status) {
    case 400:
      return Code.INTERNAL;
    case 401:
      return Code.UNAUTHENTICATED;
    case 403:
      return 7; // PERMISSION_DENIED
    case 404:
      return Code.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return Code.UNAVAILABLE;
    default:
      return Code.UNKNOWN;
  }
}

export function decodeGrpcMessage(m: string | string[] | undefined): string {
  const s = Array.isArray(m) ? m[0] ?? "" : m ?? "";
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export class IstiodUpstream implements Upstream {
  readonly describe: string;

  constructor(
    private readonly cfg: UpstreamDialConfig,
    private readonly files: FileReader = nodeFiles,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.describe = cfg.address;
  }

  open(meta: StreamMeta, h: UpstreamHandlers): UpstreamStream {
    let closed = false;
    let established = false;
    let status: GrpcStatus | undefined;
    let lastError: string | undefined;
    const timers: ReturnType<typeof setTimeout>[] = [];
    let session: http2.ClientHttp2Session | undefined;
    let stream: http2.ClientHttp2Stream | undefined;

    const finish = (s: GrpcStatus) => {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t), clearInterval(t);
      try {
        if (stream && !stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
      } catch {}
      try {
        session?.destroy();
      } catch {}
      h.onClose(s, established);
    };
    const fail = (code: number, message: string) => finish({ code, message });

    try {
      const c = this.cfg;
      const token = this.readToken();
      const headers: http2.OutgoingHttpHeaders = {
        ":method": "POST",
        ":path": meta.path,
        "content-type": "application/grpc",
        te: "trailers",
        "grpc-accept-encoding": "identity",
        "user-agent": "istio-agent-ts",
        ...upstreamMetadata(token, c.clusterId, c.xdsHeaders),
      };
      const settings = { enablePush: false };
      if (c.tls) {
        const m = loadTlsMaterial(c.tls, this.files, this.now());
        session = http2.connect(`https://${c.host.includes(":") ? `[${c.host}]` : c.host}:${c.port}`, {
          settings,
          ca: m.ca,
          cert: m.cert,
          key: m.key,
          ...serverNameOptions(m.servername),
          minVersion: "TLSv1.2",
          ALPNProtocols: ["h2"],
        } as http2.SecureClientSessionOptions);
      } else {
        session = http2.connect(`http://${c.host.includes(":") ? `[${c.host}]` : c.host}:${c.port}`, { settings });
      }
      session.on("error", (e: Error) => {
        lastError = e.message;
        fail(Code.UNAVAILABLE, `connection to istiod ${c.address}: ${e.message}`);
      });
      session.on("goaway", () => {
        lastError = "istiod sent GOAWAY";
      });
      session.on("close", () => fail(Code.UNAVAILABLE, `connection to istiod ${c.address} closed${lastError ? `: ${lastError}` : ""}`));
      timers.push(
        setTimeout(() => {
          if (!established) fail(Code.UNAVAILABLE, `connecting to istiod ${c.address}: no answer within ${c.connectTimeoutMs} ms`);
        }, c.connectTimeoutMs),
      );
      if (c.keepaliveMs > 0) {
        const ka = setInterval(() => {
          if (closed || !session || session.destroyed) return;
          const t = setTimeout(() => fail(Code.UNAVAILABLE, `istiod ${c.address} did not answer a keepalive ping within ${c.keepaliveTimeoutMs} ms`), c.keepaliveTimeoutMs);
          timers.push(t);
          try {
            session.ping((err) => {
              clearTimeout(t);
              if (err && !closed) fail(Code.UNAVAILABLE, `keepalive ping to istiod ${c.address}: ${err.message}`);
            });
          } catch {
            clearTimeout(t);
          }
        }, c.keepaliveMs);
        timers.push(ka);
      }

      stream = session.request(headers);
      stream.on("response", (hd) => {
        const st = Number(hd[":status"]);
        if (st !== 200) {
          status = { code: httpStatusToCode(st), message: `istiod answered HTTP ${st}` };
          return;
        }
        established = true; // istiod answered: whatever follows is a termination, not a dial failure
        if (hd["grpc-status"] !== undefined) {
          status = { code: Number(hd["grpc-status"]), message: decodeGrpcMessage(hd["grpc-message"]) };
          return;
        }
        h.onConnected();
      });
      stream.on("data", (chunk: Buffer) => {
        if (!closed) h.onData(chunk);
      });
      stream.on("drain", () => h.onDrain());
      stream.on("trailers", (t) => {
        status = { code: t["grpc-status"] === undefined ? Code.UNKNOWN : Number(t["grpc-status"]), message: decodeGrpcMessage(t["grpc-message"]) };
      });
      stream.on("error", (e: Error) => {
        lastError = e.message;
      });
      // Bun emits "end" without "close" while our side is still open: the status is final then.
      const onEnded = () => {
        if (status) return finish(status);
        const rst = stream?.rstCode;
        if (rst === http2.constants.NGHTTP2_REFUSED_STREAM) return fail(Code.UNAVAILABLE, "istiod refused the stream");
        if (rst === http2.constants.NGHTTP2_CANCEL) return fail(Code.CANCELLED, "istiod cancelled the stream");
        fail(Code.UNAVAILABLE, `istiod stream closed without a status${lastError ? `: ${lastError}` : rst ? ` (RST_STREAM ${rst})` : ""}`);
      };
      stream.on("end", onEnded);
      stream.on("close", onEnded);
    } catch (e) {
      // Resolve asynchronously so the caller has its handle before onClose runs.
      queueMicrotask(() => fail(Code.UNAVAILABLE, (e as Error).message));
    }

    return {
      write: (bytes) => (closed || !stream ? true : stream.write(bytes)),
      pause: () => stream?.pause(),
      resume: () => stream?.resume(),
      close: () => fail(Code.CANCELLED, "stream closed by the agent"),
    };
  }

  private readToken(): string | undefined {
    const b = this.files.read(this.cfg.tokenPath);
    const t = b?.toString("utf8").trim();
    return t ? t : undefined;
  }
}

/**
 * TLS options naming the server istiod must prove to be. Bun refuses an IP address as the TLS
 * server name (Node only warns), which would make every VM dialing istiod by IP fail: for an IP,
 * send no SNI and check the certificate against that IP ourselves.
 */
export function serverNameOptions(servername: string): { servername?: string; checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined } {
  if (servername && isIP(servername) !== 0) return { checkServerIdentity: (_host, cert) => checkServerIdentity(servername, cert) };
  return servername ? { servername } : {};
}
