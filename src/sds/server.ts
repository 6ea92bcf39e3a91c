// The SDS server: envoy.service.secret.v3.SecretDiscoveryService on a Unix socket
// (./var/run/secrets/workload-spiffe-uds/socket), on the agent's own h2c gRPC server
// (src/xds/grpcserver.ts, the XDS socket's): every accepted connection is checked with SO_PEERCRED
// (XDS_AUTHORIZED_UIDS) before any byte is read; SETTINGS_MAX_CONCURRENT_STREAMS is
// ISTIO_GPRC_MAXSTREAMS, a request over ISTIO_GPRC_MAXRECVMSGSIZE ends its stream
// RESOURCE_EXHAUSTED. StreamSecrets follows Istio; FetchSecrets and DeltaSecrets are served too
// (Istio answers Unimplemented). Secret changes are pushed to every stream watching the name.
// start() binds the socket only; the codec (wire.ts: the messages at the protobuf wire level, no
// schema library) is loaded by prepare() (the secret manager calls it once the agent's start path
// is over) or by the first call, whichever comes first; a call's messages wait for it, in order.

import { randomUUID } from "node:crypto";
import type { Logger } from "../lib/log.ts";
import { refusalLog, type PeerAuthorizer } from "../lib/peerauth.ts";
import type { Clock } from "../lib/clock.ts";
import { FailureReport } from "../lib/component.ts";
import type { PilotXdsMetrics } from "../lib/pilot-xds-metrics.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";
import { GrpcServerCall } from "../xds/grpccall.ts";
import { grpcHeader } from "../xds/grpcframe.ts";
import { readRequests } from "../xds/grpcrequests.ts";
import { UnixGrpcServer, type GrpcMethod } from "../xds/grpcserver.ts";
import type { H2Stream } from "../xds/h2/stream.ts";
import { Code } from "../xds/types.ts";
import { SdsError } from "./errors.ts";
import type { DiscoveryRequest, SdsServerCodec as SdsCodec } from "./wire.ts";
import { DeltaStream, isInvalid, resourcesFor, SotwStream, type SecretSource, type StreamCtx, type StreamIo } from "./streams.ts";

export const SDS_SERVICE = "envoy.service.secret.v3.SecretDiscoveryService";

/** grpc's default receive limit (ISTIO_GPRC_MAXRECVMSGSIZE's default). */
const DEFAULT_MAX_RECEIVE = 4 * 1024 * 1024;
/**
 * Our receive window per stream: HTTP/2's default. SDS requests are a few hundred bytes; a stream
 * whose responses the client does not read is paused, and this is what it may send meanwhile.
 */
const SDS_STREAM_WINDOW = 65_535;

export interface SdsServerOptions {
  socketPath: string;
  authorizer: PeerAuthorizer;
  /** ISTIO_GPRC_MAXSTREAMS */
  maxConcurrentStreams?: number;
  /** ISTIO_GPRC_MAXRECVMSGSIZE */
  maxReceiveMessageSize?: number;
}

export interface SdsServerDeps {
  log: Logger;
  secrets: SecretSource & { onUpdate(fn: (name: string) => void): () => void };
  clock: Clock;
  /** Istio's pilot_xds_* metrics (NACKs, stale nonces, send time). */
  xdsMetrics?: PilotXdsMetrics;
}

export class SdsServer {
  /** The listener died after start (Bun's listener reports no accept errors; kept for the component contract). */
  private readonly failure = new FailureReport();
  readonly failed = this.failure.failed;
  private codec: SdsCodec | undefined;
  private codecLoad: Promise<SdsCodec> | undefined;
  private readonly streams = new Set<SotwStream | DeltaStream>();
  private server: UnixGrpcServer | undefined;
  private unsubscribe: (() => void) | undefined;
  private counter = 0;
  private readonly methods: ReadonlyMap<string, GrpcMethod> = new Map<string, GrpcMethod>([
    [`/${SDS_SERVICE}/StreamSecrets`, (stream, path) => this.serveStream(stream, path, false)],
    [`/${SDS_SERVICE}/DeltaSecrets`, (stream, path) => this.serveStream(stream, path, true)],
    [`/${SDS_SERVICE}/FetchSecrets`, (stream, path) => this.serveFetch(stream, path)],
  ]);

  constructor(
    readonly opts: SdsServerOptions,
    private readonly deps: SdsServerDeps,
  ) {}

  /** Load the SDS codec (once). */
  prepare(): Promise<void> {
    return this.loadCodec().then(() => undefined);
  }

  private loadCodec(): Promise<SdsCodec> {
    this.codecLoad ??= import("./wire.ts").then((m) => (this.codec = m.sdsWireCodec()));
    return this.codecLoad;
  }

  /** Run `f` with the codec: at once when loaded, else once it is (in the order asked). */
  private withCodec(f: (codec: SdsCodec) => void, onError: (e: unknown) => void): void {
    if (this.codec) return f(this.codec);
    this.loadCodec().then(f, onError);
  }

  /** Bind the socket (stale socket file removed, directory created, mode 0666). */
  async start(): Promise<void> {
    const path = this.opts.socketPath;
    const log = this.deps.log;
    const refused = refusalLog(log, this.deps.clock);
    const server = new UnixGrpcServer({
      socketPath: path,
      authorizer: this.opts.authorizer,
      log,
      name: "SDS",
      route: (p) => this.methods.get(p),
      unknownMethodMessage: (p) => `The server does not implement the method ${p}`,
      onRejected: (d) => refused(`SDS: refused connection on ${path}: ${d.reason}`, d.cred ? { pid: d.cred.pid, uid: d.cred.uid } : undefined),
      listenError: (_message, cause) => new SdsError(`SDS: cannot listen on ${path}: ${errorMessage(cause)}`, undefined, { cause }),
      maxConcurrentStreams: this.opts.maxConcurrentStreams ?? 100_000,
      streamWindow: SDS_STREAM_WINDOW,
    });
    server.listen();
    this.server = server;
    this.unsubscribe = this.deps.secrets.onUpdate((name) => {
      for (const s of this.streams) s.push(name);
    });
    log.info(`SDS server listening on ${path}`, ids({ path }));
  }

