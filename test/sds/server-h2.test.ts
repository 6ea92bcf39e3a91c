// The SDS socket's gRPC plumbing, now the agent's own HTTP/2 server (src/xds/grpcserver.ts)
// instead of grpc-js: what a client sees for an unknown method, a message over
// ISTIO_GPRC_MAXRECVMSGSIZE (and one exactly at it), ISTIO_GPRC_MAXSTREAMS, a peer refused before
// any byte, a unary call with too few or too many messages, a compressed call, stream
// cancellation reaching the secret source, rapid resets, and back-pressure to a client that does
// not read. Clients are grpc-js and a raw HTTP/2 peer written from the RFC (test/xds/h2-support.ts),
// both independent of the server; requests are encoded by hand where their size matters.

import { afterEach, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import net from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { sdsCodec, SECRET_TYPE_URL } from "../../src/sds/proto.ts";
import { SdsServer, SDS_SERVICE, type SdsServerOptions } from "../../src/sds/server.ts";
import type { SecretItem } from "../../src/sds/item.ts";
import { FakeClock, until } from "./fake-clock.ts";
import { E, F, RawPeer, S, T, headersFrame, rawFrame, rst, windowUpdate, type RawFrame } from "../xds/h2-support.ts";

const codec = sdsCodec();
const pass = (b: Buffer) => b;
const ROOT_PEM = `-----BEGIN CERTIFICATE-----\n${"QUJD".repeat(150)}\n-----END CERTIFICATE-----\n`;

/** A secret source that answers roots at once and never answers `file-root:/hang*`, keeping each requester's signal. */
class FakeSecrets {
  readonly signals: { name: string; signal: AbortSignal }[] = [];
  get(name: string, signal?: AbortSignal): Promise<SecretItem> {
    if (signal) this.signals.push({ name, signal });
    if (name.startsWith("file-root:/hang")) return new Promise<SecretItem>(() => {});
    return Promise.resolve({ resourceName: name, rootCert: ROOT_PEM, createdMs: 0, expireMs: 0, version: "v1" });
  }
  crlFor(): string | undefined {
    return undefined;
  }
  onUpdate(): () => void {
    return () => {};
  }
}

interface Setup {
  server: SdsServer;
  socket: string;
  secrets: FakeSecrets;
  log: ReturnType<typeof memoryLogger>;
  client(): grpc.Client;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(opts: Partial<SdsServerOptions> = {}): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), "sds-h2-"));
  const socket = join(dir, "uds", "socket");
  const secrets = new FakeSecrets();
  const log = memoryLogger();
  const server = new SdsServer(
    { socketPath: socket, authorizer: new PeerAuthorizer("", process.getuid?.() ?? 0), ...opts },
    { log: log.log, secrets, clock: new FakeClock() },
  );
  await server.start();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => server.close());
  return {
    server,
    socket,
    secrets,
    log,
    client() {
      const c = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
      cleanups.push(() => c.close());
      return c;
    },
  };
}

/** A protobuf string field, encoded by hand (tag, varint length, bytes). */
function stringField(field: number, value: string): Buffer {
  const bytes = Buffer.from(value, "utf8");
  const len: number[] = [];
  let n = bytes.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([(field << 3) | 2, ...len]), bytes]);
}

/** A DiscoveryRequest for `names` (field 3) padded with version_info (field 1) to exactly `size` bytes when given. */
function request(names: string[], size?: number): Buffer {
  const base = Buffer.concat(names.map((n) => stringField(3, n)));
  if (size === undefined) return base;
  // version_info of L bytes costs 1 (tag) + 2 (length, for 128 <= L < 16384) + L.
  const pad = size - base.length - 3;
  const out = Buffer.concat([stringField(1, "x".repeat(pad)), base]);
  expect(out.length).toBe(size);
  return out;
}

function statusOf(call: grpc.ClientDuplexStream<Buffer, Buffer> | grpc.ClientWritableStream<Buffer>): Promise<grpc.StatusObject> {
  return new Promise((resolve) => call.on("status", resolve));
}

function bidi(c: grpc.Client, method = "StreamSecrets") {
  const call = c.makeBidiStreamRequest(`/${SDS_SERVICE}/${method}`, pass, pass);
  const got: Buffer[] = [];
  call.on("data", (b: Buffer) => got.push(b));
  call.on("error", () => {});
  return { call, got, status: statusOf(call) };
}

