// H2Session interop against Bun's node:http2 (an independent HTTP/2 implementation, which uses
// Huffman coding and the dynamic table), in both roles: headers, DATA both ways, trailers, resets,
// GOAWAY, and 20 MiB each way under tight windows with the bytes checked by hash (DATA is handed
// out as views into socket chunks and written by reference, so reuse of a chunk would show here).

import { afterEach, describe, expect, test } from "bun:test";
import http2 from "node:http2";
import net from "node:net";
import { createHash, randomBytes } from "node:crypto";
import { H2Session, type H2Stream } from "../../src/xds/h2/session.ts";
import type { HeaderList } from "../../src/xds/h2/hpack.ts";
import { E, TestServer, until, withTimeout } from "./h2-support.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MiB = 1 << 20;
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const get = (h: HeaderList, n: string) => h.find(([k]) => k === n)?.[1];

/** A server stream that echoes DATA back by reference (pausing on backpressure) and ends with trailers. */
function echo(
  st: H2Stream,
  trailers: HeaderList = [
    ["grpc-status", "0"],
    ["grpc-message", "ok"],
  ],
): void {
  st.respond([
    [":status", "200"],
    ["content-type", "application/grpc"],
  ]);
  st.handlers = {
    onData: (c) => {
      if (!st.write(c)) st.pause();
    },
    onDrain: () => st.resume(),
    onEnd: () => st.end(trailers),
  };
}

function h2client(path: string, settings: http2.Settings = {}): http2.ClientHttp2Session {
  const c = http2.connect("http://localhost", { createConnection: () => net.connect(path), settings });
  c.on("error", () => {});
  cleanups.push(() => c.destroy());
  return c;
}

interface Collected {
  headers: Promise<http2.IncomingHttpHeaders>;
  trailers: Promise<http2.IncomingHttpHeaders>;
  body: Promise<Buffer>;
  closed: Promise<number>;
}
function collect(req: http2.ClientHttp2Stream): Collected {
  const parts: Buffer[] = [];
  req.on("data", (d: Buffer) => parts.push(Buffer.from(d)));
  req.on("error", () => {});
  return {
    headers: new Promise((r) => req.once("response", r)),
    trailers: new Promise((r) => req.once("trailers", r)),
    body: new Promise((r) => req.once("end", () => r(Buffer.concat(parts)))),
    closed: new Promise((r) => req.once("close", () => r(req.rstCode ?? 0))),
  };
}

async function writeAll(w: { write(b: Buffer): boolean; once(ev: "drain", f: () => void): unknown }, data: Buffer, chunk = 64 * 1024): Promise<void> {
  for (let o = 0; o < data.length; o += chunk) {
    if (!w.write(data.subarray(o, o + chunk))) await new Promise<void>((r) => w.once("drain", r));
  }
}

