// One relayed ADS stream: a downstream call (Envoy) joined to a fresh upstream stream (istiod).
// The upstream stream is opened on the first complete request, not when the downstream stream
// opens: a client that opens and resets streams costs istiod nothing.
//
// Requests (small) are gathered whole, their type_url read, and forwarded as the same bytes; the
// first Listener request also triggers the agent's own subscriptions (NDS, PCDS) and the replay
// of the last health report. Responses are cut-through: the scanner decides a message's route from
// its first bytes, then a forwarded message's bytes go downstream as they arrive; internal types
// are gathered, handed to their sink and ACKed/NACKed upstream; other types are dropped with a
// log line. Each direction has its own backpressure (pause the source while the sink is full), and
// nothing in one direction ever waits on the other, so both sides pushing hard cannot deadlock.

import type { Logger } from "../lib/log.ts";
import type { LogLimiter } from "../lib/loglimit.ts";
import type { DownstreamCall, DownstreamHandlers } from "./downstream.ts";
import { FrameError, peekResponseType, requestTypeUrl } from "./frame.ts";
import { GrpcDeframer, MessageBuffer, grpcFrame } from "./grpcframe.ts";
import type { InternalHandler } from "./internal.ts";
import type { AgentRequest, XdsCodec } from "./messages.ts";
import { terminationType, type XdsMetrics } from "./metrics.ts";
import { Code, LISTENER_TYPE, routeOf, type GrpcStatus } from "./types.ts";
import type { Upstream, UpstreamStream } from "./upstream.ts";
import type { EcdsHook } from "../wasm/ecds.ts";
import type { StreamStats } from "./streamstats.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export interface RelayOptions {
  codec: XdsCodec;
  internal: ReadonlyMap<string, InternalHandler>;
  /** Subscriptions the agent adds on the first Listener request (NDS, PCDS). */
  initialRequests: readonly AgentRequest[];
  /** The last health report, replayed once initial requests went out. */
  lastHealth(): AgentRequest | undefined;
  maxRequestBytes: number;
  log: Logger;
  /** Per-stream lines go through this: a client churning streams must not flood the log. */
  logLimit: LogLimiter;
  metrics: XdsMetrics;
  onUpstreamConnected(): void;
  /** ECDS responses go through this (Wasm conversion) instead of straight to Envoy. */
  ecds?: EcdsHook;
  /** Per-type counters and ACK/NACK state for the operator's view. */
  stats?: StreamStats;
  /** The upstream stream ended (`established`: it had connected). */
  onUpstreamClosed?(status: GrpcStatus, established: boolean): void;
  /** Told the size of every chunk received from istiod (burst memory: burstmemory.ts). */
  received?: { count(bytes: number): void };
}

const EMPTY = new Uint8Array(0);

type ResponseState = "idle" | "deciding" | "forward" | "internal" | "drop" | "ecds";

export class StreamRelay {
  readonly done: Promise<void>;
  private resolveDone!: () => void;
  private upstream: UpstreamStream | undefined;
  private upstreamSource: Upstream | undefined;
  private ended = false;
  private initialSent = false;
  private readonly delta: boolean;
  private readonly lastAcked = new Map<string, string>();

  // request direction
  private reqBuf: MessageBuffer | undefined;
  private readonly reqDeframer: GrpcDeframer;
  // response direction
  private resState: ResponseState = "idle";
  /** The current response's 5-byte gRPC prefix (our own copy: see onResponseHeader). */
  private resHeader: Uint8Array = new Uint8Array(0);
  private resLength = 0;
  /** Body bytes gathered while the route is undecided past the first chunk, or for internal types. */
  private resBuf: MessageBuffer | undefined;
  private resType = "";
  private readonly resDeframer: GrpcDeframer;
  private downBlocked = false;
  private upBlocked = false;
  private closeAtBoundary: GrpcStatus | undefined;
  // ECDS: conversions run beside the relay; their results leave in arrival order, between messages
  private ecdsTail: Promise<void> = Promise.resolve();
  private readonly ecdsOut: Uint8Array[] = [];

  constructor(
    private readonly down: DownstreamCall,
    private readonly o: RelayOptions,
  ) {
    this.delta = down.delta;
    this.done = new Promise((r) => (this.resolveDone = r));
    this.reqDeframer = new GrpcDeframer({
      onHeader: (compressed, length) => this.onRequestHeader(compressed, length),
      onBody: (b) => this.reqBuf?.append(b),
      onEnd: () => this.onRequestEnd(),
    });
    this.resDeframer = new GrpcDeframer({
      onHeader: (compressed, length, header) => this.onResponseHeader(compressed, length, header),
      onBody: (b) => this.onResponseBody(b),
      onEnd: () => this.onResponseEnd(),
    });
  }

