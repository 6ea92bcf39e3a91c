// The agent's h2c gRPC server (src/xds/grpcserver.ts), its calls (grpccall.ts) and whole-request
// reading (grpcrequests.ts), driven in process through a real Unix socket by a raw HTTP/2 client
// written from RFC 9113 (test/xds/h2-support.ts). What is asserted is what a client sees on the
// wire — SETTINGS, :status, content-type, grpc-status/grpc-message, RST_STREAM, GOAWAY — or what
// the route handler and the request sink receive. Expected values are literals from RFC 9113 and
// gRPC's PROTOCOL-HTTP2.md (UNIMPLEMENTED 12, RESOURCE_EXHAUSTED 8, INTERNAL 13; HTTP 415 for a
// content type that is not gRPC and 405 for a method that is not POST, as grpc-go answers; the
// 5-byte message prefix; percent-encoded grpc-message). Absence is asserted only after a PING
// sentinel has come back. The 10 s linger of a finished call runs on a scripted stream with Bun's
// fake timers.

import { afterEach, describe, expect, jest, test } from "bun:test";
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import net from "node:net";
import { dirname, join } from "node:path";
import type { HeaderList } from "../../src/xds/h2/hpack.ts";
import { H2Stream, type StreamHost } from "../../src/xds/h2/stream.ts";
import { GrpcServerCall } from "../../src/xds/grpccall.ts";
import { readRequests, type RequestSink } from "../../src/xds/grpcrequests.ts";
import { E, F, GRPC_REQUEST, RawPeer, S, T, headersFrame, rawFrame, rst, settings, sleep, until, windowUpdate, type RawFrame } from "./h2-support.ts";
import { OK_PATH, decodeHeaders, lpm, startGrpcServer, type Client, type GrpcServerHarness } from "./grpc-server-support.ts";

const harnesses: GrpcServerHarness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.stop();
  jest.useRealTimers();
});
/** How the abuse log line names the test's own connections (SO_PEERCRED of this process). */
const WHO = `pid=${process.pid} uid=${process.getuid?.() ?? 0}`;

function start(opts: Parameters<typeof startGrpcServer>[0] = {}): GrpcServerHarness {
  const h = startGrpcServer(opts);
  harnesses.push(h);
  return h;
}

/** Request headers for `path` with `content-type: application/grpc`, with fields replaced or removed (value null). */
function req(path: string | null = OK_PATH, change: Record<string, string | null> = {}): [string, string][] {
  const base: [string, string][] = GRPC_REQUEST.map(([n, v]) => [n, n === ":path" ? (path ?? "") : v]);
  const out = base.filter(([n]) => !(n === ":path" && path === null));
  for (const [n, v] of Object.entries(change)) {
    const i = out.findIndex(([k]) => k === n);
    if (i >= 0) out.splice(i, 1);
    if (v !== null) out.push([n, v]);
  }
  return out;
}

const data = (stream: number, payload: Buffer, end = false) => rawFrame(T.DATA, end ? F.END_STREAM : 0, stream, payload);
const endStream = (stream: number) => rawFrame(T.DATA, F.END_STREAM, stream);

/** The gRPC response headers every call starts with (PROTOCOL-HTTP2.md: Response-Headers). */
const RESPONSE_HEADERS: HeaderList = [
  [":status", "200"],
  ["content-type", "application/grpc"],
  ["grpc-accept-encoding", "identity"],
];

describe("listen", () => {
  test("creates the missing directories (0750) and a socket of mode 0666 that serves", async () => {
    const h = start();
    expect(statSync(dirname(h.path)).mode & 0o777).toBe(0o750);
    expect(statSync(dirname(dirname(h.path))).mode & 0o777).toBe(0o750);
    expect(statSync(h.path).isSocket()).toBe(true);
    expect(statSync(h.path).mode & 0o777).toBe(0o666);
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await until(() => h.served.length === 1, 5000, "the call to be routed");
  });

  test("a stale file at the socket path is replaced", async () => {
    const h = start({ listen: false });
    mkdirSync(dirname(h.path), { recursive: true });
    writeFileSync(h.path, "stale");
    h.server.listen();
    expect(statSync(h.path).isSocket()).toBe(true);
    await h.connect();
    expect(h.server.connections).toBe(1);
  });

  test("a directory that cannot be made: listenError names the socket and carries the cause", () => {
    const h = start({ listen: false });
    writeFileSync(join(h.dir, "a"), "a file where a directory should be");
    let err: Error | undefined;
    try {
      h.server.listen();
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).toStartWith(`LISTEN: preparing socket ${h.path}: `);
    expect((err?.cause as NodeJS.ErrnoException | undefined)?.code).toBe("ENOTDIR");
    rmSync(join(h.dir, "a")); // close() removes the socket path, which Bun refuses below a file (EFAULT)
  });

  test("a path the kernel cannot bind (over 108 bytes): listenError says listening on it", () => {
    const dirHolder = start({ listen: false });
    const long = join(dirHolder.dir, "x".repeat(120));
    const h = start({ listen: false, socketPath: long });
    let err: Error | undefined;
    try {
      h.server.listen();
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).toStartWith(`LISTEN: listening on ${long}: `);
    expect(err?.cause).toBeInstanceOf(Error);
    expect(existsSync(long)).toBe(false);
  });
});

