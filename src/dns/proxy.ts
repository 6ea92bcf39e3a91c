// The DNS proxy component: sockets from server.ts, answers from handler.ts, the table from NDS
// (NameTableSink) or set directly (tests). Readiness is blocked on `dns table received` until
// the first table arrives.

import type { Component } from "../lib/component.ts";
import type { NameTableSink } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import { READINESS, type Blocker, type Readiness } from "../lib/readiness.ts";
import { buildAlternateHosts, type ProxyDomain } from "./althosts.ts";
import { Forwarder, type UpstreamTransport } from "./forwarder.ts";
import { DnsHandler } from "./handler.ts";
import { buildLookupTable } from "./lookup.ts";
import { dnsMetrics } from "./metrics.ts";
import { nameTableCodec, type NameTable, type NameTableCodec } from "./nametable.ts";
import { ndszTable, type NameTableJson } from "./ndsz.ts";
import type { HostPort } from "./resolvconf.ts";
import { listen, type BoundAddress, type DnsListeners } from "./server.ts";
import { SocketTransport } from "./transport.ts";
import { systemClock, type Clock } from "../lib/clock.ts";
import { DEFAULT_LOG_LIMIT, LogLimiter } from "../lib/loglimit.ts";

/** Istio's readiness message while the table is missing. */
export const DNS_NOT_READY_MESSAGE = "istio DNS capture is turned ON and DNS lookup table is not ready yet";

export interface DnsProxyOptions {
  /** Addresses to bind, each with UDP and TCP (port 0: one ephemeral port shared by both). */
  listen: HostPort[];
  /** Upstream resolvers (resolv.conf nameservers at port 53 in production). */
  upstreams: HostPort[];
  /** resolv.conf search list; the first entry drives the CNAME short-cut. */
  search: string[];
  proxyDomain: ProxyDomain;
  respondBeforeSync: boolean;
  forwardParallel: boolean;
  forwardTimeoutMs: number;
  log: Logger;
  registry: Registry;
  readiness?: Readiness;
  transport?: UpstreamTransport;
  random?: () => number;
  now?: () => number;
  /** Wall-clock milliseconds for the operator's view (default: the system clock). */
  wallClock?: () => number;
  /** Timers of the TCP bounds and of the log limit's end-of-window reports. */
  clock?: Pick<Clock, "timer">;
  tcpIdleMs?: number;
  tcpQueryMs?: number;
}

export class DnsProxy implements Component, NameTableSink {
  readonly name = "dns";
  private readonly handler: DnsHandler;
  private readonly blocker: Blocker | undefined;
  private codec: NameTableCodec | undefined;
  private nameTable: NameTable | undefined;
  private listeners: DnsListeners | undefined;
  private done: Promise<void> = Promise.resolve();
  private updates = 0;
  private lastUpdateMs: number | undefined;

  private readonly sockets: SocketTransport | undefined;
  private readonly logLimit: LogLimiter;

  constructor(private readonly opts: DnsProxyOptions) {
    if (!opts.transport) this.sockets = new SocketTransport();
    const clock = opts.clock ?? systemClock;
    this.logLimit = new LogLimiter({ ...DEFAULT_LOG_LIMIT, now: opts.now ?? (() => performance.now()), timer: clock.timer });
    const forwarder = new Forwarder({
      upstreams: opts.upstreams,
      parallel: opts.forwardParallel,
      timeoutMs: opts.forwardTimeoutMs,
      transport: opts.transport ?? this.sockets!,
      log: opts.log,
      logLimit: this.logLimit,
      random: opts.random,
    });
    this.handler = new DnsHandler({
      forwarder,
      metrics: dnsMetrics(opts.registry),
      log: opts.log,
      respondBeforeSync: opts.respondBeforeSync,
      now: opts.now,
      random: opts.random,
    });
    this.blocker = opts.readiness?.block(READINESS.dnsTable);
    this.blocker?.fail(DNS_NOT_READY_MESSAGE);
  }

  async start(signal: AbortSignal): Promise<void> {
    const l = await listen(this.opts.listen, (b, p) => this.handler.handle(b, p), this.opts.log, {
      tcpIdleMs: this.opts.tcpIdleMs,
      tcpQueryMs: this.opts.tcpQueryMs,
      timer: (this.opts.clock ?? systemClock).timer,
      logLimit: this.logLimit,
    });
    this.listeners = l;
    this.opts.log.debug("initialized DNS", {
      search: this.opts.search,
      servers: this.opts.upstreams.map((u) => `${u.host}:${u.port}`),
    });
    this.done = new Promise((resolve) => {
      const stop = () => {
        l.close();
        this.sockets?.close();
        this.logLimit.close();
        resolve();
      };
      if (signal.aborted) stop();
      else signal.addEventListener("abort", stop, { once: true });
    });
  }

  stopped(): Promise<void> {
    return this.done;
  }

  /** Bound sockets (after start). */
  addresses(): BoundAddress[] {
    return this.listeners?.addresses ?? [];
  }

  /** NameTableSink: a serialized istio.networking.nds.v1.NameTable from NDS. Throws when malformed. */
  updateNameTable(resource: Uint8Array): void {
    this.codec ??= nameTableCodec();
    this.setTable(this.codec.decode(resource));
  }

  /** Replace the table (NDS always sends the whole table). */
  setTable(nt: NameTable): void {
    const { entries, skipped } = buildAlternateHosts(nt, this.opts.proxyDomain);
    if (skipped.length) this.opts.log.debug("name table entries without a valid IP ignored", { hosts: skipped });
    this.handler.table = buildLookupTable(entries, this.opts.search);
    this.nameTable = nt;
    this.updates++;
    this.lastUpdateMs = (this.opts.wallClock ?? systemClock.now)();
    this.blocker?.clear();
    this.opts.log.debug(`updated lookup table with ${this.handler.table.size} hosts`);
  }

  /** Read-only view for the operator: the lookup table's size and when NDS last replaced it (wallClock ms). */
  snapshot(): { hosts: number; updates: number; lastUpdateMs?: number } {
    return { hosts: this.handler.table?.size ?? 0, updates: this.updates, ...(this.lastUpdateMs !== undefined ? { lastUpdateMs: this.lastUpdateMs } : {}) };
  }

  isReady(): boolean {
    return this.handler.table !== undefined;
  }

  /** `/debug/ndsz` body, or undefined before the first table (the status server answers 404 `{}`). */
  ndsz(): NameTableJson | undefined {
    return this.nameTable ? ndszTable(this.nameTable, this.opts.proxyDomain) : undefined;
  }
}