  /** Attach to the downstream call; the upstream stream opens on the first request. */
  start(upstream: Upstream): DownstreamHandlers {
    this.upstreamSource = upstream;
    return {
      onData: (chunk) => this.onDownstreamData(chunk),
      onDrain: () => {
        if (this.upBlocked) {
          this.upBlocked = false;
          this.upstream?.resume();
        }
      },
      onClientGone: (ended) => this.onClientGone(ended),
    };
  }

  private openUpstream(): UpstreamStream {
    const upstream = this.upstreamSource!;
    return upstream.open(
      { path: this.down.path, delta: this.delta },
      {
        onConnected: () => {
          this.o.logLimit.log(this.o.log, "info", "upstream-connected", `connected to upstream XDS server: ${upstream.describe}`);
          this.o.onUpstreamConnected();
        },
        onData: (chunk) => this.onUpstreamData(chunk),
        onDrain: () => {
          if (this.downBlocked) {
            this.downBlocked = false;
            this.down.resume();
          }
        },
        onClose: (status, established) => this.onUpstreamClose(status, established),
        ...(this.down.releasedBytes ? { release: { mark: () => this.down.written ?? 0, released: () => this.down.releasedBytes!() } } : {}),
      },
    );
  }

  /** Send one of the agent's own requests upstream (health reports; ACK/NACK use it too). */
  sendAgentRequest(r: AgentRequest): void {
    if (this.ended) return;
    this.writeUp(grpcFrame(this.o.codec.encodeRequest(r, this.delta)));
  }

  /** Health reports go out only after the initial requests of this stream (Istio's order). */
  sendHealth(r: AgentRequest): void {
    if (this.initialSent) this.sendAgentRequest(r);
  }

  /**
   * End at a message boundary (agent shutdown): a response being forwarded is let through to its
   * last byte first, so Envoy never gets half a message followed by trailers; `maxWaitMs` bounds it.
   */
  shutdown(status: GrpcStatus, maxWaitMs: number): Promise<void> {
    if (this.ended) return this.done;
    if (this.resState === "idle" && this.resDeframer.idle) {
      this.close(status);
      return this.done;
    }
    this.closeAtBoundary = status;
    const t = setTimeout(() => this.close(status), maxWaitMs);
    t.unref?.();
    void this.done.then(() => clearTimeout(t));
    return this.done;
  }

  /** End both sides: the downstream call gets `status`, the upstream stream is cancelled. */
  close(status: GrpcStatus): void {
    if (this.ended) return;
    this.ended = true;
    this.down.finish(status);
    this.upstream?.close();
    this.resolveDone();
  }

  // ---- downstream -> upstream ----

  private onDownstreamData(chunk: Uint8Array): void {
    if (this.ended) return;
    // Envoy asks (an ACK, most often) once what it was sent has arrived: istiod's chunks behind it
    // may be freed now rather than at the next collection (chunkrelease.ts).
    this.upstream?.release?.();
    this.o.metrics.bytesUpstream.inc(chunk.length);
    try {
      this.reqDeframer.push(chunk);
    } catch (e) {
      this.rejectRequest(e as Error);
    }
  }

  private onRequestHeader(compressed: boolean, length: number): void {
    if (compressed) throw new FrameError("compressed request messages are not supported (grpc-encoding identity only)", 0);
    if (length > this.o.maxRequestBytes) {
      this.close({
        code: Code.RESOURCE_EXHAUSTED,
        message: `request of ${length} bytes exceeds the limit of ${this.o.maxRequestBytes} (ISTIO_GPRC_MAXRECVMSGSIZE)`,
      });
      return;
    }
    this.o.metrics.recvMax.record(length);
    this.reqBuf = new MessageBuffer(length);
  }

  private onRequestEnd(): void {
    if (this.ended || !this.reqBuf) return;
    const msg = this.reqBuf.view();
    this.reqBuf = undefined;
    const typeUrl = requestTypeUrl(msg, this.delta);
    this.o.metrics.requests.inc();
    this.o.stats?.request(typeUrl, msg);
    if (this.o.ecds && typeUrl === this.o.ecds.typeUrl) this.o.ecds.observeRequest(msg, this.delta);
    this.writeUp(grpcFrame(msg));
    if (typeUrl === LISTENER_TYPE && !this.initialSent) {
      this.initialSent = true;
      for (const r of this.o.initialRequests) this.sendAgentRequest(r);
      const h = this.o.lastHealth();
      if (h) this.sendAgentRequest(h);
    }
  }