describe("peers", () => {
  test("a refused peer: onRejected gets the decision, the peer gets no byte and is closed, its request is never routed", async () => {
    const refusal = { allowed: false as const, reason: "scripted refusal", cred: { pid: 7, uid: 4242, gid: 0 } };
    const h = start({ script: [refusal] });
    const refused = await RawPeer.connect(h.path);
    refused.send(headersFrame(1, req()), data(1, lpm(Buffer.from("hi"))));
    await refused.waitClosed();
    expect(refused.seen).toEqual([]);
    expect(h.rejected).toEqual([refusal]);
    expect(typeof h.authorizer.fds[0]).toBe("number");
    expect(h.authorizer.fds[0]).toBeGreaterThanOrEqual(0);
    // The next peer is checked too (allowed by UID) and served; the refused one never reached route.
    const c = await h.connect();
    c.send(headersFrame(1, req("/other.Service/Sentinel")));
    await c.headers(1);
    expect(h.routed).toEqual(["/other.Service/Sentinel"]);
    expect(h.authorizer.fds).toHaveLength(2);
    expect(h.server.connections).toBe(1);
  });

  test("a refused peer that keeps writing and closes does not disturb the server", async () => {
    const h = start({ script: [{ allowed: false, reason: "no" }] });
    const sock = net.connect(h.path);
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.on("error", () => {});
    for (let i = 0; i < 20; i++) sock.write(Buffer.alloc(1024, i));
    await new Promise<void>((r) => sock.once("close", () => r()));
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await until(() => h.served.length === 1, 5000, "the next peer's call");
  });

  test("connections counts open sessions: up on connect, down once a client goes", async () => {
    const h = start();
    expect(h.server.connections).toBe(0);
    const a = await h.connect();
    await h.connect();
    expect(h.server.connections).toBe(2);
    a.peer.destroy();
    await until(() => h.server.connections === 1, 5000, "the closed connection to be forgotten");
  });
});