  /** Number of open SDS streams. */
  streamCount(): number {
    return this.streams.size;
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    for (const s of this.streams) s.close();
    this.streams.clear();
    await this.server?.close();
  }

  private ctx(codec: SdsCodec): StreamCtx {
    return {
      codec,
      secrets: this.deps.secrets,
      log: this.deps.log,
      clock: this.deps.clock,
      nextVersion: () => `${new Date(this.deps.clock.now()).toISOString().replace(/\.\d+Z$/, "Z")}/${++this.counter}`,
      ...(this.deps.xdsMetrics ? { xdsMetrics: this.deps.xdsMetrics } : {}),
    };
  }

  /** StreamSecrets (SotW) or DeltaSecrets: requests in order, responses with back-pressure. */
  private serveStream(stream: H2Stream, path: string, delta: boolean): void {
    const call = new GrpcServerCall(stream, path);
    const id = randomUUID().slice(0, 8);
    let handler: SotwStream | DeltaStream | undefined;
    let over = false;
    const done = () => {
      over = true;
      if (!handler) return;
      handler.close();
      this.streams.delete(handler);
    };
    const io: StreamIo = {
      send: (frame) => {
        // A client that does not read: stop crediting its window until the responses drain.
        if (!call.writev(grpcHeader(frame.length), frame)) call.pause();
      },
      fail: (err, invalid) => {
        call.finish({ code: invalid ? Code.INVALID_ARGUMENT : Code.UNAVAILABLE, message: err.message });
        done();
      },
    };
    const unavailable = (e: unknown) => {
      this.deps.log.error(`SDS: cannot serve a stream: ${errorMessage(e)}`, { conn: id });
      call.finish({ code: Code.UNAVAILABLE, message: `SDS schema unavailable: ${errorMessage(e)}` });
      done();
    };
    readRequests(stream, call, this.opts.maxReceiveMessageSize ?? DEFAULT_MAX_RECEIVE, {
      onMessage: (bytes) =>
        this.withCodec((codec) => {
          if (over) return;
          if (!handler) {
            handler = delta ? new DeltaStream(this.ctx(codec), io, id) : new SotwStream(this.ctx(codec), io, id);
            this.streams.add(handler);
          }
          try {
            if (handler instanceof SotwStream) handler.onRequest(codec.decodeRequest(bytes));
            else handler.onRequest(codec.decodeDeltaRequest(bytes));
          } catch (e) {
            this.deps.log.warn(`SDS: malformed request: ${errorMessage(e)}`, { conn: id });
            call.finish({ code: Code.INVALID_ARGUMENT, message: `malformed discovery request: ${errorMessage(e)}` });
            done();
          }
        }, unavailable),
      onEnd: () =>
        this.withCodec(() => {
          if (over) return;
          done();
          call.finish({ code: Code.OK, message: "" });
        }, unavailable),
      onGone: done,
      onDrain: () => call.resume(),
    });
  }

  /** FetchSecrets (unary): exactly one request, then the secrets or a status. */
  private serveFetch(stream: H2Stream, path: string): void {
    const call = new GrpcServerCall(stream, path);
    const gone = new AbortController();
    let request: Buffer | undefined;
    let refused = false;
    readRequests(stream, call, this.opts.maxReceiveMessageSize ?? DEFAULT_MAX_RECEIVE, {
      onMessage: (bytes) => {
        if (refused) return;
        if (request === undefined) return void (request = bytes);
        refused = true;
        call.finish({ code: Code.UNIMPLEMENTED, message: `Received a second request message for server streaming method ${path}` });
      },
      onEnd: () => {
        if (refused) return;
        if (request === undefined) return call.finish({ code: Code.UNIMPLEMENTED, message: `Received no request message for server streaming method ${path}` });
        const req = request;
        this.withCodec(
          (codec) => void this.fetchSecrets(codec, call, req, gone.signal),
          (e) => call.finish({ code: Code.UNAVAILABLE, message: `SDS schema unavailable: ${errorMessage(e)}` }),
        );
      },
      onGone: () => gone.abort(new Error("FetchSecrets: the caller went away")),
    });
  }

  private async fetchSecrets(codec: SdsCodec, call: GrpcServerCall, bytes: Buffer, signal: AbortSignal): Promise<void> {
    let req: DiscoveryRequest;
    try {
      req = codec.decodeRequest(bytes);
    } catch (e) {
      // As on the streaming methods: the caller sent something malformed.
      return call.finish({ code: Code.INVALID_ARGUMENT, message: `malformed discovery request: ${errorMessage(e)}` });
    }
    try {
      if (req.resourceNames.length === 0) return call.finish({ code: Code.INVALID_ARGUMENT, message: "FetchSecrets: no resource_names" });
      const ctx = this.ctx(codec);
      const resources = await resourcesFor(ctx, [...new Set(req.resourceNames)], signal);
      const frame = codec.encodeResponse({ versionInfo: ctx.nextVersion(), nonce: randomUUID(), resources });
      call.writev(grpcHeader(frame.length), frame);
      call.finish({ code: Code.OK, message: "" });
    } catch (e) {
      call.finish({ code: isInvalid(e) ? Code.INVALID_ARGUMENT : Code.UNAVAILABLE, message: errorMessage(e) });
    }
  }
}
