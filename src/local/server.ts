// The local xDS server: Envoy's AggregatedDiscoveryService (SotW and Delta) over plaintext gRPC
// on a Unix socket or a loopback port, serving the resources of a local file (XdsFileSource).
// The agent runs it in-process and points its xDS relay at address() as if it were istiod; any
// other xDS client (Envoy, grpc-js-xds) can dial it directly too. Each stream is a pure state
// machine (SotwStream / DeltaStream); this file only moves bytes, logs and counts.
//
// start() only binds the socket (a plain net server, no gRPC code yet): grpc-js, the schemas and
// the file load right after, off the agent's start path (after `initAfter`); accepted connections
// are handed to grpc-js once it is loaded. Requests that arrive before the first good load wait
// for it. Until then the readiness blocker `local xDS file loaded` is pending, carrying the file's
// error if it is bad; fixing the file clears it (the file is watched from the start).

import type * as grpc from "@grpc/grpc-js";
import { chmod, mkdir, rm } from "node:fs/promises";
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { dirname, resolve } from "node:path";
import { FailureReport, type Component } from "../lib/component.ts";
import type { Logger } from "../lib/log.ts";
import { counter, type Registry } from "../lib/metrics.ts";
import { READINESS, type Blocker, type Readiness } from "../lib/readiness.ts";
import { adsCodec, type AdsCodec } from "./codec.ts";
import { DeltaStream, type DeltaEvent } from "./delta.ts";
import { LocalXdsError } from "./errors.ts";
import { ProtoJson } from "./protojson.ts";
import { localSchema, RESOURCE_KINDS, shortType, typeUrlOf } from "./schema.ts";
import { EMPTY_SNAPSHOT, type Snapshot } from "./snapshot.ts";
import { SotwStream, type SotwEvent } from "./sotw.ts";
import { XdsFileSource, type ReloadResult } from "./source.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export const ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService";

export interface LocalXdsServerOptions {
  /** The xDS file (LOCAL_XDS_PATH); relative paths resolve against `cwd`. */
  path: string;
  /** Where to listen: `unix:///abs/path`, `unix:relative/path`, `127.0.0.1:0`, `[::1]:0`. */
  listen: string;
  log: Logger;
  registry?: Registry;
  /** Registers the `local xDS file loaded` blocker, cleared by the first good load. */
  readiness?: Readiness;
  /** Directory relative paths resolve against (default process.cwd(), read once here). */
  cwd?: string;
  debounceMs?: number;
  pollMs?: number;
  /** Nonce generator (tests inject a deterministic one). */
  nonce?: () => string;
  /** Load grpc-js, the schemas and the file once this resolves (the agent's start path is over); default: right after start(). */
  initAfter?: Promise<unknown>;
}

const identity = (b: Buffer) => b;
const method = (name: string): grpc.MethodDefinition<Buffer, Buffer> => ({
  path: `/${ADS_SERVICE}/${name}`,
  requestStream: true,
  responseStream: true,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});

/** The ADS service definition with Buffer pass-through (de)serializers (also used by tests). */
export const ADS_SERVICE_DEFINITION: grpc.ServiceDefinition = {
  StreamAggregatedResources: method("StreamAggregatedResources"),
  DeltaAggregatedResources: method("DeltaAggregatedResources"),
};

const SERVED = new Set(RESOURCE_KINDS.map(typeUrlOf));

/** `host:port` or `[v6]:port` -> its parts; undefined if it is not of that form. */
export function hostPort(listen: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:\[\]]*)):(\d{1,5})$/.exec(listen);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  return { host: m[1] ?? m[2] ?? "", port };
}

/** `unix:` targets -> absolute socket path; anything else -> undefined (host:port). */
export function unixSocketPath(listen: string, cwd: string): string | undefined {
  if (!listen.startsWith("unix:")) return undefined;
  const rest = listen.slice("unix:".length);
  if (rest.startsWith("//")) return "/" + rest.replace(/^\/+/, "");
  return resolve(cwd, rest);
}

type AdsCall = grpc.ServerDuplexStream<Buffer, Buffer>;

interface GrpcSide {
  mod: typeof grpc;
  server: grpc.Server;
  injector: ReturnType<grpc.Server["createConnectionInjector"]>;
}

interface LiveStream {
  push(s: Snapshot): void;
  end(): void;
}