describe("session options", () => {
  test("defaults: SETTINGS_MAX_CONCURRENT_STREAMS 1000 (Istio's 100000 capped per connection) and the session's 1 MiB stream window", async () => {
    const h = start();
    const c = await h.connect();
    expect(c.settings.get(S.MAX_CONCURRENT_STREAMS)).toBe(1000);
    expect(c.settings.get(S.INITIAL_WINDOW_SIZE)).toBe(1_048_576);
  });

  test("maxConcurrentStreams and streamWindow are advertised as given", async () => {
    const h = start({ maxConcurrentStreams: 3, streamWindow: 70_000 });
    const c = await h.connect();
    expect(c.settings.get(S.MAX_CONCURRENT_STREAMS)).toBe(3);
    expect(c.settings.get(S.INITIAL_WINDOW_SIZE)).toBe(70_000);
  });

  test("maxConcurrentStreams above 1000 is capped at 1000 per connection", async () => {
    const h = start({ maxConcurrentStreams: 1001 });
    const c = await h.connect();
    expect(c.settings.get(S.MAX_CONCURRENT_STREAMS)).toBe(1000);
  });

  test("keepalive: an idle connection gets the server's PING (8 zero bytes) after intervalMs", async () => {
    const h = start({ keepalive: { intervalMs: 30, timeoutMs: 5000 } });
    const c = await h.connect();
    const p = await c.peer.next((f) => f.type === T.PING && (f.flags & F.ACK) === 0, 3000, "the keepalive PING");
    expect(p.payload).toEqual(Buffer.alloc(8));
  });

  for (const [what, keepalive] of [
    ["no keepalive", undefined],
    ["keepalive with intervalMs 0", { intervalMs: 0, timeoutMs: 5000 }],
  ] as const) {
    test(`${what}: the server sends no PING of its own`, async () => {
      const h = start(keepalive ? { keepalive } : {});
      const c = await h.connect();
      await sleep(80); // a keepalive tick is at most every 10 ms
      const before = await c.sentinel();
      expect(before.filter((f) => f.type === T.PING)).toEqual([]);
    });
  }

  test("gRPC's ping enforcement by default: two quick PINGs past the first are allowed, the third is GOAWAY too_many_pings", async () => {
    const h = start({ minPingIntervalMs: undefined });
    const c = await h.connect();
    for (let i = 1; i <= 3; i++) {
      c.send(rawFrame(T.PING, 0, 0, Buffer.alloc(8, i)));
      await c.peer.next((f) => f.type === T.PING && (f.flags & F.ACK) !== 0 && f.payload[0] === i, 5000, `the ACK of PING ${i}`);
    }
    expect(c.peer.seen.filter((f) => f.type === T.GOAWAY)).toEqual([]);
    c.send(rawFrame(T.PING, 0, 0, Buffer.alloc(8, 4)));
    const g = await c.peer.goaway();
    expect(g).toEqual({ last: 0, code: E.ENHANCE_YOUR_CALM, debug: "too_many_pings" });
    await until(() => h.server.connections === 0, 5000, "the session to close");
    expect(h.lines.filter((l) => l.includes("TEST connection from"))).toEqual([
      expect.stringMatching(
        new RegExp(
          `\twarn\tTEST connection from ${WHO} closed \\(GOAWAY ENHANCE_YOUR_CALM\\): client pings more often than every 15000 ms \\(too_many_pings\\)$`,
        ),
      ),
    ]);
  });

  test("minPingIntervalMs 0: any number of PINGs is allowed", async () => {
    const h = start({ minPingIntervalMs: 0 });
    const c = await h.connect();
    for (let i = 0; i < 6; i++) await c.sentinel();
    expect(c.peer.seen.filter((f) => f.type === T.GOAWAY)).toEqual([]);
  });

  test("resetBudget: the burst of resets is allowed, the one past it is GOAWAY ENHANCE_YOUR_CALM, logged as a warning", async () => {
    const h = start({ resetBudget: { burst: 2, perSecond: 0.001 } });
    const c = await h.connect();
    c.send(headersFrame(1, req()), rst(1, E.CANCEL), headersFrame(3, req()), rst(3, E.CANCEL));
    expect((await c.sentinel()).filter((f) => f.type === T.GOAWAY)).toEqual([]);
    c.send(headersFrame(5, req()), rst(5, E.CANCEL));
    expect(await c.peer.goaway()).toEqual({ last: 5, code: E.ENHANCE_YOUR_CALM, debug: "too_many_resets" });
    await until(() => h.server.connections === 0, 5000, "the session to close");
    expect(h.lines.filter((l) => l.includes("TEST connection from"))).toEqual([
      expect.stringMatching(
        new RegExp(
          `\twarn\tTEST connection from ${WHO} closed \\(GOAWAY ENHANCE_YOUR_CALM\\): client reset streams faster than 0\\.001/s after a burst of 2 \\(too_many_resets\\)$`,
        ),
      ),
    ]);
  });

  test("the default reset budget is nghttp2's: a burst of 1000, 33 a second", async () => {
    const h = start();
    const c = await h.connect();
    const frames: Buffer[] = [];
    // 500 past the burst: the refill (33/s) would need 15 s to cover them, however loaded the machine.
    for (let i = 0; i < 1500; i++) frames.push(headersFrame(2 * i + 1, req()), rst(2 * i + 1, E.CANCEL));
    c.send(...frames);
    expect((await c.peer.goaway()).code).toBe(E.ENHANCE_YOUR_CALM);
    await until(() => h.server.connections === 0, 5000, "the session to close");
    expect(
      h.lines.some((l) =>
        l.endsWith(
          `\tTEST connection from ${WHO} closed (GOAWAY ENHANCE_YOUR_CALM): client reset streams faster than 33/s after a burst of 1000 (too_many_resets)`,
        ),
      ),
    ).toBe(true);
  });

  test("a connection that fails for another reason is logged at debug; a clean close is not logged", async () => {
    const h = start();
    const clean = await h.connect();
    clean.peer.destroy();
    await until(() => h.server.connections === 0, 5000, "the clean close");
    expect(h.lines.filter((l) => l.includes("connection closed"))).toEqual([]);
    const bad = await RawPeer.connect(h.path, { preface: false });
    bad.send(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    await bad.waitClosed();
    await until(() => h.lines.some((l) => l.includes("connection closed")), 5000, "the failed connection's log line");
    expect(h.lines.filter((l) => l.includes("connection closed"))).toEqual([expect.stringMatching(/\tdebug\tTEST connection closed: \S/)]);
  });
});

describe("request checks and routing", () => {
  test("a method other than POST with a gRPC content type is answered :status 405, ending the stream, never routed", async () => {
    const h = start();
    const c = await h.connect();
    c.send(headersFrame(1, req(OK_PATH, { ":method": "GET" })), headersFrame(3, req(OK_PATH, { ":method": "PUT", "content-type": "application/grpc+proto" })));
    expect(await c.headers(1)).toEqual({ stream: 1, endStream: true, list: [[":status", "405"]] });
    expect(await c.headers(3)).toEqual({ stream: 3, endStream: true, list: [[":status", "405"]] });
    await c.sentinel();
    expect(h.routed).toEqual([]);
  });

  test("a content type that is not gRPC (or none) is answered :status 415, whatever the method", async () => {
    const h = start();
    const c = await h.connect();
    const cases: Record<string, string | null>[] = [
      { "content-type": "text/plain" },
      { "content-type": null },
      { "content-type": "application/grp" },
      { ":method": "GET", "content-type": "text/html" },
      { ":method": null, "content-type": null },
    ];
    cases.forEach((change, i) => c.send(headersFrame(2 * i + 1, req(OK_PATH, change))));
    for (let i = 0; i < cases.length; i++) expect(await c.headers(2 * i + 1)).toEqual({ stream: 2 * i + 1, endStream: true, list: [[":status", "415"]] });
    await c.sentinel();
    expect(h.routed).toEqual([]);
  });

  test("a request without :method is not POST: 405 when its content type is gRPC", async () => {
    const h = start();
    const c = await h.connect();
    c.send(headersFrame(1, req(OK_PATH, { ":method": null })));
    expect((await c.headers(1)).list).toEqual([[":status", "405"]]);
  });

  test("content-type application/grpc+proto is gRPC: routed, with the path and the stream", async () => {
    const h = start();
    const c = await h.connect();
    c.send(headersFrame(3, req(OK_PATH, { "content-type": "application/grpc+proto" })));
    await until(() => h.served.length === 1, 5000, "the call to be routed");
    expect(h.served[0]!.path).toBe(OK_PATH);
    expect(h.served[0]!.stream.id).toBe(3);
    expect(h.routed).toEqual([OK_PATH]);
  });

  test("grpc-encoding identity is served; any other encoding is UNIMPLEMENTED (trailers-only), never routed", async () => {
    const h = start();
    const c = await h.connect();
    c.send(headersFrame(1, req(OK_PATH, { "grpc-encoding": "gzip" })), headersFrame(3, req(OK_PATH, { "grpc-encoding": "identity" })));
    expect(await c.headers(1)).toEqual({
      stream: 1,
      endStream: true,
      list: [...RESPONSE_HEADERS, ["grpc-status", "12"], ["grpc-message", "grpc-encoding gzip is not supported"]],
    });
    await until(() => h.served.length === 1, 5000, "the identity call to be routed");
    expect(h.served[0]!.stream.id).toBe(3);
    expect(h.routed).toEqual([OK_PATH]);
  });

  test("an unknown path is UNIMPLEMENTED in one HEADERS frame ending the stream, with the owner's message", async () => {
    const h = start();
    const c = await h.connect();
    c.send(headersFrame(1, req("/no.Such/Method")));
    const f = await c.peer.nextOf(T.HEADERS, 1);
    expect(f.flags).toBe(F.END_STREAM | F.END_HEADERS);
    expect((await c.sentinel()).filter((x) => x.stream === 1)).toEqual([]);
    expect(decodeHeaders(f).list).toEqual([...RESPONSE_HEADERS, ["grpc-status", "12"], ["grpc-message", "no method /no.Such/Method"]]);
    expect(h.routed).toEqual(["/no.Such/Method"]);
  });

  test("a request without :path is routed as the empty path", async () => {
    const h = start();
    const c = await h.connect();
    c.send(headersFrame(1, req(null)));
    expect((await c.headers(1)).list).toEqual([...RESPONSE_HEADERS, ["grpc-status", "12"], ["grpc-message", "no method "]]);
    expect(h.routed).toEqual([""]);
  });
});

/** A server whose OK_PATH handler starts a GrpcServerCall; the calls, in order. */
function callServer(opts: Parameters<typeof startGrpcServer>[0] = {}): { h: GrpcServerHarness; calls: GrpcServerCall[] } {
  const calls: GrpcServerCall[] = [];
  const h = start({ ...opts, handler: (stream, path) => calls.push(new GrpcServerCall(stream, path)) });
  return { h, calls };
}

/** DATA payload received on `stream` among `frames`, concatenated. */
const dataOf = (frames: RawFrame[], stream: number) => Buffer.concat(frames.filter((f) => f.type === T.DATA && f.stream === stream).map((f) => f.payload));

describe("a call (GrpcServerCall)", () => {
  test("response headers at once, DATA in write order, then trailers with grpc-status 0 and no grpc-message", async () => {
    const { h, calls } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    expect(await c.headers(1)).toEqual({ stream: 1, endStream: false, list: RESPONSE_HEADERS });
    const call = calls[0]!;
    expect(call.path).toBe(OK_PATH);
    expect(call.write(Buffer.from("one|"))).toBe(true);
    expect(call.writev(Buffer.from("two|"), Buffer.from("three"))).toBe(true);
    call.finish({ code: 0, message: "" });
    expect(call.finished).toBe(true);
    const trailers = await c.headers(1);
    expect(trailers).toEqual({ stream: 1, endStream: true, list: [["grpc-status", "0"]] });
    expect(dataOf(c.peer.seen, 1).toString()).toBe("one|two|three");
  });

  test("finish is once only: a second status, and writes after it, send nothing", async () => {
    const { h, calls } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    const call = calls[0]!;
    call.finish({ code: 5, message: "first" });
    expect((await c.headers(1)).list).toEqual([
      ["grpc-status", "5"],
      ["grpc-message", "first"],
    ]);
    call.finish({ code: 13, message: "second" });
    expect(call.write(Buffer.from("late"))).toBe(true);
    expect(call.writev(Buffer.from("la"), Buffer.from("te"))).toBe(true);
    const before = await c.sentinel();
    expect(before.filter((f) => f.stream === 1)).toEqual([]);
    expect(c.peer.seen.filter((f) => f.type === T.DATA)).toEqual([]);
  });

  test("a finished call whose client then ends closes cleanly; the connection serves the next call", async () => {
    const { h, calls } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    calls[0]!.finish({ code: 0, message: "" });
    await c.headers(1);
    c.send(endStream(1), headersFrame(3, req()));
    expect(await c.headers(3)).toEqual({ stream: 3, endStream: false, list: RESPONSE_HEADERS });
    expect(h.server.connections).toBe(1);
    expect(c.peer.seen.filter((f) => f.type === T.GOAWAY || f.type === T.RST_STREAM)).toEqual([]);
  });

  test("grpc-message is percent-encoded: '%' and bytes outside 0x20-0x7e (as UTF-8), nothing else", async () => {
    const { h, calls } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    calls[0]!.finish({ code: 3, message: "a 100% $&~ é\n\t\x7f! 😀" });
    expect((await c.headers(1)).list).toEqual([
      ["grpc-status", "3"],
      ["grpc-message", "a 100%25 $&~ %C3%A9%0A%09%7F! %F0%9F%98%80"],
    ]);
  });

  test("on a stream the client reset, write and writev return true and finish sends nothing", async () => {
    const { h, calls } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    c.send(rst(1, E.CANCEL));
    await c.sentinel();
    const call = calls[0]!;
    expect(call.write(Buffer.from("x"))).toBe(true);
    expect(call.writev(Buffer.from("x"), Buffer.from("y"))).toBe(true);
    call.finish({ code: 0, message: "" });
    expect(call.finished).toBe(true);
    expect((await c.sentinel()).filter((f) => f.stream === 1)).toEqual([]);
  });

  test("write returns false past the stream's high-water mark while the client's window is shut", async () => {
    const { h, calls } = callServer();
    const c = await h.connect({ settings: [[S.INITIAL_WINDOW_SIZE, 0]] });
    c.send(headersFrame(1, req()));
    await c.headers(1);
    expect(calls[0]!.write(Buffer.alloc(300 * 1024))).toBe(false);
    expect(calls[0]!.writev(Buffer.alloc(1), Buffer.alloc(1))).toBe(false);
  });

  test("pause holds the client's stream credit; resume returns it at once", async () => {
    const { h, calls } = callServer({ streamWindow: 65_536 });
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    calls[0]!.pause();
    c.send(data(1, Buffer.alloc(10_000)), data(1, Buffer.alloc(10_000)));
    expect((await c.sentinel()).filter((f) => f.type === T.WINDOW_UPDATE && f.stream === 1)).toEqual([]);
    calls[0]!.resume();
    const wu = await c.peer.nextOf(T.WINDOW_UPDATE, 1);
    expect(wu.payload.readUInt32BE(0)).toBe(20_000);
  });
});

/** A stream host that records what the stream asks of its connection. */
function scriptedStream(): { stream: H2Stream; sent: string[] } {
  const sent: string[] = [];
  const host: StreamHost = {
    peerInitialWindow: 65_535,
    streamWindow: 65_535,
    highWaterMark: 1 << 20,
    socketBlocked: false,
    outputHanded: undefined,
    sendHeaders: (id, headers, end) => sent.push(`headers ${id} ${JSON.stringify(headers)} ${end}`),
    sendReset: (id, code) => sent.push(`reset ${id} ${code}`),
    pump: () => {},
    releaseCredit: () => {},
    streamClosed: (s) => sent.push(`closed ${s.id}`),
    resetPingStrikes: () => {},
  };
  return { stream: new H2Stream(host, 1), sent };
}

describe("a finished call's linger (scripted stream, fake timers)", () => {
  test("a finished stream the client never ends is reset CANCEL (8) after 10 s, not before", () => {
    jest.useFakeTimers();
    const { stream, sent } = scriptedStream();
    const call = new GrpcServerCall(stream, "/p");
    call.finish({ code: 0, message: "" });
    sent.length = 0;
    jest.advanceTimersByTime(9_999);
    expect(sent).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(sent).toEqual(["reset 1 8", "closed 1"]);
  });

  test("the stream's own onClose still runs, once, when it closes after finish", () => {
    jest.useFakeTimers();
    const { stream } = scriptedStream();
    const call = new GrpcServerCall(stream, "/p");
    let closes = 0;
    stream.handlers.onClose = () => closes++;
    call.finish({ code: 0, message: "" });
    stream.remoteReset(E.CANCEL, "test");
    expect(closes).toBe(1);
    jest.advanceTimersByTime(10_000);
    expect(closes).toBe(1);
  });
});

const LIMIT = 16;

/** A server whose OK_PATH handler reads whole requests (limit 16 bytes) into `events`, per stream. */
function readingServer(
  sinkOf?: (events: string[], stream: H2Stream, call: GrpcServerCall) => Partial<RequestSink>,
  opts: Parameters<typeof startGrpcServer>[0] = {},
) {
  const events = new Map<number, string[]>();
  const calls = new Map<number, GrpcServerCall>();
  const h = start({
    ...opts,
    handler: (stream, path) => {
      const ev: string[] = [];
      events.set(stream.id, ev);
      const call = new GrpcServerCall(stream, path);
      calls.set(stream.id, call);
      const sink: RequestSink = {
        onMessage: (b) => ev.push(`msg ${b.toString("hex")}`),
        onEnd: () => ev.push("end"),
        onGone: () => ev.push("gone"),
        onDrain: () => ev.push("drain"),
        ...sinkOf?.(ev, stream, call),
      };
      readRequests(stream, call, LIMIT, sink);
    },
  });
  return { h, events: (id: number) => events.get(id) ?? [], calls };
}

describe("whole requests (readRequests)", () => {
  test("messages split at every byte boundary arrive whole, in order, each in a buffer of its own; then the end", async () => {
    const kept = new Map<number, Buffer[]>();
    const { h, events } = readingServer((ev, stream) => ({
      onMessage: (b) => {
        ev.push("msg");
        kept.set(stream.id, [...(kept.get(stream.id) ?? []), b]);
      },
    }));
    const c = await h.connect();
    const wire = Buffer.concat([lpm(Buffer.from("abc")), lpm(Buffer.alloc(0)), lpm(Buffer.from("0123456789abcdef"))]);
    const ids: number[] = [];
    for (let cut = 1; cut < wire.length; cut++) {
      const id = 2 * cut - 1;
      ids.push(id);
      c.send(headersFrame(id, req()), data(id, wire.subarray(0, cut)), data(id, wire.subarray(cut), true));
    }
    await c.sentinel();
    // Read only now, after every stream: a buffer shared between messages would have been overwritten.
    for (const id of ids) {
      expect((kept.get(id) ?? []).map((b) => b.toString())).toEqual(["abc", "", "0123456789abcdef"]);
      expect(events(id)).toEqual(["msg", "msg", "msg", "end"]);
    }
  });

  test("events: the messages, then the end; a reset after the end is gone, once", async () => {
    const { h, events } = readingServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, Buffer.concat([lpm(Buffer.from("ab")), lpm(Buffer.from("c"))]), true));
    await c.sentinel();
    expect(events(1)).toEqual(["msg 6162", "msg 63", "end"]);
    c.send(rst(1, E.CANCEL));
    await c.sentinel();
    expect(events(1)).toEqual(["msg 6162", "msg 63", "end", "gone"]);
  });

  test("a message of exactly the limit is read; one byte more is RESOURCE_EXHAUSTED (8) as soon as its prefix arrives", async () => {
    const { h, events } = readingServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, lpm(Buffer.alloc(LIMIT, 0x41))));
    await c.sentinel();
    expect(events(1)).toEqual([`msg ${"41".repeat(LIMIT)}`]);
    const prefixOnly = lpm(Buffer.alloc(LIMIT + 1)).subarray(0, 5);
    c.send(headersFrame(3, req()), data(3, prefixOnly));
    await c.headers(3); // response headers
    expect(await c.headers(3)).toEqual({
      stream: 3,
      endStream: true,
      list: [
        ["grpc-status", "8"],
        ["grpc-message", "Received message larger than max (17 vs 16)"],
      ],
    });
    expect(events(3)).toEqual(["gone"]);
  });

  test("after a refusal nothing more is read: later messages, the client's end and a reset give no event", async () => {
    const { h, events } = readingServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, lpm(Buffer.alloc(LIMIT + 1))));
    await c.headers(1);
    expect((await c.headers(1)).list[0]).toEqual(["grpc-status", "8"]);
    c.send(data(1, lpm(Buffer.from("ok"))), data(1, lpm(Buffer.from("again"))), endStream(1));
    await c.sentinel();
    expect(events(1)).toEqual(["gone"]);
    // Refused, then reset by the client (its side still open): onGone is not heard twice.
    c.send(headersFrame(3, req()), data(3, lpm(Buffer.alloc(LIMIT + 1))));
    await c.headers(3);
    expect((await c.headers(3)).list[0]).toEqual(["grpc-status", "8"]);
    c.send(rst(3, E.CANCEL));
    await c.sentinel();
    expect(events(3)).toEqual(["gone"]);
    // Refused on a compressed message, then the client's end between messages: no "end" either.
    c.send(headersFrame(5, req()), data(5, lpm(Buffer.from("z"), true)));
    await c.headers(5);
    expect((await c.headers(5)).list[0]).toEqual(["grpc-status", "13"]);
    c.send(data(5, lpm(Buffer.from("ok"))), endStream(5));
    await c.sentinel();
    expect(events(5)).toEqual(["gone"]);
  });

  test("the stream's handlers set before readRequests are kept", async () => {
    const closes: number[] = [];
    const h = start({
      handler: (stream, path) => {
        stream.handlers.onClose = () => closes.push(stream.id);
        readRequests(stream, new GrpcServerCall(stream, path), LIMIT, { onMessage: () => {}, onEnd: () => {}, onGone: () => {} });
      },
    });
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    c.send(rst(1, E.CANCEL));
    await c.sentinel();
    expect(closes).toEqual([1]);
  });

  test("a message after a refused one in the same DATA frame is not read", async () => {
    const { h, events } = readingServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, Buffer.concat([lpm(Buffer.from("a")), lpm(Buffer.from("b"), true), lpm(Buffer.from("c"))])));
    await c.headers(1);
    expect((await c.headers(1)).list).toEqual([
      ["grpc-status", "13"],
      ["grpc-message", "compressed flag set with identity or empty encoding"],
    ]);
    await c.sentinel();
    expect(events(1)).toEqual(["msg 61", "gone"]);
  });

  test("the client's end inside a message, or inside its prefix, is INTERNAL (13); the sink hears gone, not end", async () => {
    const { h, events } = readingServer();
    const c = await h.connect();
    const whole = lpm(Buffer.from("abcd"));
    c.send(headersFrame(1, req()), data(1, whole.subarray(0, whole.length - 1), true));
    c.send(headersFrame(3, req()), data(3, whole.subarray(0, 3), true));
    for (const id of [1, 3]) {
      await c.headers(id);
      expect((await c.headers(id)).list).toEqual([
        ["grpc-status", "13"],
        ["grpc-message", "the client ended the stream inside a message"],
      ]);
      expect(events(id)).toEqual(["gone"]);
    }
  });

  test("a reset in the middle of a message is gone, once; nothing of the message is read", async () => {
    const { h, events } = readingServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, lpm(Buffer.from("abcd")).subarray(0, 6)), rst(1, E.CANCEL));
    await c.sentinel();
    expect(events(1)).toEqual(["gone"]);
  });

  test("a sink that aborts the stream while reading a message gets no later message from the same DATA", async () => {
    const { h, events } = readingServer((ev, stream) => ({
      onMessage: (b) => {
        ev.push(`msg ${b.toString("hex")}`);
        stream.abort(E.PROTOCOL_ERROR, "test abort");
      },
    }));
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, Buffer.concat([lpm(Buffer.from("a")), lpm(Buffer.from("b"))])));
    expect(await c.peer.rstCode(1)).toBe(E.PROTOCOL_ERROR);
    await c.sentinel();
    expect(events(1)).toEqual(["msg 61", "gone"]);
  });

  test("an error thrown by the sink is not turned into a gRPC status: only refusals end the call", async () => {
    const { h } = readingServer(() => ({
      onMessage: () => {
        throw new Error("sink failure");
      },
    }));
    const c = await h.connect();
    c.send(headersFrame(1, req()), data(1, lpm(Buffer.from("a"))));
    await c.headers(1);
    expect((await c.sentinel()).filter((f) => f.stream === 1)).toEqual([]);
  });

  test("a write that waited is resumed through the sink's onDrain", async () => {
    const { h, events, calls } = readingServer();
    const c = await h.connect({ settings: [[S.INITIAL_WINDOW_SIZE, 0]] });
    c.send(headersFrame(1, req()));
    await c.headers(1);
    expect(calls.get(1)!.write(Buffer.alloc(300 * 1024))).toBe(false);
    await c.sentinel();
    expect(events(1)).toEqual([]);
    c.send(settings([S.INITIAL_WINDOW_SIZE, 0x7fffffff]), windowUpdate(0, 0x7fff0000));
    await until(() => events(1).includes("drain"), 5000, "onDrain");
    expect(events(1)).toEqual(["drain"]);
  });

  test("a sink without onDrain: the drain is ignored and the call goes on", async () => {
    const { h, calls } = readingServer(() => ({ onDrain: undefined }));
    const c = await h.connect({ settings: [[S.INITIAL_WINDOW_SIZE, 0]] });
    c.send(headersFrame(1, req()));
    await c.headers(1);
    expect(calls.get(1)!.write(Buffer.alloc(300 * 1024))).toBe(false);
    c.send(settings([S.INITIAL_WINDOW_SIZE, 0x7fffffff]), windowUpdate(0, 0x7fff0000));
    await until(() => dataOf(c.peer.seen, 1).length === 300 * 1024, 5000, "all the DATA");
    calls.get(1)!.finish({ code: 0, message: "" });
    expect((await c.headers(1)).list).toEqual([["grpc-status", "0"]]);
    // Nothing went wrong on the connection: its close is clean (no line, as for any clean close).
    c.send(endStream(1));
    await c.sentinel();
    c.peer.destroy();
    await until(() => h.server.connections === 0, 5000, "the connection to close");
    expect(h.lines.filter((l) => l.includes("connection closed"))).toEqual([]);
  });
});

