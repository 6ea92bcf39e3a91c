// The SDS server: envoy.service.secret.v3.SecretDiscoveryService on a Unix socket
// (./var/run/secrets/workload-spiffe-uds/socket). We own the listening socket: every accepted
// connection is checked with SO_PEERCRED (XDS_AUTHORIZED_UIDS) before grpc-js sees it through a
// connection injector. StreamSecrets follows Istio; FetchSecrets and DeltaSecrets are served too
// (Istio answers Unimplemented). Secret changes are pushed to every stream watching the name.
// start() binds the socket only; grpc-js and the SDS schema are loaded by prepare() (the secret
// manager calls it once the agent's start path is over) or by the first connection, whichever
// comes first; a connection accepted before that waits for it.

import type * as grpc from "@grpc/grpc-js";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { dirname } from "node:path";
import type { Logger } from "../lib/log.ts";
import type { PeerAuthorizer } from "../lib/peerauth.ts";
import type { Clock } from "../lib/clock.ts";
import { SdsError } from "./errors.ts";
import type { SdsCodec } from "./proto.ts";
import { DeltaStream, isInvalid, resourcesFor, SotwStream, type SecretSource, type StreamCtx, type StreamIo } from "./streams.ts";
import { randomUUID } from "node:crypto";
import type { PilotXdsMetrics } from "../lib/pilot-xds-metrics.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export const SDS_SERVICE = "envoy.service.secret.v3.SecretDiscoveryService";

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

const pass = (b: Buffer) => b;

function sdsService(): grpc.ServiceDefinition {
  const m = (name: string, requestStream: boolean, responseStream: boolean) => ({
    path: `/${SDS_SERVICE}/${name}`,
    requestStream,
    responseStream,
    requestSerialize: pass,
    requestDeserialize: pass,
    responseSerialize: pass,
    responseDeserialize: pass,
  });
  return { DeltaSecrets: m("DeltaSecrets", true, true), StreamSecrets: m("StreamSecrets", true, true), FetchSecrets: m("FetchSecrets", false, false) };
}

interface GrpcSide {
  mod: typeof grpc;
  server: grpc.Server;
  injector: ReturnType<grpc.Server["createConnectionInjector"]>;
}

export class SdsServer {
  private codecCache: SdsCodec | undefined;
  private readonly streams = new Set<SotwStream | DeltaStream>();
  private net: NetServer | undefined;
  private grpcLoad: Promise<GrpcSide> | undefined;
  private g: GrpcSide | undefined;
  private closed = false;
  private unsubscribe: (() => void) | undefined;
  private counter = 0;
  private readonly sockets = new Set<Socket>();

  constructor(
    readonly opts: SdsServerOptions,
    private readonly deps: SdsServerDeps,
  ) {}

  /** Set with the gRPC server (see grpc()); request handlers run only after that. */
  private get codec(): SdsCodec {
    return this.codecCache!;
  }

  /** Load grpc-js and the schema and build the gRPC server behind the socket (once). */
  prepare(): Promise<void> {
    return this.grpc().then(() => undefined);
  }

  private grpc(): Promise<GrpcSide> {
    this.grpcLoad ??= Promise.all([import("@grpc/grpc-js"), import("./proto.ts")]).then(([mod, proto]) => {
      this.codecCache = proto.sdsCodec();
      const server = new mod.Server({
        "grpc.max_concurrent_streams": this.opts.maxConcurrentStreams ?? 100_000,
        "grpc.max_receive_message_length": this.opts.maxReceiveMessageSize ?? 4 * 1024 * 1024,
      });
      server.addService(sdsService(), {
        StreamSecrets: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.streamSecrets(call),
        DeltaSecrets: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.deltaSecrets(call),
        FetchSecrets: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => void this.fetchSecrets(call, cb),
      });
      this.g = { mod, server, injector: server.createConnectionInjector(mod.ServerCredentials.createInsecure()) };
      if (this.closed) server.forceShutdown();
      return this.g;
    });
    return this.grpcLoad;
  }

  /** Bind the socket (stale socket file removed, directory created, mode 0666). */
  async start(): Promise<void> {
    const path = this.opts.socketPath;
    mkdirSync(dirname(path), { recursive: true, mode: 0o750 });
    rmSync(path, { force: true });
    this.unsubscribe = this.deps.secrets.onUpdate((name) => {
      for (const s of this.streams) s.push(name);
    });
    const ns = createServer((sock) => this.accept(sock));
    this.net = ns;
    await new Promise<void>((resolve, reject) => {
      ns.once("error", (e) => reject(new SdsError(`SDS: cannot listen on ${path}: ${errorMessage(e)}`)));
      ns.listen(path, () => resolve());
    });
    ns.on("error", (e) => this.deps.log.error(`SDS socket ${path}: ${e.message}`, ids({ path })));
    chmodSync(path, 0o666);
    this.deps.log.info(`SDS server listening on ${path}`, ids({ path }));
  }