export class LocalXdsServer implements Component {
  readonly name = "localxds";
  private readonly failure = new FailureReport();
  /** The listener died after start. */
  readonly failed = this.failure.failed;
  private codec?: AdsCodec;
  private source?: XdsFileSource;
  private readonly streams = new Set<LiveStream>();
  private net?: NetServer;
  private readonly sockets = new Set<Socket>();
  /** grpc-js and the server with its connection injector, loaded on first need. */
  private grpcLoad?: Promise<GrpcSide>;
  private grpcSide?: GrpcSide;
  private readonly log: Logger;
  private readonly cwd: string;
  private readonly blocker?: Blocker;
  private bound = "";
  private socketPath?: string;
  private done: Promise<void> = Promise.resolve();
  private init?: Promise<void>;
  private loadedOnce = false;
  private readonly loadWaiters: (() => void)[] = [];
  private nonceCounter = 0;
  private streamCounter = 0;
  private readonly metrics;

  constructor(private readonly opts: LocalXdsServerOptions) {
    this.log = opts.log;
    this.cwd = opts.cwd ?? process.cwd();
    this.blocker = opts.readiness?.block(READINESS.localXdsLoaded);
    const reg = opts.registry;
    this.metrics = reg
      ? {
          reloads: counter(reg, "istio_agent_local_xds_reloads", "Reloads of the local xDS file, by result (ok, unchanged, rejected)", ["result"]),
          pushes: counter(reg, "istio_agent_local_xds_pushes", "xDS responses sent by the local xDS server, by type", ["type"]),
          nacks: counter(reg, "istio_agent_local_xds_nacks", "xDS responses rejected by clients of the local xDS server, by type", ["type"]),
        }
      : undefined;
  }

  /** Load grpc-js and build the ADS server behind our socket (once). */
  private grpc(): Promise<GrpcSide> {
    this.grpcLoad ??= import("@grpc/grpc-js").then((mod) => {
      const server = new mod.Server();
      server.addService(ADS_SERVICE_DEFINITION, {
        StreamAggregatedResources: (call: AdsCall) => this.serveSotw(call),
        DeltaAggregatedResources: (call: AdsCall) => this.serveDelta(call),
      });
      this.grpcSide = { mod, server, injector: server.createConnectionInjector(mod.ServerCredentials.createInsecure()) };
      return this.grpcSide;
    });
    return this.grpcLoad;
  }

  private accept(sock: Socket): void {
    this.sockets.add(sock);
    sock.once("close", () => this.sockets.delete(sock));
    if (this.grpcSide) return this.grpcSide.injector.injectConnection(sock);
    void this.grpc().then(
      (g) => (sock.destroyed ? undefined : g.injector.injectConnection(sock)),
      (e: Error) => {
        this.log.error(`local xDS: cannot serve a connection: ${e.message}`);
        sock.destroy();
      },
    );
  }

  /** Bind and return; the schemas and the file load right after (see loaded()). */
  async start(signal: AbortSignal): Promise<void> {
    this.socketPath = unixSocketPath(this.opts.listen, this.cwd);
    if (this.socketPath) {
      await mkdir(dirname(this.socketPath), { recursive: true, mode: 0o750 });
      await rm(this.socketPath, { force: true });
    }
    const target = this.socketPath ? `unix://${this.socketPath}` : this.opts.listen;
    const hp = this.socketPath ? undefined : hostPort(this.opts.listen);
    const cannot = (why: string, cause?: unknown) =>
      new LocalXdsError(`local xDS: cannot listen on ${this.opts.listen}: ${why}`, this.opts.path, undefined, cause ? { cause } : undefined);
    if (!this.socketPath && !hp) throw cannot("not unix:<path> or <host>:<port>");
    const net = createServer((sock) => this.accept(sock));
    await new Promise<void>((res, rej) => {
      net.once("error", (e) => rej(cannot(e.message, e)));
      if (this.socketPath) net.listen(this.socketPath, () => res());
      else net.listen(hp!.port, hp!.host, () => res());
    });
    net.on("error", (e) => this.failure.report(new LocalXdsError(`local xDS: socket ${target}: ${e.message}`, this.opts.path, undefined, { cause: e })));
    this.net = net;
    if (this.socketPath) await chmod(this.socketPath, 0o600);
    const port = (net.address() as { port?: number } | null)?.port ?? 0;
    this.bound = this.socketPath ? target : this.opts.listen.replace(/:0$/, `:${port}`);
    this.done = new Promise<void>((res) => signal.addEventListener("abort", () => void this.shutdown().then(res), { once: true }));
    this.init = (this.opts.initAfter ?? new Promise<void>((res) => setTimeout(res, 0)))
      .then(() => this.initialise(signal))
      .catch((e: Error) => {
        this.log.error(`local xDS: cannot serve ${this.opts.path}: ${e.message}`, ids({ path: this.opts.path }));
        this.blocker?.fail(e.message);
      });
  }