describe("the client's end", () => {
  test('a client that half-closes its socket under an open call: the session hears the end ("closed by the peer")', async () => {
    const { h } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    c.peer.socket.end();
    await until(() => h.server.connections === 0, 5000, "the connection to close");
    expect(h.lines.filter((l) => l.includes("connection closed"))).toEqual([
      expect.stringMatching(/\tdebug\tTEST connection closed: connection closed by the peer$/),
    ]);
  });
});

describe("close", () => {
  test("close(): GOAWAY NO_ERROR naming the last stream, an unfinished call reset CANCEL, the socket file removed, no new connections", async () => {
    const { h } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    await h.server.close();
    expect(await c.peer.goaway()).toEqual({ last: 1, code: E.NO_ERROR, debug: "" });
    expect(await c.peer.rstCode(1)).toBe(E.CANCEL);
    await c.peer.waitClosed();
    expect(existsSync(h.path)).toBe(false);
    const refused = await new Promise<string>((r) => net.connect(h.path).once("error", (e: NodeJS.ErrnoException) => r(e.code ?? "")));
    expect(refused).toBe("ENOENT");
    expect(h.server.connections).toBe(0);
  });

  test("close(grace): an open call may still finish; its trailers reach the client, then the connection ends", async () => {
    const { h, calls } = callServer();
    const c = await h.connect();
    c.send(headersFrame(1, req()));
    await c.headers(1);
    let closed = false;
    const closing = h.server.close(5000).then(() => (closed = true));
    expect(await c.peer.goaway()).toEqual({ last: 1, code: E.NO_ERROR, debug: "" });
    expect((await c.sentinel()).filter((f) => f.type === T.RST_STREAM)).toEqual([]);
    expect(closed).toBe(false);
    calls[0]!.write(lpm(Buffer.from("last")));
    calls[0]!.finish({ code: 0, message: "" });
    expect(await c.headers(1)).toEqual({ stream: 1, endStream: true, list: [["grpc-status", "0"]] });
    expect(dataOf(c.peer.seen, 1).toString("hex")).toBe("00000000046c617374"); // flag 0, length 4, "last"
    await closing;
    await c.peer.waitClosed();
    expect(c.peer.seen.filter((f) => f.type === T.RST_STREAM)).toEqual([]);
  });

  test("close() with no connection, and with a client already gone, resolves and removes the socket", async () => {
    const h = start();
    const c = await h.connect();
    c.peer.destroy();
    await until(() => h.server.connections === 0, 5000, "the client to be forgotten");
    await h.server.close();
    expect(existsSync(h.path)).toBe(false);
  });
});
