// What the DNS proxy answers to one packet (Istio's ServeDNS), independent of sockets: parse,
// count, answer from the table when the proxy owns the name, else forward. Table hits return
// synchronously (no promise on the hot path); forwarded queries return a promise.

import type { Logger } from "../lib/log.ts";
import type { Forwarder, Protocol } from "./forwarder.ts";
import type { LookupTable } from "./lookup.ts";
import type { DnsMetrics } from "./metrics.ts";
import { fitReply, localAnswer, parseQuery, rcodeReply, replySizeLimit, RCODE_FORMERR, RCODE_NOTIMP, RCODE_SERVFAIL, type Query } from "./wire.ts";

export type Reply = Uint8Array | undefined;

export interface DnsHandlerOptions {
  forwarder: Forwarder;
  metrics: DnsMetrics;
  log: Logger;
  /** Forward while no table has arrived (`:53` as root) instead of answering SERVFAIL. */
  respondBeforeSync: boolean;
  /** Clock in milliseconds for the upstream latency histogram. */
  now?: () => number;
  /** Source of randomness for the round-robin order of addresses. */
  random?: () => number;
}

export class DnsHandler {
  /** The current table; undefined until the first NameTable arrives. */
  table: LookupTable | undefined;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly opts: DnsHandlerOptions) {
    this.now = opts.now ?? (() => performance.now());
    this.random = opts.random ?? Math.random;
  }

  /** The reply to send (undefined: drop the packet). */
  handle(bytes: Uint8Array, protocol: Protocol): Reply | Promise<Reply> {
    const parsed = parseQuery(bytes);
    if (!parsed.ok) {
      this.opts.metrics.dropped.inc({ reason: parsed.reason });
      return undefined;
    }
    const q = parsed.query;
    this.opts.metrics.requests.inc();
    if (q.opcode !== 0) return rcodeReply(q, RCODE_NOTIMP);
    if (q.qdcount > 1) return rcodeReply(q, RCODE_FORMERR);
    if (!q.question) return rcodeReply(q, RCODE_SERVFAIL);
    const table = this.table;
    if (!table) {
      if (this.opts.respondBeforeSync) return this.forward(q, protocol);
      if (this.opts.log.debugEnabled()) this.opts.log.debug("dns request before lookup table is loaded", { host: q.question.key });
      return rcodeReply(q, RCODE_SERVFAIL);
    }
    const key = q.question.key;
    const found = key === undefined ? undefined : table.lookup(q.question.qtype, key);
    if (!found) return this.forward(q, protocol);
    const addrs = found.addresses.length > 1 ? this.shuffle(found.addresses) : found.addresses;
    return localAnswer(q, q.question.qtype, { ...found, addresses: addrs }, replySizeLimit(protocol, q));
  }

  private shuffle<T>(xs: readonly T[]): T[] {
    const out = [...xs];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.random() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  private async forward(q: Query, protocol: Protocol): Promise<Reply> {
    const m = this.opts.metrics;
    m.upstreamRequests.inc();
    const start = this.now();
    const reply = await this.opts.forwarder.forward(protocol, q.bytes);
    m.upstreamDuration.observe((this.now() - start) / 1000);
    if (!reply) {
      m.upstreamFailures.inc();
      return rcodeReply(q, RCODE_SERVFAIL);
    }
    return fitReply(q, reply, replySizeLimit(protocol, q));
  }
}
