// The DNS proxy's sockets: a UDP socket and a TCP listener per address (Bun). TCP carries
// length-prefixed messages (RFC 1035 4.2.2); queries on one connection may be pipelined and are
// answered as they complete; an idle connection is closed. A handler error never reaches the
// socket loop: it is logged and the packet dropped.

import type { Socket, TCPSocketListener } from "bun";
import type { Logger } from "../lib/log.ts";
import { DnsError } from "./errors.ts";
import type { Protocol } from "./forwarder.ts";
import type { Reply } from "./handler.ts";
import { joinHostPort, type HostPort } from "./resolvconf.ts";
import { errorMessage } from "../lib/errors.ts";

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
  /** Close a TCP connection idle this long (ms). */
  tcpIdleMs?: number;
}

interface TcpState {
  buf: Uint8Array;
  timer?: ReturnType<typeof setTimeout>;
  closed: boolean;
}

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
  try {
    for (const a of addrs) {
      const bound = await bindPair(a, handle, log, opts.tcpIdleMs ?? 8000);
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
async function bindPair(a: HostPort, handle: PacketHandler, log: Logger, tcpIdleMs: number) {
  let lastErr: unknown;
  for (let attempt = 0; attempt < (a.port === 0 ? MAX_BIND_ATTEMPTS : 1); attempt++) {
    let udp: Awaited<ReturnType<typeof bindUdp>> | undefined;
    try {
      udp = await bindUdp(a, handle, log);
      const tcp = bindTcp({ host: a.host, port: udp.port }, handle, log, tcpIdleMs);
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

function bindUdp(a: HostPort, handle: PacketHandler, log: Logger) {
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
          log.error("dns query handling failed", { error: errorMessage(e) });
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
          (e: unknown) => log.error("dns query handling failed", { error: errorMessage(e) }),
        );
      },
      error(_s, e) {
        log.debug("dns udp socket error", { error: errorMessage(e) });
      },
    },
  });
}

function bindTcp(a: HostPort, handle: PacketHandler, log: Logger, idleMs: number): TCPSocketListener<TcpState> {
  const arm = (s: Socket<TcpState>) => {
    clearTimeout(s.data.timer);
    s.data.timer = setTimeout(() => s.end(), idleMs);
  };
  const send = (s: Socket<TcpState>, reply: Reply) => {
    if (!reply || s.data.closed) return;
    const frame = new Uint8Array(reply.length + 2);
    frame[0] = reply.length >> 8;
    frame[1] = reply.length & 0xff;
    frame.set(reply, 2);
    s.write(frame);
  };
  return Bun.listen<TcpState>({
    hostname: a.host,
    port: a.port,
    socket: {
      open(s) {
        s.data = { buf: new Uint8Array(0), closed: false };
        arm(s);
      },
      data(s, chunk) {
        arm(s);
        const st = s.data;
        const merged = new Uint8Array(st.buf.length + chunk.length);
        merged.set(st.buf);
        merged.set(chunk, st.buf.length);
        let off = 0;
        while (merged.length - off >= 2) {
          const len = (merged[off]! << 8) | merged[off + 1]!;
          if (merged.length - off < 2 + len) break;
          const msg = Buffer.from(merged.buffer, merged.byteOffset + off + 2, len);
          off += 2 + len;
          let r: Reply | Promise<Reply>;
          try {
            r = handle(msg, "tcp");
          } catch (e) {
            log.error("dns query handling failed", { error: errorMessage(e) });
            continue;
          }
          if (r instanceof Promise)
            r.then(
              (reply) => send(s, reply),
              (e: unknown) => log.error("dns query handling failed", { error: errorMessage(e) }),
            );
          else send(s, r);
        }
        st.buf = merged.slice(off);
      },
      close(s) {
        s.data.closed = true;
        clearTimeout(s.data.timer);
      },
      error(s, e) {
        log.debug("dns tcp connection error", { error: errorMessage(e) });
        s.data.closed = true;
      },
    },
  });
}
