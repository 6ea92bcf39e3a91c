// Forwarding to the upstream resolvers, as Istio does: over the query's protocol, each attempt
// bounded by DNS_FORWARD_TIMEOUT, sequentially over a shuffled copy of the list until one
// answers, or to all at once with DNS_FORWARD_PARALLEL (first answer wins). A reply that is not
// a well-formed answer to the query counts as that upstream failing. The I/O sits behind
// UpstreamTransport so tests can drive it.

import * as packet from "dns-packet";
import type { Logger } from "../lib/log.ts";
import { LogLimiter } from "../lib/loglimit.ts";
import { joinHostPort, type HostPort } from "./resolvconf.ts";
import { errorMessage } from "../lib/errors.ts";

export type Protocol = "udp" | "tcp";

export interface UpstreamTransport {
  /**
   * Send `query` to `upstream` and resolve with the first reply carrying the query's ID.
   * Rejects on error or after `timeoutMs`; stops early (rejecting) when `signal` aborts.
   */
  exchange(protocol: Protocol, upstream: HostPort, query: Uint8Array, timeoutMs: number, signal?: AbortSignal): Promise<Uint8Array>;
}

export interface ForwarderOptions {
  upstreams: HostPort[];
  parallel: boolean;
  timeoutMs: number;
  transport: UpstreamTransport;
  log: Logger;
  /** Rate limit of the per-query failure lines (a flood of failing queries costs a few lines, counted); none when omitted. */
  logLimit?: LogLimiter;
  random?: () => number;
}

export class Forwarder {
  private readonly random: () => number;
  private readonly logLimit: LogLimiter;

  constructor(private readonly opts: ForwarderOptions) {
    this.random = opts.random ?? Math.random;
    this.logLimit = opts.logLimit ?? new LogLimiter({ burst: Infinity, windowMs: 1, now: () => 0 });
  }

  get upstreams(): readonly HostPort[] {
    return this.opts.upstreams;
  }

  /** The upstream reply, or undefined when every upstream failed. */
  async forward(protocol: Protocol, query: Uint8Array): Promise<Uint8Array | undefined> {
    const ups = this.opts.upstreams;
    if (ups.length === 0) return undefined;
    if (this.opts.parallel && ups.length > 1) return this.parallel(protocol, query);
    const order = [...ups];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(this.random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const up of order) {
      try {
        return await this.attempt(protocol, up, query);
      } catch (e) {
        this.logLimit.log(this.opts.log, "info", "dns-upstream-failure", "upstream failure", {
          upstream: joinHostPort(up.host, up.port),
          protocol,
          error: e instanceof Error ? e.message : String(e),
        });
      }
    }
    return undefined;
  }

  private async parallel(protocol: Protocol, query: Uint8Array): Promise<Uint8Array | undefined> {
    const ac = new AbortController();
    try {
      return await Promise.any(
        this.opts.upstreams.map((up) =>
          this.attempt(protocol, up, query, ac.signal).catch((e: unknown) => {
            if (!ac.signal.aborted) {
              this.logLimit.log(this.opts.log, "info", "dns-parallel-failure", "parallel querying upstream failure", {
                upstream: joinHostPort(up.host, up.port),
                protocol,
                error: e instanceof Error ? e.message : String(e),
              });
            }
            throw e;
          }),
        ),
      );
    } catch {
      this.logLimit.log(this.opts.log, "info", "dns-all-failed", "all upstream failed", { protocol });
      return undefined;
    } finally {
      ac.abort();
    }
  }

  private async attempt(protocol: Protocol, up: HostPort, query: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    const reply = await this.opts.transport.exchange(protocol, up, query, this.opts.timeoutMs, signal);
    const problem = replyProblem(query, reply);
    if (problem) throw new Error(`bad reply from ${joinHostPort(up.host, up.port)}: ${problem}`);
    return reply;
  }
}

/** Why a reply cannot be relayed (undefined when fine): wrong ID, not a response, undecodable. */
export function replyProblem(query: Uint8Array, reply: Uint8Array): string | undefined {
  if (reply.length < 12) return `short reply (${reply.length} bytes)`;
  if (reply[0] !== query[0] || reply[1] !== query[1]) return "reply ID does not match the query";
  if ((reply[2]! & 0x80) === 0) return "not a response";
  try {
    packet.decode(Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength));
  } catch (e) {
    return `malformed reply: ${errorMessage(e)}`;
  }
  return undefined;
}