  private rejectRequest(e: Error): void {
    const what = e instanceof FrameError ? `malformed ${this.delta ? "DeltaDiscoveryRequest" : "DiscoveryRequest"} from Envoy: ${e.message}` : e.message;
    this.o.logLimit.log(this.o.log, "warn", "malformed-request", what);
    this.close({ code: Code.INVALID_ARGUMENT, message: what });
  }

  private writeUp(bytes: Uint8Array): void {
    this.upstream ??= this.openUpstream();
    if (!this.upstream.write(bytes) && !this.downBlocked) {
      this.downBlocked = true;
      this.down.pause();
    }
  }

  private onClientGone(ended: boolean): void {
    if (this.ended) return;
    const status: GrpcStatus = ended ? { code: Code.OK, message: "" } : { code: Code.CANCELLED, message: "downstream went away" };
    this.o.metrics.envoyConnectionTerminations.inc({ type: terminationType(status) });
    this.o.logLimit.log(this.o.log, "info", "downstream-gone", `downstream ${ended ? "closed its stream" : "went away"}, closing upstream stream`);
    this.close(status);
  }

  // ---- upstream -> downstream ----

  private onUpstreamData(chunk: Uint8Array): void {
    if (this.ended) return;
    this.o.received?.count(chunk.length);
    try {
      this.resDeframer.push(chunk);
    } catch (e) {
      const msg = `malformed ${this.delta ? "DeltaDiscoveryResponse" : "DiscoveryResponse"} from istiod: ${errorMessage(e)}`;
      this.o.log.error(msg);
      this.close({ code: Code.INTERNAL, message: msg });
    }
  }

  private onResponseHeader(compressed: boolean, length: number, header: Uint8Array): void {
    if (compressed) throw new FrameError("compressed response message (the agent asked for identity encoding)", 0);
    // A copy (5 bytes): the views of istiod's chunks must all be among the bytes written to Envoy
    // (chunkrelease.ts), and a prefix kept until the route is decided would not be.
    this.resHeader = header.slice();
    this.resLength = length;
    this.resBuf = undefined; // made only if the first chunk does not decide the route
    this.resState = "deciding";
    this.o.metrics.responses.inc();
  }

  private onResponseBody(b: Uint8Array): void {
    switch (this.resState) {
      case "forward":
        this.writeDown(b);
        return;
      case "internal":
      case "ecds":
        this.gather(b);
        return;
      case "drop":
        return;
      case "deciding": {
        if (!this.resBuf) {
          // The common case: the route is known from the first chunk alone, which then goes on
          // as it is (no copy); only when it is not are the bytes gathered until it is.
          const t = peekResponseType(b, b.length, this.resLength, this.delta);
          if (t !== null) return this.decide(t, b);
          this.gather(b);
          return;
        }
        const buf = this.resBuf;
        buf.append(b);
        const t = peekResponseType(buf.view(), buf.length, buf.total, this.delta);
        if (t !== null) this.decide(t, undefined);
        return;
      }
    }
  }

  private gather(b: Uint8Array): void {
    (this.resBuf ??= new MessageBuffer(this.resLength)).append(b);
  }

  /** Route the current response; `first` is its first chunk when nothing was gathered yet. */
  private decide(typeUrl: string, first: Uint8Array | undefined): void {
    this.resType = typeUrl;
    this.o.stats?.response(typeUrl, this.resLength);
    const route = this.o.ecds && typeUrl === this.o.ecds.typeUrl ? "ecds" : routeOf(typeUrl, this.o.internal);
    this.resState = route;
    if (route === "forward") {
      this.writeDown(this.resHeader, first ?? this.resBuf?.view());
      this.resBuf = undefined;
    } else if (route === "drop") {
      this.o.log.error(`dropping response of type "${typeUrl}": not an Envoy type, not handled by the agent`, ids({ type_url: typeUrl }));
      this.resBuf = undefined;
    } else if (first) this.gather(first); // internal and ECDS messages are handled whole
  }

