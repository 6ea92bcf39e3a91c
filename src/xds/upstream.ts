// The upstream side of the relay. `Upstream` is the seam: the relay only asks it to open a stream
// and exchanges gRPC-framed bytes with it, so a later local (file-backed, LOCAL_XDS_PATH) source
// can plug in without touching the relay. `IstiodUpstream` dials istiod with our HTTP/2 session: one fresh
// connection per downstream stream (Istio's behaviour), TLS with ALPN h2 unless plaintext,
// bearer token and headers as gRPC metadata, HTTP/2 keepalive pings.

import { existsSync } from "node:fs";
import { dialSocket } from "./dial.ts";
import { ChunkReleaser, type ReleaseSource } from "./chunkrelease.ts";
import { httpStatusToCode, resetStatus, trailerStatus } from "./grpcstatus.ts";
import { H2Code } from "./h2/frames.ts";
import { headerValue, type HeaderList } from "./h2/hpack.ts";
import { H2Session, type H2Stream } from "./h2/session.ts";
import { Code, type GrpcStatus } from "./types.ts";
import { AGENT_USER_AGENT } from "./unary.ts";
import { RootBundleCheck } from "../ca/rootcheck.ts";
import { TlsContextCache } from "../ca/tlscontext.ts";
import { loadTlsMaterial, upstreamMetadata, type FileReader, type UpstreamDialConfig } from "./upstream-config.ts";
import { FILE_LIMITS, readBoundedFileSync } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";
import { systemClock, type Clock, type TimerHandle } from "../lib/clock.ts";
import { stallTolerantDeadline } from "../lib/deadline.ts";

// Moved to their own modules (shared with the CA client); re-exported for existing importers.
export { decodeGrpcMessage, httpStatusToCode, resetStatus, trailerStatus } from "./grpcstatus.ts";
export { serverNameOptions } from "./dial.ts";

export interface StreamMeta {
  /** `/envoy.service.discovery.v3.AggregatedDiscoveryService/<method>` */
  path: string;
  delta: boolean;
}

export interface UpstreamHandlers {
  /** The connection to the upstream is up (istiod's HTTP/2 endpoint answered); the stream is open. */
  onConnected(): void;
  /** gRPC-framed response bytes, in order. */
  onData(chunk: Uint8Array): void;
  /** A write that returned false may continue. */
  onDrain(): void;
  /** The stream ended, once. `established` = it got as far as onConnected. */
  onClose(status: GrpcStatus, established: boolean): void;
  /**
   * Where the views of the bytes given to onData go, for freeing their memory once nothing
   * references them (chunkrelease.ts). Absent: it is left to the garbage collector.
   */
  release?: ReleaseSource;
}

export interface UpstreamStream {
  /** Send gRPC-framed request bytes; false = wait for onDrain before writing more. */
  write(bytes: Uint8Array): boolean;
  pause(): void;
  resume(): void;
  /** Cancel the stream and release its connection; onClose still fires (CANCELLED). */
  close(): void;
  /** What was received may no longer be referenced (the handlers' `release.released()` says how far): free it now if so. */
  release?(): void;
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

export class IstiodUpstream implements Upstream {
  readonly describe: string;
  /** Each redial reads the root; it is parsed and loaded into TLS once per content (docs/memory.md). */
  readonly rootCheck = new RootBundleCheck();
  readonly tlsContexts = new TlsContextCache();

  constructor(
    private readonly cfg: UpstreamDialConfig,
    private readonly files: FileReader = nodeFiles,
    private readonly now: () => Date = () => new Date(),
    private readonly clock: Pick<Clock, "now" | "timer"> = systemClock,
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
    let connectDeadline: TimerHandle | undefined;
    let releaser: ChunkReleaser | undefined;

    const finish = (s: GrpcStatus) => {
      if (closed) return;
      closed = true;
      connectDeadline?.cancel();
      releaser?.drop();
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
        ["user-agent", AGENT_USER_AGENT],
        ...Object.entries(upstreamMetadata(this.readToken(), c.clusterId, c.xdsHeaders)),
      ];
      const m = c.tls ? loadTlsMaterial(c.tls, this.files, this.now(), this.rootCheck) : undefined;
      const socket = dialSocket({
        host: c.host,
        port: c.port,
        ...(m ? { tls: this.tlsContexts.with({ ca: m.ca, cert: m.cert, key: m.key, servername: m.servername, compliancePolicy: c.compliancePolicy }) } : {}),
      });
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
      // After the session's own listener has handled a chunk: free it once nothing references it.
      if (h.release) {
        const r = new ChunkReleaser(h.release);
        releaser = r;
        socket.on("data", (chunk: Buffer) => {
          if (!closed) r.hold(chunk);
        });
      }
      // The deadline covers the connection (TCP, TLS, istiod's HTTP/2 SETTINGS), as gRPC's dial
      // does, not istiod's first message: a gRPC server sends its response headers with that
      // message, which may come much later (istiod computing a large first push).
      connectDeadline = stallTolerantDeadline(this.clock, c.connectTimeoutMs, () => {
        if (!established) finish({ code: Code.UNAVAILABLE, message: `connecting to istiod ${c.address}: no answer within ${c.connectTimeoutMs} ms` });
      });
      // Before the session's own listener: a first chunk may carry SETTINGS and the stream's answer together.
      socket.prependOnceListener("data", () => {
        if (closed || established) return;
        established = true; // istiod's HTTP/2 endpoint answered: whatever follows is a termination, not a dial failure
        connectDeadline?.cancel();
        h.onConnected();
      });
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
            if (endStream || headerValue(hd, "grpc-status") !== undefined) status = trailerStatus(hd);
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
      release: () => releaser?.check(),
    };
  }

  private readToken(): string | undefined {
    const b = this.files.read(this.cfg.tokenPath);
    const t = b?.toString("utf8").trim();
    return t ? t : undefined;
  }
}
