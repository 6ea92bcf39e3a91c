// The gRPC server on loopback TCP (listenTcp: local mode's ADS server), beside the Unix socket the
// XDS and SDS sockets use (mutants-grpc-server.test.ts): it serves, forgets a connection its
// client ends, names the address it could not bind (IPv6 in brackets), and never removes a file
// at socketPath when it stops, since it made none.
import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { UnixGrpcServer } from "../../src/xds/grpcserver.ts";
import { decodeHeaders } from "./grpc-server-support.ts";
import { CLIENT_PREFACE, GRPC_REQUEST, RawPeer, SETTINGS_ACK, T, headersFrame, settings } from "./h2-support.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tcpServer(socketPath = "/nonexistent/unused.sock"): UnixGrpcServer {
  const server = new UnixGrpcServer({
    socketPath,
    authorizer: new PeerAuthorizer("*", 0), // as local mode: TCP peers are not checked
    log: memoryLogger().log,
    name: "TCP",
    route: () => undefined,
    unknownMethodMessage: (p) => `no method ${p}`,
    onRejected: () => {},
    listenError: (message, cause) => new Error(`LISTEN: ${message}`, { cause }),
  });
  return server;
}

async function rawClient(port: number, host = "127.0.0.1"): Promise<RawPeer> {
  const sock = net.connect(port, host);
  await new Promise<void>((res, rej) => sock.once("connect", () => res()).once("error", rej));
  const peer = new RawPeer(sock);
  peer.send(CLIENT_PREFACE, settings());
  return peer;
}

test("listenTcp on 127.0.0.1:0: returns the port it bound; a request is answered (UNIMPLEMENTED for an unknown path); a client that ends its side is forgotten", async () => {
  const server = tcpServer();
  const port = server.listenTcp("127.0.0.1", 0);
  cleanups.push(() => server.close());
  expect(port).toBeGreaterThan(0);
  const peer = await rawClient(port);
  cleanups.push(() => peer.destroy());
  await peer.next((f) => f.type === T.SETTINGS, 5000, "the server's SETTINGS");
  peer.send(
    SETTINGS_ACK,
    headersFrame(
      1,
      GRPC_REQUEST.map(([k, v]) => [k, k === ":path" ? "/no.Such/Method" : v] as [string, string]),
    ),
  );
  const h = decodeHeaders(await peer.nextOf(T.HEADERS, 1, 5000));
  expect(h.list.filter(([k]) => k === "grpc-status" || k === "grpc-message")).toEqual([
    ["grpc-status", "12"],
    ["grpc-message", "no method /no.Such/Method"],
  ]);
  expect(server.connections).toBe(1);
  peer.socket.end();
  await peer.closed;
  for (let i = 0; i < 200 && server.connections > 0; i++) await Bun.sleep(10);
  expect(server.connections).toBe(0);
});

test("an address in use is refused naming it: host:port, an IPv6 host in brackets", () => {
  for (const host of ["127.0.0.1", "::1"]) {
    const first = tcpServer();
    const port = first.listenTcp(host, 0);
    cleanups.push(() => first.close());
    const second = tcpServer();
    const shown = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
    expect(() => second.listenTcp(host, port)).toThrow(`LISTEN: listening on ${shown}: `);
  }
});

test("close() after listenTcp leaves a file at socketPath alone (it made no socket file)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gsrv-tcp-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "not-ours");
  writeFileSync(file, "keep");
  const server = tcpServer(file);
  server.listenTcp("127.0.0.1", 0);
  await server.close();
  expect(existsSync(file)).toBe(true);
});
