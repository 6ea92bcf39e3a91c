// The local xDS server: Envoy's AggregatedDiscoveryService (SotW and Delta) over plaintext gRPC
// on a Unix socket or a loopback port, serving the resources of a local file (XdsFileSource).
// The agent runs it in-process and points its xDS relay at address() as if it were istiod; any
// other xDS client (Envoy, grpc-js-xds) can dial it directly too. Each stream is a pure state
// machine (SotwStream / DeltaStream); this file only moves bytes, logs and counts.
//
// It runs on the agent's own h2c gRPC server (src/xds/grpcserver.ts, the XDS and SDS sockets'),
// with no peer check. start() only binds: every connection gets its HTTP/2 session from the first
// byte, and a stream's requests are held by that stream (in order) until the server can answer
// them: the file loads right after start, off the agent's start path (after `initAfter`), and
// requests before the first good load wait for it. This process works at the protobuf wire level
// only (codec.ts): the file is turned into encoded resources by the injected Converter (in the
// agent, a short-lived copy of itself: converter.ts), so serving evaluates no yaml, protobufjs or
// schema. Until then the readiness
// blocker `local xDS file loaded` is pending, carrying the file's error if it is bad; fixing the
// file clears it (the file is watched from the start).

import { resolve } from "node:path";
import { FailureReport, type Component } from "../lib/component.ts";
import type { Logger } from "../lib/log.ts";
import { counter, type Registry } from "../lib/metrics.ts";
import { PeerAuthorizer } from "../lib/peerauth.ts";
import { READINESS, type Blocker, type Readiness } from "../lib/readiness.ts";
import { GrpcServerCall } from "../xds/grpccall.ts";
import { grpcHeader } from "../xds/grpcframe.ts";
import { readRequests } from "../xds/grpcrequests.ts";
import { UnixGrpcServer, type GrpcMethod } from "../xds/grpcserver.ts";
import type { H2Stream } from "../xds/h2/stream.ts";
import { ADS_SERVICE, Code, DELTA_PATH, SOTW_PATH } from "../xds/types.ts";
import { adsCodec } from "./codec.ts";
import { inProcessConverter, type Converter } from "./converter.ts";
import { DeltaStream, type DeltaEvent } from "./delta.ts";
import { LocalXdsError } from "./errors.ts";
import { RESOURCE_KINDS, shortType, typeUrlOf } from "./kinds.ts";
import { EMPTY_SNAPSHOT, type Snapshot } from "./snapshot.ts";
import { SotwStream, type SotwEvent } from "./sotw.ts";
import { XdsFileSource, type ReloadResult } from "./source.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export { ADS_SERVICE };

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
  /** Load the file once this resolves (the agent's start path is over); default: right after start(). */
  initAfter?: Promise<unknown>;
  /** The file's bytes to encoded resources; default: in this process (inProcessConverter). The agent's: childConverter. */
  convert?: Converter;
}

/** grpc's default receive limit (grpc-js's server, which served this before: 4 MiB); responses have none. */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** How long shutdown lets the last responses and the streams' trailers reach the clients. */
const SHUTDOWN_GRACE_MS = 1000;
/** Clients are not checked (grpc-js's server, which served this before, checked none). */
const ANY_PEER = new PeerAuthorizer("*", 0);

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

interface LiveStream {
  push(s: Snapshot): void;
  end(): void;
}

/** What a stream kind (SotW, Delta) does with a decoded request and a new snapshot. */
interface StreamLogic {
  /** Decode, step the state machine, send: throws on a request that cannot be decoded. */
  request(bytes: Buffer, send: (frame: Buffer) => boolean): void;
  snapshot(s: Snapshot, send: (frame: Buffer) => boolean): void;
}

export class LocalXdsServer implements Component {
  readonly name = "localxds";
  /** Bun's listener reports no accept errors after start; kept for the component contract. */
  private readonly failure = new FailureReport();
  /** The listener died after start. */
  readonly failed = this.failure.failed;
  private readonly codec = adsCodec();
  private source?: XdsFileSource;
  private readonly streams = new Set<LiveStream>();
  private server?: UnixGrpcServer;
  private readonly log: Logger;
  private readonly cwd: string;
  private readonly blocker?: Blocker;
  private bound = "";
  private done: Promise<void> = Promise.resolve();
  private init?: Promise<void>;
  private loadedOnce = false;
  private readonly loadWaiters: (() => void)[] = [];
  private nonceCounter = 0;
  private streamCounter = 0;
  private readonly metrics;
  private readonly methods: ReadonlyMap<string, GrpcMethod> = new Map<string, GrpcMethod>([
    [SOTW_PATH, (stream, path) => this.serveSotw(stream, path)],
    [DELTA_PATH, (stream, path) => this.serveDelta(stream, path)],
  ]);

