// Upstream exchanges over real sockets (Bun): a connected UDP socket from a small pool of
// rotating sockets, or one TCP connection per attempt with the 2-byte length framing. Replies
// with another ID are ignored, as miekg/dns does.

import type { udp } from "bun";
import type { Protocol, UpstreamTransport } from "./forwarder.ts";
import { joinHostPort, type HostPort } from "./resolvconf.ts";

/** Upstream TCP connections open at once, over every client and upstream (each exchange has its own, as in Istio's agent). */
export const MAX_UPSTREAM_TCP = 64;

export class SocketTransport implements UpstreamTransport {
  private readonly pool = new UdpPool();
  private tcpOpen = 0;

  constructor(private readonly maxTcp = MAX_UPSTREAM_TCP) {}

  exchange(protocol: Protocol, up: HostPort, query: Uint8Array, timeoutMs: number, signal?: AbortSignal): Promise<Uint8Array> {
    if (protocol === "udp") return udpExchange(this.pool, up, query, timeoutMs, signal);
    // Past the limit the query fails at once (SERVFAIL when no upstream takes it), as CoreDNS's
    // forward max_concurrent sheds load: a queue would hold every client's query behind a flood.
    if (this.tcpOpen >= this.maxTcp)
      return Promise.reject(new Error(`tcp ${joinHostPort(up.host, up.port)}: ${this.maxTcp} upstream TCP exchanges already in progress`));
    this.tcpOpen++;
    // The slot is held until the socket is closed (its descriptor freed), not just until the answer.
    return tcpExchange(up, query, timeoutMs, signal, () => void this.tcpOpen--);
  }

  /** Upstream TCP exchanges in progress. */
  get tcpInProgress(): number {
    return this.tcpOpen;
  }

  /** Close idle upstream sockets. */
  close(): void {
    this.pool.close();
  }
}

/** Runs `body` with a settle-once callback, a timeout and abort handling; `cleanup` runs once. */
function bounded<T>(
  what: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  body: (settle: (err: Error | undefined, value?: T) => void, onCleanup: (fn: () => void) => void) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const cleanups: (() => void)[] = [];
    const settle = (err: Error | undefined, value?: T) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      for (const fn of cleanups) {
        try {
          fn();
        } catch {
          // closing an already closed socket
        }
      }
      if (err) reject(err);
      else resolve(value as T);
    };
    const timer = setTimeout(() => settle(new Error(`${what}: i/o timeout after ${timeoutMs}ms`)), timeoutMs);
    const onAbort = () => settle(new Error(`${what}: cancelled`));
    if (signal?.aborted) return settle(new Error(`${what}: cancelled`));
    signal?.addEventListener("abort", onAbort, { once: true });
    body(settle, (fn) => (done ? fn() : cleanups.push(fn)));
  });
}

/** Bun may hand socket callbacks an undefined error (e.g. ICMP port unreachable on UDP). */
function errText(err: unknown, fallback: string): string {
  if (err instanceof Error) return err.message || (err as { code?: string }).code || fallback;
  return err === undefined || err === null ? fallback : String(err);
}

function sameId(query: Uint8Array, reply: Uint8Array): boolean {
  return reply.length >= 2 && reply[0] === query[0] && reply[1] === query[1];
}

/** A connected UDP socket whose current exchange receives its datagrams. */
interface PooledUdp {
  sock: udp.ConnectedSocket<"buffer">;
  uses: number;
  onData?: (data: Buffer) => void;
  onError?: (err: unknown) => void;
}

/**
 * Idle connected UDP sockets per upstream, reused by later exchanges: creating a socket per
 * query (as Go does) costs more than the exchange itself in Bun. A socket serves at most
 * MAX_USES exchanges, so source ports keep rotating, and one that timed out or failed is closed.
 */
class UdpPool {
  private readonly idle = new Map<string, PooledUdp[]>();

