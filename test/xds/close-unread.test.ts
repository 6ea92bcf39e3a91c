// A graceful close while the client's last bytes (an ACK, a WINDOW_UPDATE) are still unread by
// the server. Closing a socket with unread input resets the connection: TCP sends RST and drops
// what was still queued to send; a Unix socket reports ECONNRESET to the peer. Either way the
// client (node here, as Envoy or a gRPC client would be) loses the end of the last message, its
// trailers and the GOAWAY. The server must end its side and read on until the client ends.
// Found by the e2e "SIGTERM during a push" case: once in ten runs its client, ACKing every
// response, got a message cut 538 bytes short and no status.

import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { UnixGrpcServer } from "../../src/xds/grpcserver.ts";
import type { H2Stream } from "../../src/xds/h2/session.ts";
import { decodeHeaders } from "./grpc-server-support.ts";
import { CLIENT_PREFACE, F, RawPeer, S, SETTINGS_ACK, T, headersFrame, settings, windowUpdate } from "./h2-support.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MESSAGE = 64 * 1024; // taken by the kernel at once: the server's writer is idle when it closes

for (const kind of ["tcp", "unix"] as const) {
  test(`${kind}: the client's unread bytes at our graceful close: it still gets the whole message, the trailers and the GOAWAY, then EOF (no reset)`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "close-unread-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    let stream: H2Stream | undefined;
    const server = new UnixGrpcServer({
      socketPath: join(dir, "s.sock"),
      authorizer: new PeerAuthorizer("*", 0),
      log: memoryLogger().log,
      name: "TEST",
      route: () => (st) => {
        stream = st;
        st.respond([
          [":status", "200"],
          ["content-type", "application/grpc"],
        ]);
      },
      unknownMethodMessage: (p) => p,
      onRejected: () => {},
      listenError: (m) => new Error(m),
    });
    let sock: net.Socket;
    if (kind === "tcp") sock = net.connect(server.listenTcp("127.0.0.1", 0), "127.0.0.1");
    else {
      server.listen();
      sock = net.connect(join(dir, "s.sock"));
    }
    const closed = { done: false };
    cleanups.push(() => (closed.done ? undefined : server.close()));
    await new Promise<void>((res, rej) => sock.once("connect", () => res()).once("error", rej));
    const errors: string[] = [];
    sock.on("error", (e) => errors.push(e.message));
    const peer = new RawPeer(sock);
    cleanups.push(() => peer.destroy());
    // Windows wide open, so the message is sent whole however little the client reads.
    peer.send(CLIENT_PREFACE, settings([S.INITIAL_WINDOW_SIZE, 0x7fffffff]), windowUpdate(0, 0x7fffffff - 65_535));
    await peer.next((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0, 5000, "the server's SETTINGS");
    peer.send(SETTINGS_ACK, headersFrame(1));
    await peer.nextOf(T.HEADERS, 1, 5000);

    // The client stops reading and sends: the server has not read these bytes when it closes.
    sock.pause();
    for (let i = 0; i < 20; i++) peer.send(windowUpdate(0, 1));
    const msg = Buffer.alloc(5 + MESSAGE, 0x5a);
    msg[0] = 0;
    msg.writeUInt32BE(MESSAGE, 1);
    stream!.write(msg);
    stream!.end([
      ["grpc-status", "14"],
      ["grpc-message", "agent shutting down"],
    ]);
    const serverClosed = server.close(5000).then(() => (closed.done = true));
    await Bun.sleep(100);
    sock.resume();
    await peer.waitClosed(5000);
    await serverClosed;

    const data = Buffer.concat(peer.seen.filter((f) => f.type === T.DATA && f.stream === 1).map((f) => f.payload));
    const trailers = peer.seen.filter((f) => f.type === T.HEADERS && f.stream === 1 && (f.flags & F.END_STREAM) !== 0);
    expect({
      bytes: data.length,
      whole: data.equals(msg),
      trailers: trailers.map((f) => decodeHeaders(f).list),
      goaway: peer.seen.filter((f) => f.type === T.GOAWAY).map((f) => f.payload.readUInt32BE(4)),
      errors,
    }).toEqual({
      bytes: 5 + MESSAGE,
      whole: true,
      trailers: [
        [
          ["grpc-status", "14"],
          ["grpc-message", "agent shutting down"],
        ],
      ],
      goaway: [0],
      errors: [],
    });
  });
}