  constructor(private readonly opts: LocalXdsServerOptions) {
    this.log = opts.log;
    this.cwd = opts.cwd ?? process.cwd();
    this.blocker = opts.readiness?.block(READINESS.localXdsLoaded);
    const reg = opts.registry;
    this.metrics = reg
      ? {
          reloads: counter(
            reg,
            "istio_agent_local_xds_reloads",
            "Reloads of the local xDS file, by result (ok, unchanged, rejected; failed: the converter failed, not the file)",
            ["result"],
          ),
          pushes: counter(reg, "istio_agent_local_xds_pushes", "xDS responses sent by the local xDS server, by type", ["type"]),
          nacks: counter(reg, "istio_agent_local_xds_nacks", "xDS responses rejected by clients of the local xDS server, by type", ["type"]),
        }
      : undefined;
  }

  /** Bind and return; the file loads right after (see loaded()). */
  async start(signal: AbortSignal): Promise<void> {
    const socketPath = unixSocketPath(this.opts.listen, this.cwd);
    const hp = socketPath ? undefined : hostPort(this.opts.listen);
    const cannot = (why: string, cause?: unknown) =>
      new LocalXdsError(`local xDS: cannot listen on ${this.opts.listen}: ${why}`, this.opts.path, undefined, cause ? { cause } : undefined);
    if (!socketPath && !hp) throw cannot("not unix:<path> or <host>:<port>");
    const server = new UnixGrpcServer({
      socketPath: socketPath ?? "",
      authorizer: ANY_PEER,
      log: this.log,
      name: "local xDS",
      route: (p) => this.methods.get(p),
      unknownMethodMessage: (p) => `The server does not implement the method ${p}`,
      onRejected: () => {}, // every peer is allowed
      listenError: (_message, cause) => cannot(errorMessage(cause), cause),
      socketMode: 0o600,
      // Clients' keepalive pings are not policed (the relay's interval is GRPC_KEEPALIVE_INTERVAL).
      minPingIntervalMs: 0,
    });
    if (socketPath) {
      server.listen();
      this.bound = `unix://${socketPath}`;
    } else {
      const port = server.listenTcp(hp!.host, hp!.port);
      this.bound = this.opts.listen.replace(/:0$/, `:${port}`);
    }
    this.server = server;
    this.done = new Promise<void>((res) => signal.addEventListener("abort", () => void this.shutdown().then(res), { once: true }));
    this.init = (this.opts.initAfter ?? new Promise<void>((res) => setTimeout(res, 0)))
      .then(() => this.initialise(signal))
      .catch((e: Error) => {
        this.log.error(`local xDS: cannot serve ${this.opts.path}: ${e.message}`, ids({ path: this.opts.path }));
        this.blocker?.fail(e.message);
      });
  }