describe("our server, node:http2 client", () => {
  test("request headers (Huffman + dynamic table over several streams), DATA both ways, trailers", async () => {
    const seen: HeaderList[] = [];
    const srv = await TestServer.start(() => ({
      onStream: (st, h) => {
        seen.push(h);
        echo(st);
      },
    }));
    cleanups.push(() => srv.stop());
    const c = h2client(srv.path);
    const ascii = Array.from({ length: 94 }, (_, i) => String.fromCharCode(33 + i)).join("");
    for (let i = 0; i < 3; i++) {
      const req = c.request({
        ":method": "POST",
        ":path": "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
        "content-type": "application/grpc",
        "x-printable": ascii,
        "x-long": "L".repeat(300) + i,
        "x-n": String(i),
      });
      const got = collect(req);
      const body = Buffer.from(`message ${i} `.repeat(1000));
      req.end(body);
      expect(Number((await got.headers)[":status"])).toBe(200);
      expect((await got.body).equals(body)).toBe(true);
      const t = await got.trailers;
      expect(t["grpc-status"]).toBe("0");
      expect(t["grpc-message"]).toBe("ok");
      expect(await got.closed).toBe(0);
    }
    expect(seen.length).toBe(3);
    seen.forEach((h, i) => {
      expect(get(h, ":method")).toBe("POST");
      expect(get(h, ":path")).toBe("/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources");
      expect(get(h, "content-type")).toBe("application/grpc");
      expect(get(h, "x-printable")).toBe(ascii);
      expect(get(h, "x-long")).toBe("L".repeat(300) + i);
      expect(get(h, "x-n")).toBe(String(i));
    });
  });

  test("20 MiB each way, small windows both sides, echoed by reference: bytes intact", async () => {
    const srv = await TestServer.start(() => ({ streamWindow: 65_535, connectionWindow: 65_535, highWaterMark: 64 * 1024, onStream: (st) => echo(st) }));
    cleanups.push(() => srv.stop());
    const c = h2client(srv.path, { initialWindowSize: 65_535 });
    const data = randomBytes(20 * MiB);
    const req = c.request({ ":method": "POST", ":path": "/x", "content-type": "application/grpc" });
    const h = createHash("sha256");
    let n = 0;
    req.on("data", (d: Buffer) => {
      h.update(d);
      n += d.length;
    });
    const ended = new Promise<void>((r) => req.once("end", r));
    req.on("error", () => {});
    await writeAll(req, data);
    req.end();
    await withTimeout(ended, 12_000, "the echo to end");
    expect(n).toBe(data.length);
    expect(h.digest("hex")).toBe(sha(data));
  }, 15_000);

  test("client RST_STREAM: the server stream's onReset gets the code", async () => {
    let reset: [number, string] | undefined;
    let gotData = false;
    const srv = await TestServer.start(() => ({
      onStream: (st) => {
        st.respond([[":status", "200"]]);
        st.handlers = { onData: () => (gotData = true), onReset: (code, why) => (reset = [code, why]) };
      },
    }));
    cleanups.push(() => srv.stop());
    const c = h2client(srv.path);
    const req = c.request({ ":method": "POST", ":path": "/x" });
    req.on("error", () => {});
    req.write(Buffer.from("hi"));
    await until(() => gotData, 5000, "data on the server stream");
    req.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    await until(() => reset !== undefined, 5000, "onReset");
    expect(reset![0]).toBe(E.ENHANCE_YOUR_CALM);
    expect((await srv.session()).streams.size).toBe(0);
  });

  test("trailers-only response (HEADERS with END_STREAM) and PING from the client", async () => {
    const srv = await TestServer.start(() => ({
      onStream: (st) =>
        st.respond(
          [
            [":status", "200"],
            ["content-type", "application/grpc"],
            ["grpc-status", "12"],
            ["grpc-message", "unknown%20method"],
          ],
          true,
        ),
    }));
    cleanups.push(() => srv.stop());
    const c = h2client(srv.path);
    const req = c.request({ ":method": "POST", ":path": "/nope", "content-type": "application/grpc" });
    const got = collect(req);
    req.end();
    const h = await withTimeout(got.headers, 5000, "response");
    expect(h["grpc-status"]).toBe("12");
    expect(h["grpc-message"]).toBe("unknown%20method");
    expect((await withTimeout(got.body, 5000, "end")).length).toBe(0);
    const rtt = await withTimeout(
      new Promise<number>((r, j) => c.ping(Buffer.from("abcdefgh"), (e, d, payload) => (e ? j(e) : r(payload.length)))),
      5000,
      "PING ACK",
    );
    expect(rtt).toBe(8);
  });

  test("server stream.reset(code): the client sees RST_STREAM with that code", async () => {
    const srv = await TestServer.start(() => ({ onStream: (st) => st.reset(E.REFUSED_STREAM) }));
    cleanups.push(() => srv.stop());
    const c = h2client(srv.path);
    const got = collect(c.request({ ":method": "POST", ":path": "/x" }));
    expect(await withTimeout(got.closed, 5000, "stream close")).toBe(E.REFUSED_STREAM);
  });
});