  /** Number of open SDS streams. */
  streamCount(): number {
    return this.streams.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    for (const s of this.streams) s.close();
    this.streams.clear();
    const closed = new Promise<void>((r) => (this.net ? this.net.close(() => r()) : r()));
    for (const s of this.sockets) s.destroy();
    this.g?.injector.destroy();
    await closed;
    this.g?.server.forceShutdown();
    rmSync(this.opts.socketPath, { force: true });
  }

  private accept(sock: Socket): void {
    const d = this.opts.authorizer.check(sock);
    if (!d.allowed) {
      this.deps.log.warn(`SDS: refused connection on ${this.opts.socketPath}: ${d.reason}`, d.cred ? { pid: d.cred.pid, uid: d.cred.uid } : undefined);
      sock.destroy();
      return;
    }
    this.sockets.add(sock);
    sock.once("close", () => this.sockets.delete(sock));
    if (this.g) return this.g.injector.injectConnection(sock);
    void this.grpc().then(
      (g) => (sock.destroyed || this.closed ? sock.destroy() : g.injector.injectConnection(sock)),
      (e: Error) => {
        this.deps.log.error(`SDS: cannot serve a connection: ${e.message}`);
        sock.destroy();
      },
    );
  }

  private ctx(): StreamCtx {
    return {
      codec: this.codec,
      secrets: this.deps.secrets,
      log: this.deps.log,
      clock: this.deps.clock,
      nextVersion: () => `${new Date(this.deps.clock.now()).toISOString().replace(/\.\d+Z$/, "Z")}/${++this.counter}`,
      ...(this.deps.xdsMetrics ? { xdsMetrics: this.deps.xdsMetrics } : {}),
    };
  }

  private io(call: grpc.ServerDuplexStream<Buffer, Buffer>): StreamIo {
    return {
      send: (frame) => {
        if (!call.destroyed && !call.writableEnded) call.write(frame);
      },
      fail: (err, invalid) => {
        if (call.destroyed || call.writableEnded) return;
        call.emit("error", { code: invalid ? this.g!.mod.status.INVALID_ARGUMENT : this.g!.mod.status.UNAVAILABLE, details: err.message } as grpc.StatusObject);
      },
    };
  }

  private attach(call: grpc.ServerDuplexStream<Buffer, Buffer>, stream: SotwStream | DeltaStream, onFrame: (b: Buffer) => void): void {
    this.streams.add(stream);
    const done = () => {
      stream.close();
      this.streams.delete(stream);
    };
    call.on("data", (b: Buffer) => {
      try {
        onFrame(b);
      } catch (e) {
        this.deps.log.warn(`SDS: malformed request: ${errorMessage(e)}`, { conn: stream.id });
        call.emit("error", { code: this.g!.mod.status.INVALID_ARGUMENT, details: `malformed discovery request: ${errorMessage(e)}` } as grpc.StatusObject);
        done();
      }
    });
    call.on("end", () => {
      done();
      if (!call.writableEnded) call.end();
    });
    call.on("error", done);
    call.on("close", done);
    call.on("cancelled", done);
  }

  private streamSecrets(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const s = new SotwStream(this.ctx(), this.io(call), randomUUID().slice(0, 8));
    this.attach(call, s, (b) => s.onRequest(this.codec.decodeRequest(b)));
  }

  private deltaSecrets(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const s = new DeltaStream(this.ctx(), this.io(call), randomUUID().slice(0, 8));
    this.attach(call, s, (b) => s.onRequest(this.codec.decodeDeltaRequest(b)));
  }

  private async fetchSecrets(call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): Promise<void> {
    try {
      const req = this.codec.decodeRequest(call.request);
      if (req.resourceNames.length === 0) return cb({ code: this.g!.mod.status.INVALID_ARGUMENT, details: "FetchSecrets: no resource_names" });
      const ctx = this.ctx();
      const gone = new AbortController();
      call.on("cancelled", () => gone.abort(new Error("FetchSecrets: the caller went away")));
      const resources = await resourcesFor(ctx, [...new Set(req.resourceNames)], gone.signal);
      cb(null, this.codec.encodeResponse({ versionInfo: ctx.nextVersion(), nonce: randomUUID(), resources }));
    } catch (e) {
      cb({ code: isInvalid(e) ? this.g!.mod.status.INVALID_ARGUMENT : this.g!.mod.status.UNAVAILABLE, details: errorMessage(e) });
    }
  }
}