  /** Load the file, watch it. A bad file is logged and blocks readiness. */
  private async initialise(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const source = new XdsFileSource({
      path: resolve(this.cwd, this.opts.path),
      displayPath: this.opts.path,
      convert: this.opts.convert ?? inProcessConverter(),
      signal,
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

  /** Every stream ends OK after what it has queued; connections get GOAWAY and close once that is out (or after the grace). */
  private async shutdown(): Promise<void> {
    await this.init?.catch(() => undefined);
    for (const s of [...this.streams]) s.end();
    await this.server?.close(SHUTDOWN_GRACE_MS);
  }

  private nextNonce = (): string => this.opts.nonce?.() ?? String(++this.nonceCounter);

  private serveSotw(stream: H2Stream, path: string): void {
    const id = ++this.streamCounter;
    const machine = new SotwStream(this.nextNonce);
    const ignored = new Set<string>();
    let node = "";
    const sendAll = (responses: ReturnType<SotwStream["onSnapshot"]>, send: (frame: Buffer) => boolean) => {
      for (const r of responses) {
        send(this.codec.encodeResponse(r));
        this.metrics?.pushes.inc({ type: shortType(r.typeUrl) });
        this.log.debug(
          `local xDS: sent ${shortType(r.typeUrl)} version ${r.versionInfo} nonce ${r.nonce} (${r.resources.length} resources) to ${node || `stream ${id}`}`,
          ids({ type_url: r.typeUrl, stream: id }),
        );
      }
    };
    this.attach(stream, path, id, "SotW", {
      snapshot: (s, send) => sendAll(machine.onSnapshot(s), send),
      request: (b, send) => {
        const req = this.codec.decodeRequest(b);
        node ||= req.nodeId;
        if (!this.served(req.typeUrl, id, ignored)) return;
        const step = machine.onRequest(req, this.snapshot());
        for (const e of step.events) this.event(e, node || `stream ${id}`);
        sendAll(step.responses, send);
      },
    });
  }

  private serveDelta(stream: H2Stream, path: string): void {
    const id = ++this.streamCounter;
    const machine = new DeltaStream(this.nextNonce);
    const ignored = new Set<string>();
    let node = "";
    const sendAll = (responses: ReturnType<DeltaStream["onSnapshot"]>, send: (frame: Buffer) => boolean) => {
      for (const r of responses) {
        send(this.codec.encodeDeltaResponse(r));
        this.metrics?.pushes.inc({ type: shortType(r.typeUrl) });
        this.log.debug(
          `local xDS: sent delta ${shortType(r.typeUrl)} nonce ${r.nonce}: ${r.resources.length} updated, ${r.removed.length} removed to ${node || `stream ${id}`}`,
          ids({ type_url: r.typeUrl, stream: id }),
        );
      }
    };
    this.attach(stream, path, id, "Delta", {
      snapshot: (s, send) => sendAll(machine.onSnapshot(s), send),
      request: (b, send) => {
        const req = this.codec.decodeDeltaRequest(b);
        node ||= req.nodeId;
        if (!this.served(req.typeUrl, id, ignored)) return;
        const step = machine.onRequest(req, this.snapshot());
        for (const e of step.events) this.event(e, node || `stream ${id}`);
        sendAll(step.responses, send);
      },
    });
  }

  /**
   * One ADS call: requests in order (held until the first good load), responses with
   * back-pressure. A client that does not read: its window is no longer credited (so it stops
   * sending requests) and new snapshots are not queued behind what it has not read; once its
   * responses drain it gets the latest snapshot's differences (nothing in between).
   */
  private attach(stream: H2Stream, path: string, id: number, kind: string, logic: StreamLogic): void {
    const call = new GrpcServerCall(stream, path);
    let blocked = false;
    let behind: Snapshot | undefined;
    const send = (frame: Buffer): boolean => {
      if (call.writev(grpcHeader(frame.length), frame)) return true;
      if (!blocked) call.pause();
      blocked = true;
      return false;
    };
    const live: LiveStream = {
      push: (s) => {
        if (blocked) behind = s;
        else logic.snapshot(s, send);
      },
      end: () => {
        close();
        call.finish({ code: Code.OK, message: "" });
      },
    };
    this.streams.add(live);
    this.log.debug(`local xDS: ${kind} stream ${id} opened`, ids({ stream: id }));
    const close = () => {
      if (this.streams.delete(live)) this.log.debug(`local xDS: ${kind} stream ${id} closed`, ids({ stream: id }));
    };
    const handle = (b: Buffer) => {
      try {
        logic.request(b, send);
      } catch (e) {
        this.log.warn(`local xDS: ${kind} stream ${id}: bad request: ${errorMessage(e)}`, ids({ stream: id }));
        close();
        call.finish({ code: Code.INVALID_ARGUMENT, message: `local xDS: cannot decode request: ${errorMessage(e)}` });
      }
    };
    // Before the first good load, requests wait (in order) rather than see an empty world; the
    // client's window is not credited meanwhile, so what waits is bounded by it.
    let waiting: Buffer[] | undefined;
    readRequests(stream, call, MAX_REQUEST_BYTES, {
      onMessage: (b) => {
        if (!this.streams.has(live)) return;
        if (this.loadedOnce && !waiting) return handle(b);
        if (!waiting) {
          waiting = [];
          call.pause();
          void this.loaded().then(() => {
            const queued = waiting!;
            waiting = undefined;
            if (!blocked) call.resume();
            for (const q of queued) if (this.streams.has(live)) handle(q);
          });
        }
        waiting.push(b);
      },
      onEnd: () => {
        close();
        call.finish({ code: Code.OK, message: "" });
      },
      onGone: close,
      onDrain: () => {
        if (!blocked) return;
        blocked = false;
        call.resume();
        const s = behind;
        behind = undefined;
        if (s && this.streams.has(live)) logic.snapshot(s, send);
      },
    });
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