  private onResponseEnd(): void {
    if (this.resState === "deciding") {
      const buf = this.resBuf;
      this.decide((buf ? peekResponseType(buf.view(), buf.length, buf.total, this.delta) : peekResponseType(EMPTY, 0, 0, this.delta)) ?? "", undefined);
    }
    if (this.resState === "internal") this.handleInternal(this.resBuf?.view() ?? Buffer.alloc(0));
    if (this.resState === "ecds") this.handleEcds(Buffer.from(this.resBuf?.view() ?? EMPTY));
    this.resState = "idle";
    this.resBuf = undefined;
    this.flushEcds();
    if (this.closeAtBoundary) this.close(this.closeAtBoundary);
  }

  private handleInternal(msg: Buffer): void {
    const resp = this.o.codec.decodeResponse(msg, this.delta);
    if (resp.resources.length === 0) return; // Istio: empty internal responses need nothing
    const typeUrl = resp.typeUrl || this.resType;
    const handler = this.o.internal.get(this.resType)!;
    try {
      handler(resp.resources[0]!.value);
      this.lastAcked.set(typeUrl, resp.versionInfo);
      this.sendAgentRequest({ typeUrl, versionInfo: resp.versionInfo, nonce: resp.nonce });
      this.o.stats?.agentAnswer(typeUrl, resp.versionInfo, resp.nonce);
    } catch (e) {
      const message = errorMessage(e);
      this.o.log.warn(
        `rejecting ${typeUrl} version ${resp.versionInfo} (nonce ${resp.nonce}): ${message}`,
        ids({ type_url: typeUrl, version: resp.versionInfo, nonce: resp.nonce }),
      );
      this.sendAgentRequest({ typeUrl, versionInfo: this.lastAcked.get(typeUrl) ?? "", nonce: resp.nonce, error: { code: Code.INTERNAL, message } });
      this.o.stats?.agentAnswer(typeUrl, this.lastAcked.get(typeUrl) ?? "", resp.nonce, { reason: message, code: Code.INTERNAL });
    }
  }

  /** Convert beside the relay; results are queued in arrival order and written between messages. */
  private handleEcds(msg: Buffer): void {
    const result = this.o.ecds!.convert(msg, this.delta);
    this.ecdsTail = this.ecdsTail
      .then(() => result)
      .then((r) => {
        if (this.ended) return;
        if (r.kind === "nack") this.sendAgentRequest(r.request);
        else {
          this.ecdsOut.push(grpcFrame(r.message));
          this.flushEcds();
        }
      })
      .catch((e) => this.o.log.error(`ECDS conversion failed: ${errorMessage(e)}`));
  }

  private flushEcds(): void {
    if (this.ended || this.resState === "forward") return; // never inside a message being cut through
    for (let m = this.ecdsOut.shift(); m; m = this.ecdsOut.shift()) this.writeDown(m);
  }

  /** To Envoy: `bytes`, then `more` when given (a message's prefix and first chunk, each as it is). */
  private writeDown(bytes: Uint8Array, more?: Uint8Array): void {
    this.o.metrics.bytesDownstream.inc(bytes.length + (more?.length ?? 0));
    let ok: boolean;
    if (!more || more.length === 0) ok = this.down.write(bytes);
    else if (this.down.writev) ok = this.down.writev(bytes, more);
    else {
      // Both, always: a call that is full still queues what it is given (false = wait for onDrain).
      const first = this.down.write(bytes);
      ok = this.down.write(more) && first;
    }
    if (!ok && !this.upBlocked) {
      this.upBlocked = true;
      this.upstream?.pause();
    }
  }

  private onUpstreamClose(status: GrpcStatus, established: boolean): void {
    if (this.ended) return;
    this.o.onUpstreamClosed?.(status, established);
    if (!established) this.o.metrics.istiodConnectionFailures.inc();
    else this.o.metrics.istiodConnectionTerminations.inc({ type: terminationType(status) });
    let s = status;
    if (this.resState !== "idle" && s.code === Code.OK) s = { code: Code.INTERNAL, message: "istiod ended the stream in the middle of a message" };
    // istiod (or its proxy) cancelling our stream means it went away: Envoy must reconnect with
    // backoff, which it does on UNAVAILABLE; CANCELLED reads as "Envoy itself gave up".
    if (s.code === Code.CANCELLED) s = { code: Code.UNAVAILABLE, message: s.message || "istiod cancelled the stream" };
    if (s.code === Code.OK) this.o.logLimit.log(this.o.log, "info", "upstream-ended", "upstream stream ended by istiod");
    else
      this.o.logLimit.log(this.o.log, "warn", "upstream-failed", `upstream ${established ? "terminated" : "connection failed"}: ${s.message} (code ${s.code})`);
    this.close(s);
  }
}