  /** Parse the schemas, load the file, watch it. A bad file is logged and blocks readiness. */
  private async initialise(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    await this.grpc();
    const root = localSchema();
    this.codec = adsCodec(root);
    const source = new XdsFileSource({
      path: resolve(this.cwd, this.opts.path),
      displayPath: this.opts.path,
      protoJson: new ProtoJson(root),
      log: this.log,
      debounceMs: this.opts.debounceMs,
      pollMs: this.opts.pollMs,
      onReload: (result) => this.metrics?.reloads.inc({ result }),
      onRejected: (e) => {
        if (!this.loadedOnce) this.blocker?.fail(e.message);
      },
    });
    this.source = source;
    source.onUpdate((snap) => {
      if (!this.loadedOnce) return this.firstLoad(snap);
      for (const s of this.streams) s.push(snap);
    });
    if (signal.aborted) return;
    source.watch(signal);
    await source.reload();
  }

  private firstLoad(snap: Snapshot): void {
    this.loadedOnce = true;
    this.blocker?.clear();
    const counts = RESOURCE_KINDS.map((k) => `${snap.types.get(typeUrlOf(k))?.size ?? 0} ${k.key}`).join(", ");
    this.log.info(`local xDS: serving ${this.opts.path} (version ${snap.version}: ${counts}) on ${this.bound}`, ids({ path: this.opts.path }));
    for (const w of this.loadWaiters.splice(0)) w();
  }

  /** Resolves once the file has loaded successfully (immediately if it has). */
  loaded(): Promise<void> {
    return this.loadedOnce ? Promise.resolve() : new Promise((res) => this.loadWaiters.push(res));
  }

  stopped(): Promise<void> {
    return this.done;
  }

  /** The address to dial: `unix:///abs/path` or `127.0.0.1:<port>`. */
  address(): string {
    return this.bound;
  }

  /** The snapshot being served (empty before the first good load). */
  snapshot(): Snapshot {
    return this.source?.current() ?? EMPTY_SNAPSHOT;
  }

  /** Reload the file now (the watcher does this on change). */
  async reload(): Promise<ReloadResult> {
    await this.init;
    return this.source!.reload();
  }

  /** Number of open ADS streams. */
  connections(): number {
    return this.streams.size;
  }

  private async shutdown(): Promise<void> {
    await this.init?.catch(() => undefined);
    for (const s of this.streams) s.end();
    const closed = new Promise<void>((res) => (this.net ? this.net.close(() => res()) : res()));
    const g = await this.grpcLoad?.catch(() => undefined);
    if (g) {
      await new Promise<void>((res) => {
        const force = setTimeout(() => {
          g.server.forceShutdown();
          res();
        }, 1000);
        g.server.tryShutdown(() => {
          clearTimeout(force);
          res();
        });
      });
      g.injector.destroy();
    }
    for (const s of this.sockets) s.destroy();
    await closed;
    if (this.socketPath) await rm(this.socketPath, { force: true });
  }

  private nextNonce = (): string => this.opts.nonce?.() ?? String(++this.nonceCounter);

  private serveSotw(call: AdsCall): void {
    const id = ++this.streamCounter;
    const machine = new SotwStream(this.nextNonce);
    const ignored = new Set<string>();
    let node = "";
    const send = (responses: ReturnType<SotwStream["onSnapshot"]>) => {
      for (const r of responses) {
        call.write(this.codec!.encodeResponse(r));
        this.metrics?.pushes.inc({ type: shortType(r.typeUrl) });
        this.log.debug(
          `local xDS: sent ${shortType(r.typeUrl)} version ${r.versionInfo} nonce ${r.nonce} (${r.resources.length} resources) to ${node || `stream ${id}`}`,
          ids({ type_url: r.typeUrl, stream: id }),
        );
      }
    };
    this.attach(call, id, "SotW", {
      push: (s) => send(machine.onSnapshot(s)),
      data: (b) => {
        const req = this.codec!.decodeRequest(b);
        node ||= req.nodeId;
        if (!this.served(req.typeUrl, id, ignored)) return;
        const step = machine.onRequest(req, this.snapshot());
        for (const e of step.events) this.event(e, node || `stream ${id}`);
        send(step.responses);
      },
    });
  }