/** node:http2 server on 127.0.0.1; `onStream` handles each stream. */
async function h2server(onStream: (s: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders) => void, settings: http2.Settings = {}) {
  const server = http2.createServer({ settings });
  const sessions: http2.ServerHttp2Session[] = [];
  server.on("session", (s) => sessions.push(s));
  server.on("stream", (s, h) => onStream(s as http2.ServerHttp2Stream, h));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as net.AddressInfo).port;
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  );
  return { port, sessions };
}

async function ourClient(port: number, opts: Partial<ConstructorParameters<typeof H2Session>[1]> = {}) {
  const sock = net.connect({ host: "127.0.0.1", port });
  await new Promise<void>((r, j) => {
    sock.once("connect", () => r());
    sock.once("error", j);
  });
  let closeErr: { e: Error | undefined } | undefined;
  const goaways: [number, number, string][] = [];
  const s = new H2Session(sock, {
    role: "client",
    ...opts,
    onClose: (e) => (closeErr = { e }),
    onGoaway: (code, last, debug) => goaways.push([code, last, debug]),
  });
  cleanups.push(() => s.destroy());
  return { s, goaways, closed: () => closeErr };
}

interface ClientResult {
  headers: HeaderList[];
  data: Buffer[];
  ended: boolean;
  reset?: [number, string];
  closed: boolean;
}
function watch(st: H2Stream): ClientResult {
  const r: ClientResult = { headers: [], data: [], ended: false, closed: false };
  st.handlers = {
    onHeaders: (h) => r.headers.push(h),
    onData: (c) => r.data.push(Buffer.from(c)),
    onEnd: () => (r.ended = true),
    onReset: (code, why) => (r.reset = [code, why]),
    onClose: () => (r.closed = true),
  };
  return r;
}

const REQ: HeaderList = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"],
  [":authority", "istiod:15010"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
];

function nodeEcho(s: http2.ServerHttp2Stream): void {
  s.respond({ ":status": 200, "content-type": "application/grpc", "x-resp": "R".repeat(200) }, { waitForTrailers: true });
  s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "0", "grpc-message": "all%20done" }));
  s.on("error", () => {});
  s.pipe(s);
}

