// The upstream side of the relay. `Upstream` is the seam: the relay only asks it to open a stream
// and exchanges gRPC-framed bytes with it, so a later local (file-backed, LOCAL_XDS_PATH) source
// can plug in without touching the relay. `IstiodUpstream` dials istiod with our HTTP/2 session: one fresh
// connection per downstream stream (Istio's behaviour), TLS with ALPN h2 unless plaintext,
// bearer token and headers as gRPC metadata, HTTP/2 keepalive pings.

import net, { isIP } from "node:net";
import tls, { checkServerIdentity, type PeerCertificate } from "node:tls";
import { existsSync } from "node:fs";
import { H2Code } from "./h2/frames.ts";
import { headerValue, type HeaderList } from "./h2/hpack.ts";
import { H2Session, type H2Stream } from "./h2/session.ts";
import { Code, type GrpcStatus } from "./types.ts";
import { loadTlsMaterial, upstreamMetadata, type FileReader, type UpstreamDialConfig } from "./upstream-config.ts";
import { FILE_LIMITS, readBoundedFileSync } from "../lib/boundedfile.ts";
import { complianceTls } from "../lib/compliance.ts";
import { errorMessage } from "../lib/errors.ts";

export interface StreamMeta {
  /** `/envoy.service.discovery.v3.AggregatedDiscoveryService/<method>` */
  path: string;
  delta: boolean;
}

export interface UpstreamHandlers {
  /** The upstream accepted the stream (response headers arrived). */
  onConnected(): void;
  /** gRPC-framed response bytes, in order. */
  onData(chunk: Uint8Array): void;
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

/** Receive windows toward istiod (Istio's agent: 1 MiB per stream and per connection). */
const STREAM_WINDOW = 1 << 20;
const CONNECTION_WINDOW = 2 << 20;
const MAX_FRAME = 1 << 20;

export const nodeFiles: FileReader = {
  exists: (p) => existsSync(p),
  read: (p) => {
    try {
      return readBoundedFileSync(p, FILE_LIMITS.certificate);
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
  const s = Array.isArray(m) ? (m[0] ?? "") : (m ?? "");
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** gRPC status for a stream that died with an HTTP/2 error code (gRPC's mapping). */
export function resetStatus(code: number, reason: string): GrpcStatus {
  switch (code) {
    case H2Code.REFUSED_STREAM:
      return { code: Code.UNAVAILABLE, message: reason };
    case H2Code.CANCEL:
      return { code: Code.CANCELLED, message: reason };
    case H2Code.ENHANCE_YOUR_CALM:
      return { code: Code.RESOURCE_EXHAUSTED, message: reason };
    case H2Code.INADEQUATE_SECURITY:
      return { code: 7, message: reason }; // PERMISSION_DENIED
    default:
      return { code: Code.UNAVAILABLE, message: reason };
  }
}

/** The gRPC status carried by a trailers block (or a trailers-only response). */
export function trailerStatus(h: HeaderList): GrpcStatus {
  const st = headerValue(h, "grpc-status");
  return { code: st === undefined || !/^\d+$/.test(st) ? Code.UNKNOWN : Number(st), message: decodeGrpcMessage(headerValue(h, "grpc-message")) };
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
    const c = this.cfg;
    let closed = false;
    let established = false;
    let status: GrpcStatus | undefined;
    let session: H2Session | undefined;
    let stream: H2Stream | undefined;
    let connectTimer: ReturnType<typeof setTimeout> | undefined;

    const finish = (s: GrpcStatus) => {
      if (closed) return;
      closed = true;
      clearTimeout(connectTimer);
      if (stream && !stream.closed) stream.reset(H2Code.CANCEL);
      session?.close(0);
      h.onClose(s, established);
    };

    try {
      const headers: HeaderList = [
        [":method", "POST"],
        [":scheme", c.tls ? "https" : "http"],
        [":path", meta.path],
        [":authority", c.address],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
        ["grpc-accept-encoding", "identity"],
        ["user-agent", "istio-agent-ts"],
        ...Object.entries(upstreamMetadata(this.readToken(), c.clusterId, c.xdsHeaders)),
      ];
      const host = c.host.startsWith("[") ? c.host.slice(1, -1) : c.host;
      let socket: net.Socket;
      if (c.tls) {
        const m = loadTlsMaterial(c.tls, this.files, this.now());
        socket = tls.connect({
          host,
          port: c.port,
          ca: m.ca,
          cert: m.cert,
          key: m.key,
          ...serverNameOptions(m.servername),
          ALPNProtocols: ["h2"],
          ...complianceTls(c.compliancePolicy),
        });
      } else {
        socket = net.connect({ host, port: c.port });
      }
      socket.setNoDelay?.(true);
      session = new H2Session(socket, {
        role: "client",
        streamWindow: STREAM_WINDOW,
        connectionWindow: CONNECTION_WINDOW,
        maxFrameSize: MAX_FRAME,
        keepalive: c.keepaliveMs > 0 ? { intervalMs: c.keepaliveMs, timeoutMs: c.keepaliveTimeoutMs } : undefined,
        onClose: (err) => {
          if (!closed) finish({ code: Code.UNAVAILABLE, message: `connection to istiod ${c.address} closed${err ? `: ${err.message}` : ""}` });
        },
      });
      connectTimer = setTimeout(() => {
        if (!established) finish({ code: Code.UNAVAILABLE, message: `connecting to istiod ${c.address}: no answer within ${c.connectTimeoutMs} ms` });
      }, c.connectTimeoutMs);
      const s = session.request(headers);
      stream = s;
      s.handlers = {
        onHeaders: (hd, endStream) => {
          if (s.headersSeen === 1) {
            const st = Number(headerValue(hd, ":status"));
            if (st !== 200) {
              status = { code: httpStatusToCode(st), message: `istiod answered HTTP ${st}` };
              return;
            }
            established = true; // istiod answered: whatever follows is a termination, not a dial failure
            clearTimeout(connectTimer);
            if (endStream || headerValue(hd, "grpc-status") !== undefined) {
              status = trailerStatus(hd);
              return;
            }
            h.onConnected();
            return;
          }
          status = trailerStatus(hd);
        },
        onData: (chunk) => {
          if (!closed) h.onData(chunk);
        },
        onDrain: () => h.onDrain(),
        onEnd: () => {
          // istiod ended its side: its status (trailers) is final, even though ours is still open.
          finish(status ?? { code: Code.UNAVAILABLE, message: "istiod stream closed without a status" });
        },
        onReset: (code, reason) => finish(status ?? resetStatus(code, `istiod stream: ${reason}`)),
      };
      socket.on("error", (e: Error) => {
        if (!closed) finish({ code: Code.UNAVAILABLE, message: `connection to istiod ${c.address}: ${e.message}` });
      });
    } catch (e) {
      // Resolve asynchronously so the caller has its handle before onClose runs.
      queueMicrotask(() => finish({ code: Code.UNAVAILABLE, message: errorMessage(e) }));
    }

    return {
      write: (bytes) => (closed || !stream ? true : stream.write(bytes)),
      pause: () => stream?.pause(),
      resume: () => stream?.resume(),
      close: () => finish({ code: Code.CANCELLED, message: "stream closed by the agent" }),
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
export function serverNameOptions(servername: string): {
  servername?: string;
  checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined;
} {
  if (servername && isIP(servername) !== 0) return { checkServerIdentity: (_host, cert) => checkServerIdentity(servername, cert) };
  return servername ? { servername } : {};
}