describe("statuses a gRPC client sees", () => {
  test("an unknown method is UNIMPLEMENTED, named as grpc-js named it; the connection still serves", async () => {
    const s = await setup();
    const c = s.client();
    for (const path of [`/${SDS_SERVICE}/WatchSecrets`, "/foo.Bar/Baz"]) {
      const err = await new Promise<grpc.ServiceError | null>((resolve) => c.makeUnaryRequest(path, pass, pass, request(["ROOTCA"]), (e) => resolve(e)));
      expect(err?.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(err?.details).toBe(`The server does not implement the method ${path}`);
    }
    const ok = bidi(c);
    ok.call.write(request(["ROOTCA"]));
    await until(() => ok.got.length === 1, "an answer on the same connection");
    expect(codec.decodeResponse(ok.got[0]!).resources.map((r) => r.name)).toEqual(["ROOTCA"]);
  });

  test("ISTIO_GPRC_MAXRECVMSGSIZE: a message of exactly the limit is served, one byte more ends the stream RESOURCE_EXHAUSTED", async () => {
    const s = await setup({ maxReceiveMessageSize: 1024 });
    const c = s.client();
    const atLimit = bidi(c);
    atLimit.call.write(request(["ROOTCA"], 1024));
    await until(() => atLimit.got.length === 1, "the answer to a 1024-byte request");
    expect(codec.decodeResponse(atLimit.got[0]!).resources.map((r) => r.name)).toEqual(["ROOTCA"]);

    const over = bidi(c);
    over.call.write(request(["ROOTCA"], 1025));
    const st = await over.status;
    expect(st.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(st.details).toBe("Received message larger than max (1025 vs 1024)");
    expect(over.got).toEqual([]);
    // The stream that was at the limit is still served afterwards.
    atLimit.call.write(request(["ROOTCA"]));
    await until(() => atLimit.got.length === 2, "a second answer on the stream at the limit");
  });

  test("a malformed request ends the stream INVALID_ARGUMENT", async () => {
    const s = await setup();
    const b = bidi(s.client());
    b.call.write(Buffer.from([0x1a, 0x7f, 0x41])); // a string field claiming 127 bytes, 1 present
    const st = await b.status;
    expect(st.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(st.details).toStartWith("malformed discovery request: ");
  });

  test("FetchSecrets with no request or two requests is UNIMPLEMENTED, as grpc-js answered", async () => {
    const s = await setup();
    const c = s.client();
    const path = `/${SDS_SERVICE}/FetchSecrets`;
    const none = c.makeClientStreamRequest(path, pass, pass, () => {});
    const noneStatus = statusOf(none);
    none.end();
    expect(await noneStatus).toMatchObject({ code: grpc.status.UNIMPLEMENTED, details: `Received no request message for server streaming method ${path}` });
    const two = c.makeClientStreamRequest(path, pass, pass, () => {});
    const twoStatus = statusOf(two);
    two.write(request(["ROOTCA"]));
    two.write(request(["ROOTCA"]));
    two.end();
    expect(await twoStatus).toMatchObject({
      code: grpc.status.UNIMPLEMENTED,
      details: `Received a second request message for server streaming method ${path}`,
    });
  });

  test("a compressed call (grpc-encoding gzip) is UNIMPLEMENTED, as on the XDS socket", async () => {
    const s = await setup();
    const c = new grpc.Client(`unix://${s.socket}`, grpc.credentials.createInsecure(), { "grpc.default_compression_algorithm": 2 });
    cleanups.push(() => c.close());
    const b = bidi(c);
    b.call.write(request(["ROOTCA"]));
    const st = await b.status;
    expect(st.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(st.details).toContain("grpc-encoding gzip is not supported");
  });
});

/** One call over node:http2 (an HTTP/2 client independent of ours): sends `body` as DATA, then ends; the grpc-status and grpc-message it gets. */
async function rawCall(socket: string, method: string, body: Buffer): Promise<{ status: string | undefined; message: string | undefined }> {
  const session = http2.connect("http://localhost", { createConnection: () => net.connect(socket) });
  session.on("error", () => {});
  try {
    const req = session.request({ ":method": "POST", ":path": `/${SDS_SERVICE}/${method}`, "content-type": "application/grpc", te: "trailers" });
    req.on("error", () => {});
    req.on("data", () => {});
    const trailers = new Promise<http2.IncomingHttpHeaders>((resolve) => {
      req.on("trailers", (t) => resolve(t));
      req.on("response", (h) => h["grpc-status"] !== undefined && resolve(h)); // trailers-only
    });
    req.end(body);
    const t = await trailers;
    return { status: t["grpc-status"] as string | undefined, message: t["grpc-message"] as string | undefined };
  } finally {
    session.destroy();
  }
}

describe("malformed gRPC framing (a raw HTTP/2 client)", () => {
  test("a message with the compressed flag and no grpc-encoding ends the call INTERNAL", async () => {
    const s = await setup();
    const msg = request(["ROOTCA"]);
    const prefix = Buffer.from([1, 0, 0, 0, msg.length]);
    expect(await rawCall(s.socket, "StreamSecrets", Buffer.concat([prefix, msg]))).toEqual({
      status: "13",
      message: "compressed flag set with identity or empty encoding",
    });
  });

  test("a client that ends its side inside a message gets INTERNAL; one that ends between messages gets OK", async () => {
    const s = await setup();
    const msg = request(["ROOTCA"]);
    const whole = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]);
    expect(await rawCall(s.socket, "StreamSecrets", whole.subarray(0, whole.length - 1))).toEqual({
      status: "13",
      message: "the client ended the stream inside a message",
    });
    expect(await rawCall(s.socket, "StreamSecrets", whole.subarray(0, 3))).toEqual({
      status: "13",
      message: "the client ended the stream inside a message",
    });
    expect((await rawCall(s.socket, "StreamSecrets", whole)).status).toBe("0");
  });
});

describe("connections", () => {
  test("a peer outside XDS_AUTHORIZED_UIDS gets no byte: the socket is closed before the server's SETTINGS", async () => {
    const s = await setup({ authorizer: new PeerAuthorizer("4242", 0) });
    const peer = await RawPeer.connect(s.socket);
    await peer.waitClosed();
    expect(peer.seen).toEqual([]);
    expect(s.log.lines.some((l) => l.includes("SDS: refused connection") && l.includes("uid 0 not in authorized UIDs [4242]"))).toBe(true);
  });

  test("ISTIO_GPRC_MAXSTREAMS is advertised and enforced: the stream past it is refused, a freed slot is reused", async () => {
    const s = await setup({ maxConcurrentStreams: 2 });
    const peer = await RawPeer.connect(s.socket);
    const settings = await peer.next((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0);
    const advertised: Record<number, number> = {};
    for (let i = 0; i < settings.payload.length; i += 6) advertised[settings.payload.readUInt16BE(i)] = settings.payload.readUInt32BE(i + 2);
    expect(advertised[S.MAX_CONCURRENT_STREAMS]).toBe(2);
    const headers = sdsHeaders("StreamSecrets");
    peer.send(headersFrame(1, headers), headersFrame(3, headers), headersFrame(5, headers));
    expect(await peer.rstCode(5)).toBe(E.REFUSED_STREAM);
    peer.send(rst(1, E.CANCEL), headersFrame(7, headers));
    const h7 = await peer.nextOf(T.HEADERS, 7); // sentinel: stream 7 got response headers
    expect(h7.flags & F.END_STREAM).toBe(0);
    expect(peer.seen.filter((f) => f.type === T.RST_STREAM).map((f) => f.stream)).toEqual([5]);
    peer.destroy();
  });

  test("5,000 open-then-reset streams: GOAWAY ENHANCE_YOUR_CALM (too_many_resets); a normal client is served after", async () => {
    const s = await setup();
    const peer = await RawPeer.connect(s.socket);
    const headers = sdsHeaders("StreamSecrets");
    for (let batch = 0; batch < 50; batch++) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 100; i++) {
        const id = 2 * (batch * 100 + i) + 1;
        frames.push(headersFrame(id, headers), rst(id, E.CANCEL));
      }
      peer.send(...frames);
    }
    const g = await peer.goaway(10_000);
    expect(g.code).toBe(E.ENHANCE_YOUR_CALM);
    expect(g.debug).toBe("too_many_resets");
    await peer.waitClosed();
    const b = bidi(s.client());
    b.call.write(request(["ROOTCA"]));
    await until(() => b.got.length === 1, "a normal client's answer");
    expect(s.log.lines.some((l) => l.includes(`SDS connection from pid=${process.pid} `) && l.includes("too_many_resets"))).toBe(true);
  });
});

describe("cancellation", () => {
  test("a cancelled StreamSecrets aborts the secret request it was waiting for", async () => {
    const s = await setup();
    const b = bidi(s.client());
    b.call.write(request(["file-root:/hang-stream"]));
    await until(() => s.secrets.signals.some((x) => x.name === "file-root:/hang-stream"), "the request reaching the secret source");
    const sig = s.secrets.signals.find((x) => x.name === "file-root:/hang-stream")!.signal;
    expect(sig.aborted).toBe(false);
    b.call.cancel();
    await until(() => sig.aborted, "the signal to abort");
    await until(() => s.server.streamCount() === 0, "the stream to be forgotten");
  });

  test("a cancelled FetchSecrets aborts the secret request it was waiting for", async () => {
    const s = await setup();
    const c = s.client();
    const call = c.makeUnaryRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, request(["file-root:/hang-fetch"]), () => {});
    await until(() => s.secrets.signals.some((x) => x.name === "file-root:/hang-fetch"), "the request reaching the secret source");
    const sig = s.secrets.signals.find((x) => x.name === "file-root:/hang-fetch")!.signal;
    call.cancel();
    await until(() => sig.aborted, "the signal to abort");
  });
});