describe("our client, node:http2 server", () => {
  test("response headers, DATA both ways, trailers; request headers arrive intact", async () => {
    const reqHeaders: http2.IncomingHttpHeaders[] = [];
    const { port } = await h2server((s, h) => {
      reqHeaders.push(h);
      nodeEcho(s);
    });
    const { s } = await ourClient(port);
    for (let i = 0; i < 3; i++) {
      const st = s.request([...REQ, ["authorization", "Bearer " + "t".repeat(500)], ["x-i", String(i)]]);
      const r = watch(st);
      const body = Buffer.from(`payload ${i};`.repeat(5000));
      st.write(body.subarray(0, 1000));
      st.write(body.subarray(1000));
      st.end();
      await until(() => r.closed, 5000, "stream close");
      expect(r.reset).toBeUndefined();
      expect(r.headers.length).toBe(2);
      expect(get(r.headers[0]!, ":status")).toBe("200");
      expect(get(r.headers[0]!, "x-resp")).toBe("R".repeat(200));
      expect(get(r.headers[1]!, "grpc-status")).toBe("0");
      expect(get(r.headers[1]!, "grpc-message")).toBe("all%20done");
      expect(Buffer.concat(r.data).equals(body)).toBe(true);
      expect(r.ended).toBe(true);
    }
    expect(reqHeaders.length).toBe(3);
    reqHeaders.forEach((h, i) => {
      expect(h[":path"]).toBe("/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources");
      expect(h["authorization"]).toBe("Bearer " + "t".repeat(500));
      expect(h["te"]).toBe("trailers");
      expect(h["x-i"]).toBe(String(i));
    });
  });

  test("trailers-only response from the server; PING from the server is acknowledged", async () => {
    const { port, sessions } = await h2server((s) => {
      s.on("error", () => {});
      s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "draining" }, { endStream: true });
    });
    const { s } = await ourClient(port);
    const st = s.request(REQ);
    const r = watch(st);
    await until(() => r.ended, 5000, "the server's END_STREAM");
    expect(r.closed).toBe(false); // our side is still open
    st.end();
    await until(() => r.closed, 5000, "stream close");
    expect(r.reset).toBeUndefined();
    expect(r.headers.length).toBe(1);
    expect(get(r.headers[0]!, "grpc-status")).toBe("14");
    expect(get(r.headers[0]!, "grpc-message")).toBe("draining");
    const n = await withTimeout(
      new Promise<number>((res, j) => sessions[0]!.ping(Buffer.from("12345678"), (e, _d, p) => (e ? j(e) : res(p.length)))),
      5000,
      "PING ACK",
    );
    expect(n).toBe(8);
  });

  test("RST_STREAM from the server: onReset with the code", async () => {
    const { port } = await h2server((s) => {
      s.respond({ ":status": 200 });
      s.on("error", () => {});
      s.once("data", () => s.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM));
    });
    const { s } = await ourClient(port);
    const st = s.request(REQ);
    const r = watch(st);
    st.write(Buffer.from("x"));
    await until(() => r.closed, 5000, "stream close");
    expect(r.reset?.[0]).toBe(E.ENHANCE_YOUR_CALM);
    expect(s.closed).toBe(false);
  });

  test("GOAWAY: onGoaway with code, last stream id and debug; streams above it are refused, the one below completes", async () => {
    const streams: http2.ServerHttp2Stream[] = [];
    const { port, sessions } = await h2server((s) => {
      streams.push(s);
      s.on("error", () => {});
    });
    const { s, goaways } = await ourClient(port);
    const a = s.request(REQ);
    const ra = watch(a);
    a.write(Buffer.from("a"));
    await until(() => streams.length === 1, 5000, "first stream at the server");
    const b = s.request(REQ);
    const rb = watch(b);
    b.write(Buffer.from("b"));
    await until(() => streams.length === 2, 5000, "second stream at the server");
    sessions[0]!.goaway(http2.constants.NGHTTP2_NO_ERROR, 1, Buffer.from("draining"));
    await until(() => goaways.length === 1, 5000, "onGoaway");
    expect(goaways[0]).toEqual([E.NO_ERROR, 1, "draining"]);
    await until(() => rb.closed, 5000, "stream 3 refused");
    expect(rb.reset?.[0]).toBe(E.REFUSED_STREAM);
    expect(ra.closed).toBe(false);
    expect(() => s.request(REQ)).toThrow();
    streams[0]!.respond({ ":status": 200 }, { waitForTrailers: true });
    streams[0]!.on("wantTrailers", () => streams[0]!.sendTrailers({ "grpc-status": "0" }));
    streams[0]!.end("bye");
    a.end();
    await until(() => ra.closed, 5000, "stream 1 to finish");
    expect(ra.reset).toBeUndefined();
    expect(Buffer.concat(ra.data).toString()).toBe("bye");
    expect(get(ra.headers[1]!, "grpc-status")).toBe("0");
  });

  test("20 MiB each way through a node:http2 echo server with small windows: bytes intact", async () => {
    const { port } = await h2server(nodeEcho, { initialWindowSize: 65_535 });
    const { s } = await ourClient(port, { streamWindow: 65_535, connectionWindow: 65_535, highWaterMark: 128 * 1024 });
    const data = randomBytes(20 * MiB);
    const st = s.request(REQ);
    const h = createHash("sha256");
    let n = 0;
    let ended = false;
    let reset: number | undefined;
    let drain: (() => void) | undefined;
    st.handlers = {
      onData: (c) => {
        h.update(c);
        n += c.length;
      },
      onEnd: () => (ended = true),
      onReset: (code) => (reset = code),
      onDrain: () => drain?.(),
    };
    for (let o = 0; o < data.length; o += 100_000) {
      if (!st.write(data.subarray(o, o + 100_000))) await withTimeout(new Promise<void>((r) => (drain = r)), 10_000, "onDrain");
    }
    st.end();
    await until(() => ended || reset !== undefined, 12_000, "the echo to end");
    expect(reset).toBeUndefined();
    expect(n).toBe(data.length);
    expect(h.digest("hex")).toBe(sha(data));
  }, 15_000);
});
