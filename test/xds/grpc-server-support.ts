// Helpers for the gRPC server's mutation tests (mutants-grpc-server.test.ts): a UnixGrpcServer on a
// temp socket with recording routes, and a raw HTTP/2 client (test/xds/h2-support.ts's RawPeer)
// whose HEADERS are decoded back into header lists. The server encodes headers statelessly
// (literals, never the dynamic table), so each block is decoded on its own.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { PeerAuthorizer, type PeerDecision } from "../../src/lib/peerauth.ts";
import { HpackDecoder, type HeaderList } from "../../src/xds/h2/hpack.ts";
import type { H2Stream } from "../../src/xds/h2/session.ts";
import { UnixGrpcServer, type GrpcMethod, type UnixGrpcServerOptions } from "../../src/xds/grpcserver.ts";
import { F, RawPeer, SETTINGS_ACK, T, ping, type RawFrame } from "./h2-support.ts";

/** The path routed to the test's handler; every other path is unknown. */
export const OK_PATH = "/test.Service/Call";

/** An authorizer that answers from a script first (one decision per connection), then by UID. */
export class ScriptedAuthorizer extends PeerAuthorizer {
  readonly fds: (number | undefined)[] = [];
  constructor(readonly script: PeerDecision[] = []) {
    super("", process.getuid?.() ?? 0);
  }
  override checkFd(fd: number | undefined): PeerDecision {
    this.fds.push(fd);
    return this.script.shift() ?? super.checkFd(fd);
  }
}

export interface Served {
  stream: H2Stream;
  path: string;
}

export interface GrpcServerHarness {
  server: UnixGrpcServer;
  /** The socket path, two directories below a fresh temp directory (neither exists before listen). */
  path: string;
  dir: string;
  lines: string[];
  /** Paths asked of `route`, in order. */
  routed: string[];
  /** Calls handed to the handler of OK_PATH. */
  served: Served[];
  rejected: PeerDecision[];
  authorizer: ScriptedAuthorizer;
  /** A raw client that has read the server's SETTINGS and acknowledged them. */
  connect(opts?: { settings?: [number, number][] }): Promise<Client>;
  stop(): Promise<void>;
}

export function startGrpcServer(
  opts: Partial<UnixGrpcServerOptions> & { handler?: GrpcMethod; script?: PeerDecision[]; listen?: boolean } = {},
): GrpcServerHarness {
  const { handler: given, script, listen, ...over } = opts;
  const dir = mkdtempSync(join(tmpdir(), "gsrv-"));
  const path = join(dir, "a", "b", "s.sock");
  const log = memoryLogger();
  const routed: string[] = [];
  const served: Served[] = [];
  const rejected: PeerDecision[] = [];
  const authorizer = new ScriptedAuthorizer(script);
  const handler: GrpcMethod = (stream, p) => {
    served.push({ stream, path: p });
    given?.(stream, p);
  };
  const server = new UnixGrpcServer({
    socketPath: path,
    authorizer,
    log: log.log,
    name: "TEST",
    route: (p) => {
      routed.push(p);
      return p === OK_PATH ? handler : undefined;
    },
    unknownMethodMessage: (p) => `no method ${p}`,
    onRejected: (d) => rejected.push(d),
    listenError: (message, cause) => new Error(`LISTEN: ${message}`, { cause }),
    // Sentinel PINGs must not count as keepalive strikes; the ping-policy tests set their own.
    minPingIntervalMs: 0,
    ...over,
  });
  if (listen !== false) server.listen();
  const clients: Client[] = [];
  return {
    server,
    path,
    dir,
    lines: log.lines,
    routed,
    served,
    rejected,
    authorizer,
    async connect(o = {}) {
      const c = new Client(await RawPeer.connect(path, o));
      clients.push(c);
      const s = await c.peer.next((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0, 5000, "the server's SETTINGS");
      for (let i = 0; i + 6 <= s.payload.length; i += 6) c.settings.set(s.payload.readUInt16BE(i), s.payload.readUInt32BE(i + 2));
      c.peer.send(SETTINGS_ACK);
      return c;
    },
    async stop() {
      for (const c of clients) c.peer.destroy();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One decoded HEADERS frame. */
export interface Headers {
  stream: number;
  endStream: boolean;
  list: HeaderList;
}

export function decodeHeaders(f: RawFrame): Headers {
  if (f.type !== T.HEADERS) throw new Error(`frame type ${f.type} is not HEADERS`);
  if ((f.flags & F.END_HEADERS) === 0) throw new Error("a HEADERS frame without END_HEADERS (no CONTINUATION expected here)");
  return { stream: f.stream, endStream: (f.flags & F.END_STREAM) !== 0, list: new HpackDecoder(4096, 1 << 20).decode(f.payload) };
}

let sentinelSeq = 0;

export class Client {
  /** The server's SETTINGS, by identifier. */
  readonly settings = new Map<number, number>();
  constructor(readonly peer: RawPeer) {}

  send(...b: Buffer[]): void {
    this.peer.send(...b);
  }

  async headers(stream: number, timeoutMs = 5000): Promise<Headers> {
    return decodeHeaders(await this.peer.nextOf(T.HEADERS, stream, timeoutMs));
  }

  /**
   * Send a PING and wait for its ACK: the server has read (and answered) everything sent before
   * it. Returns the frames that arrived before the ACK and are still queued (not taken by next()).
   */
  async sentinel(): Promise<RawFrame[]> {
    const data = Buffer.alloc(8);
    data.writeUInt32BE(0x5e5e5e5e, 0);
    data.writeUInt32BE(++sentinelSeq, 4);
    this.peer.send(ping(data));
    const ack = await this.peer.next((f) => f.type === T.PING && (f.flags & F.ACK) !== 0 && f.payload.equals(data), 5000, "the sentinel PING's ACK");
    const before = this.peer.seen.slice(0, this.peer.seen.indexOf(ack));
    return this.peer.frames.filter((f) => before.includes(f));
  }
}

/** A gRPC length-prefixed message: flag, 4-byte big-endian length, body (PROTOCOL-HTTP2.md). */
export function lpm(body: Buffer, compressed = false): Buffer {
  const p = Buffer.alloc(5);
  p[0] = compressed ? 1 : 0;
  p.writeUInt32BE(body.length, 1);
  return Buffer.concat([p, body]);
}