function sdsHeaders(method: string): [string, string][] {
  return [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", `/${SDS_SERVICE}/${method}`],
    [":authority", "localhost"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
  ];
}

/** A gRPC-framed message as one DATA frame. */
function grpcData(stream: number, message: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return rawFrame(T.DATA, 0, stream, Buffer.concat([prefix, message]));
}

describe("back-pressure", () => {
  test("a client that does not read its answers is stalled by flow control, and resumed once it reads", async () => {
    const s = await setup();
    // Our receive window 0: the server may send no DATA until we open it.
    const peer = await RawPeer.connect(s.socket, { settings: [[S.INITIAL_WINDOW_SIZE, 0]] });
    const settings = await peer.next((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0);
    let streamWindow = 65_535;
    for (let i = 0; i < settings.payload.length; i += 6)
      if (settings.payload.readUInt16BE(i) === S.INITIAL_WINDOW_SIZE) streamWindow = settings.payload.readUInt32BE(i + 2);
    let connWindow = 65_535;
    const credit = (f: RawFrame) => {
      if (f.type !== T.WINDOW_UPDATE) return;
      if (f.stream === 0) connWindow += f.payload.readUInt32BE(0);
      else if (f.stream === 1) streamWindow += f.payload.readUInt32BE(0);
    };
    const taken = new Set<RawFrame>();
    const absorb = () => {
      for (const f of peer.seen) if (!taken.has(f)) (taken.add(f), credit(f));
    };
    peer.send(headersFrame(1, sdsHeaders("StreamSecrets")));
    const one = grpcData(1, request(["ROOTCA"], 200)); // an empty nonce: every one is answered
    const size = one.length - 9;
    const TOTAL = 3000;
    let sent = 0;
    const sendWhatFits = () => {
      absorb();
      const n = Math.min(TOTAL - sent, Math.floor(Math.min(streamWindow, connWindow) / size));
      if (n > 0) peer.send(...Array.from({ length: n }, () => one));
      sent += n;
      streamWindow -= n * size;
      connWindow -= n * size;
      return n;
    };
    // Send what the windows allow; when they are used up, a PING's ACK says the server has read
    // (and credited back) everything sent before it: no credit then means the stream is stalled.
    for (let round = 0; sent < TOTAL; round++) {
      if (sendWhatFits() > 0) continue;
      peer.send(rawFrame(T.PING, 0, 0, Buffer.alloc(8, round % 256)));
      await peer.next((f) => f.type === T.PING && (f.flags & F.ACK) !== 0);
      absorb();
      if (Math.min(streamWindow, connWindow) < size) break;
    }
    expect(sent).toBeLessThan(TOTAL);
    expect(peer.seen.some((f) => f.type === T.DATA)).toBe(false);
    // Open our window: the answers flow, the server reads again, and everything is answered.
    peer.send(rawFrame(T.SETTINGS, 0, 0, Buffer.from([0, S.INITIAL_WINDOW_SIZE, 0x7f, 0xff, 0xff, 0xff])), windowUpdate(0, 0x7fff0000));
    while (sent < TOTAL || countMessages(peer.seen) < TOTAL) {
      sendWhatFits();
      await peer.next(() => true, 10_000, "answers and window updates");
    }
    expect(sent).toBe(TOTAL);
    expect(countMessages(peer.seen)).toBe(TOTAL);
    peer.destroy();
  }, 30_000);
});

/** Whole gRPC messages in the DATA of stream 1 seen so far. */
function countMessages(seen: RawFrame[]): number {
  const bytes = Buffer.concat(seen.filter((f) => f.type === T.DATA && f.stream === 1).map((f) => f.payload));
  let n = 0;
  let p = 0;
  while (p + 5 <= bytes.length) {
    const len = bytes.readUInt32BE(p + 1);
    if (p + 5 + len > bytes.length) break;
    p += 5 + len;
    n++;
  }
  return n;
}
