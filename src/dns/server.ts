// The DNS proxy's sockets: a UDP socket and a TCP listener per address (Bun). TCP carries
// length-prefixed messages (RFC 1035 4.2.2); queries on one connection may be pipelined and are
// answered as they complete, within the bounds of tcpconn.ts (queries at once per connection, the
// time to send one, idle). A handler error never reaches the socket loop: it is logged (rate
// limited) and the packet dropped.

import type { TCPSocketListener } from "bun";
import type { Logger } from "../lib/log.ts";
import { DnsError } from "./errors.ts";
import type { Protocol } from "./forwarder.ts";
import type { Reply } from "./handler.ts";
import { joinHostPort, type HostPort } from "./resolvconf.ts";
import { errorMessage } from "../lib/errors.ts";
import { systemClock, type TimerHandle } from "../lib/clock.ts";
import { DEFAULT_LOG_LIMIT, LogLimiter } from "../lib/loglimit.ts";
import { TcpDnsConnection } from "./tcpconn.ts";

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export type PacketHandler = (bytes: Uint8Array, protocol: Protocol) => Reply | Promise<Reply>;

export interface BoundAddress {
  protocol: Protocol;
  host: string;
  port: number;
}

export interface DnsListeners {
  addresses: BoundAddress[];
  close(): void;
}

export interface ListenOptions {
  /** Close a TCP connection idle this long (ms; miekg/dns's 8 s). */
  tcpIdleMs?: number;
  /** A TCP query must arrive whole within this long of its first byte (ms; miekg/dns's read timeout, 2 s). */
  tcpQueryMs?: number;
  /** Queries of one TCP connection answered at once; past it the connection is not read. */
  tcpMaxInflight?: number;
  timer?: (ms: number, fn: () => void) => TimerHandle;
  /** Rate limit of the per-query error lines. */
  logLimit?: LogLimiter;
}

/** Unread replies a TCP client may leave queued before its connection is no longer read. */
export const TCP_MAX_QUEUED_REPLY_BYTES = 256 * 1024;
export const TCP_DEFAULTS = { tcpIdleMs: 8000, tcpQueryMs: 2000, tcpMaxInflight: 16 };

const MAX_BIND_ATTEMPTS = 5;

export async function listen(addrs: readonly HostPort[], handle: PacketHandler, log: Logger, opts: ListenOptions = {}): Promise<DnsListeners> {
  const closers: (() => void)[] = [];
  const addresses: BoundAddress[] = [];
  const closeAll = () => {
    for (const c of closers.splice(0)) {
      try {
        c();
      } catch {
        // already closed
      }
    }
  };
  const o: Required<ListenOptions> = {
    ...TCP_DEFAULTS,
    timer: systemClock.timer,
    logLimit: new LogLimiter({ ...DEFAULT_LOG_LIMIT, now: () => performance.now() }),
    ...definedOnly(opts),
  };
  try {
    for (const a of addrs) {
      const bound = await bindPair(a, handle, log, o);
      closers.push(bound.close);
      addresses.push({ protocol: "udp", host: a.host, port: bound.udpPort }, { protocol: "tcp", host: a.host, port: bound.tcpPort });
      log.info(`Starting local udp DNS server on ${joinHostPort(a.host, bound.udpPort)}`);
      log.info(`Starting local tcp DNS server on ${joinHostPort(a.host, bound.tcpPort)}`);
    }
  } catch (e) {
    closeAll();
    throw e;
  }
  return { addresses, close: closeAll };
}

/** UDP and TCP on one address; with port 0 both get the same ephemeral port (retried if taken). */
async function bindPair(a: HostPort, handle: PacketHandler, log: Logger, o: Required<ListenOptions>) {
  let lastErr: unknown;
  for (let attempt = 0; attempt < (a.port === 0 ? MAX_BIND_ATTEMPTS : 1); attempt++) {
    let udp: Awaited<ReturnType<typeof bindUdp>> | undefined;
    try {
      udp = await bindUdp(a, handle, log, o.logLimit);
      const tcp = bindTcp({ host: a.host, port: udp.port }, handle, log, o);
      const u = udp;
      return {
        udpPort: u.port,
        tcpPort: tcp.port,
        close: () => {
          u.close();
          tcp.stop(true);
        },
      };
    } catch (e) {
      udp?.close();
      lastErr = e;
    }
  }
  throw new DnsError("listen", `Failed to listen on ${joinHostPort(a.host, a.port)}: ${errorMessage(lastErr)}`, { cause: lastErr });
}

function bindUdp(a: HostPort, handle: PacketHandler, log: Logger, logLimit: LogLimiter) {
  // A client that went away before its answer draws an ICMP port unreachable, and the kernel
  // reports it on a later send from this socket (ECONNREFUSED): that is the client's loss, not
  // a reason to stop serving everyone else.
  const reply = (sock: { send(b: Uint8Array, port: number, address: string): boolean }, bytes: Uint8Array, port: number, address: string) => {
    try {
      sock.send(bytes, port, address);
    } catch (e) {
      log.debug("dns udp reply not sent", { client: joinHostPort(address, port), error: errorMessage(e) });
    }
  };
  return Bun.udpSocket({
    hostname: a.host,
    port: a.port,
    socket: {
      data(sock, data, port, address) {
        let r: Reply | Promise<Reply>;
        try {
          r = handle(data, "udp");
        } catch (e) {
          logLimit.log(log, "error", "dns-udp-handler", "dns query handling failed", { error: errorMessage(e) });
          return;
        }
        if (r === undefined) return;
        if (r instanceof Uint8Array) {
          reply(sock, r, port, address);
          return;
        }
        r.then(
          (answer) => {
            if (answer && !sock.closed) reply(sock, answer, port, address);
          },
          (e: unknown) => logLimit.log(log, "error", "dns-udp-handler", "dns query handling failed", { error: errorMessage(e) }),
        );
      },
      error(_s, e) {
        log.debug("dns udp socket error", { error: errorMessage(e) });
      },
    },
  });
}

function bindTcp(a: HostPort, handle: PacketHandler, log: Logger, o: Required<ListenOptions>): TCPSocketListener<TcpDnsConnection | undefined> {
  const limits = { idleMs: o.tcpIdleMs, queryMs: o.tcpQueryMs, maxInflight: o.tcpMaxInflight, maxQueuedReplyBytes: TCP_MAX_QUEUED_REPLY_BYTES };
  return Bun.listen<TcpDnsConnection | undefined>({
    hostname: a.host,
    port: a.port,
    socket: {
      open(s) {
        s.data = new TcpDnsConnection(s, limits, {
          handle: (msg) => handle(msg, "tcp"),
          timer: o.timer,
          onHandlerError: (e) => o.logLimit.log(log, "error", "dns-tcp-handler", "dns query handling failed", { error: errorMessage(e) }),
          onQueryTimeout: () =>
            o.logLimit.log(log, "warn", "dns-tcp-slow-query", `dns tcp client closed: a query did not arrive whole within ${o.tcpQueryMs} ms`, {
              client: joinHostPort(s.remoteAddress, s.remotePort),
            }),
        });
      },
      data: (s, chunk) => s.data?.onData(chunk),
      drain: (s) => s.data?.onDrain(),
      close: (s) => s.data?.onClose(),
      error(s, e) {
        log.debug("dns tcp connection error", { error: errorMessage(e) });
        s.data?.onClose();
      },
    },
  });
}