  private serveDelta(call: AdsCall): void {
    const id = ++this.streamCounter;
    const machine = new DeltaStream(this.nextNonce);
    const ignored = new Set<string>();
    let node = "";
    const send = (responses: ReturnType<DeltaStream["onSnapshot"]>) => {
      for (const r of responses) {
        call.write(this.codec!.encodeDeltaResponse(r));
        this.metrics?.pushes.inc({ type: shortType(r.typeUrl) });
        this.log.debug(
          `local xDS: sent delta ${shortType(r.typeUrl)} nonce ${r.nonce}: ${r.resources.length} updated, ${r.removed.length} removed to ${node || `stream ${id}`}`,
          ids({ type_url: r.typeUrl, stream: id }),
        );
      }
    };
    this.attach(call, id, "Delta", {
      push: (s) => send(machine.onSnapshot(s)),
      data: (b) => {
        const req = this.codec!.decodeDeltaRequest(b);
        node ||= req.nodeId;
        if (!this.served(req.typeUrl, id, ignored)) return;
        const step = machine.onRequest(req, this.snapshot());
        for (const e of step.events) this.event(e, node || `stream ${id}`);
        send(step.responses);
      },
    });
  }

  private attach(call: AdsCall, id: number, kind: string, h: { push(s: Snapshot): void; data(b: Buffer): void }): void {
    const live: LiveStream = { push: h.push, end: () => call.end() };
    this.streams.add(live);
    this.log.debug(`local xDS: ${kind} stream ${id} opened`, ids({ stream: id }));
    const close = () => {
      if (this.streams.delete(live)) this.log.debug(`local xDS: ${kind} stream ${id} closed`, ids({ stream: id }));
    };
    const handle = (b: Buffer) => {
      try {
        h.data(b);
      } catch (e) {
        this.log.warn(`local xDS: ${kind} stream ${id}: bad request: ${errorMessage(e)}`, ids({ stream: id }));
        close();
        call.emit("error", { code: this.grpcSide!.mod.status.INVALID_ARGUMENT, details: `local xDS: cannot decode request: ${errorMessage(e)}` });
      }
    };
    // Before the first good load, requests wait (in order) rather than see an empty world.
    let waiting: Buffer[] | undefined;
    call.on("data", (b: Buffer) => {
      if (this.loadedOnce && !waiting) return handle(b);
      if (!waiting) {
        waiting = [];
        void this.loaded().then(() => {
          const queued = waiting!;
          waiting = undefined;
          for (const q of queued) if (this.streams.has(live)) handle(q);
        });
      }
      waiting.push(b);
    });
    call.on("end", () => {
      close();
      call.end();
    });
    call.on("error", close);
    call.on("cancelled", close);
  }

  /** Only the five file kinds are answered (NDS, PCDS, health reports... are not); logged once per stream. */
  private served(typeUrl: string, id: number, ignored: Set<string>): boolean {
    if (SERVED.has(typeUrl)) return true;
    if (!ignored.has(typeUrl)) {
      ignored.add(typeUrl);
      this.log.debug(`local xDS: stream ${id}: type ${typeUrl || "(none)"} is not served in local mode; not answering`, ids({ stream: id, type_url: typeUrl }));
    }
    return false;
  }

  private event(e: SotwEvent | DeltaEvent, who: string): void {
    const t = shortType(e.typeUrl);
    if (e.kind === "nack") {
      this.metrics?.nacks.inc({ type: t });
      const v = "version" in e ? ` version ${e.version}` : "";
      this.log.warn(`local xDS: ${who} rejected ${t}${v} (nonce ${e.nonce}): ${e.message}`);
    } else if (e.kind === "ack") this.log.debug(`local xDS: ${who} acked ${t} nonce ${e.nonce}`);
    else if (e.kind === "stale") this.log.debug(`local xDS: ${who} sent stale nonce ${e.nonce} for ${t}; ignored`);
    else this.log.debug(`local xDS: ${who} unsubscribed from ${t}`);
  }
}