  async acquire(up: HostPort): Promise<PooledUdp> {
    const list = this.idle.get(key(up));
    const reused = list?.pop();
    if (reused) return reused;
    const entry = {} as PooledUdp;
    entry.uses = 0;
    entry.sock = await Bun.udpSocket({
      hostname: up.host.includes(":") ? "::" : "0.0.0.0",
      connect: { hostname: up.host, port: up.port },
      socket: {
        data: (_s, data) => entry.onData?.(data),
        error: (_s, err) => entry.onError?.(err),
      },
    });
    return entry;
  }

  release(up: HostPort, entry: PooledUdp, healthy: boolean): void {
    entry.onData = entry.onError = undefined;
    entry.uses++;
    const k = key(up);
    let list = this.idle.get(k);
    if (!list) this.idle.set(k, (list = []));
    if (healthy && entry.uses < MAX_USES && list.length < MAX_IDLE && !entry.sock.closed) list.push(entry);
    else entry.sock.close();
  }

  close(): void {
    for (const list of this.idle.values()) for (const e of list.splice(0)) e.sock.close();
  }
}

const MAX_USES = 64;
const MAX_IDLE = 32;

function key(up: HostPort): string {
  return joinHostPort(up.host, up.port);
}

function udpExchange(pool: UdpPool, up: HostPort, query: Uint8Array, timeoutMs: number, signal?: AbortSignal): Promise<Uint8Array> {
  const what = `udp ${joinHostPort(up.host, up.port)}`;
  return bounded<Uint8Array>(what, timeoutMs, signal, (settle, onCleanup) => {
    pool.acquire(up).then(
      (entry) => {
        let healthy = false;
        onCleanup(() => pool.release(up, entry, healthy));
        entry.onData = (data) => {
          if (!sameId(query, data)) return;
          healthy = true;
          settle(undefined, data);
        };
        entry.onError = (err) => settle(new Error(`${what}: ${errText(err, "destination unreachable")}`));
        try {
          if (!entry.sock.send(query)) settle(new Error(`${what}: send failed`));
        } catch (e) {
          settle(new Error(`${what}: ${errText(e, "send failed")}`)); // e.g. ECONNREFUSED from an earlier ICMP unreachable
        }
      },
      (err: unknown) => settle(new Error(`${what}: ${errText(err, "failed")}`)),
    );
  });
}

/** `released` runs once, when the connection is gone (closed, or never made). */
function tcpExchange(up: HostPort, query: Uint8Array, timeoutMs: number, signal: AbortSignal | undefined, released: () => void): Promise<Uint8Array> {
  const what = `tcp ${joinHostPort(up.host, up.port)}`;
  const frame = new Uint8Array(query.length + 2);
  frame[0] = query.length >> 8;
  frame[1] = query.length & 0xff;
  frame.set(query, 2);
  let gone = false;
  const release = () => {
    if (gone) return;
    gone = true;
    released();
  };
  return bounded<Uint8Array>(what, timeoutMs, signal, (settle, onCleanup) => {
    let buf = new Uint8Array(0);
    Bun.connect({
      hostname: up.host,
      port: up.port,
      socket: {
        open(s) {
          s.write(frame);
        },
        data(_s, chunk) {
          const next = new Uint8Array(buf.length + chunk.length);
          next.set(buf);
          next.set(chunk, buf.length);
          buf = next;
          while (buf.length >= 2) {
            const len = (buf[0]! << 8) | buf[1]!;
            if (buf.length < 2 + len) return;
            const msg = buf.slice(2, 2 + len);
            buf = buf.slice(2 + len);
            if (sameId(query, msg)) return settle(undefined, msg);
          }
        },
        close() {
          release();
          settle(new Error(`${what}: connection closed before a reply`));
        },
        connectError(_s, err) {
          release();
          settle(new Error(`${what}: ${errText(err, "connect failed")}`));
        },
        error(_s, err) {
          settle(new Error(`${what}: ${errText(err, "connection error")}`));
        },
      },
    }).then(
      // The answer is read (or no longer wanted): close now, not when the upstream closes its side.
      (sock) => onCleanup(() => sock.terminate()),
      (err: unknown) => {
        release();
        settle(new Error(`${what}: ${errText(err, "failed")}`));
      },
    );
  });
}
