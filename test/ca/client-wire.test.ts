// The CA client's HTTP/2 and gRPC wire behaviour against a scripted CA on node:http2: the request
// headers as grpc-go sends them, statuses from trailers and trailers-only responses, grpc-message
// decoding, non-gRPC HTTP answers, the response size cap, the deadline, and the connection's
// reuse, redial after a failure or a CA restart, GOAWAY and idle close.

import { describe, expect, test, beforeAll, afterAll, beforeEach } from "bun:test";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IstioCaClient } from "../../src/ca/client.ts";
import { CaError } from "../../src/ca/errors.ts";
import { FileTokenSource } from "../../src/ca/token.ts";
import { caCodec } from "../../src/ca/proto.ts";
import { servingCert, type TlsMaterial } from "../support/fake-ca.ts";
import { until } from "../sds/fake-clock.ts";
import { ScriptedCa, certResponse, frame, reply, trailersOnly } from "./scripted-ca.ts";

let tlsCa: ScriptedCa;
let plainCa: ScriptedCa;
let material: TlsMaterial;
let dir: string;
let chain: string[];
const sleeps: number[] = [];

type Opts = ConstructorParameters<typeof IstioCaClient>[0];
type Deps = ConstructorParameters<typeof IstioCaClient>[1];

function client(ca: ScriptedCa, over: Partial<Opts> = {}, deps: Partial<Deps> = {}): IstioCaClient {
  const tls = ca === tlsCa;
  return new IstioCaClient(
    {
      address: ca.address,
      tls,
      ...(tls ? { rootCertPath: join(dir, "root.pem"), serverName: "istiod.istio-system.svc" } : {}),
      headers: { ClusterID: "Kubernetes" },
      ...over,
    },
    { tokens: new FileTokenSource(join(dir, "token")), sleep: async (ms) => (sleeps.push(ms), true), random: () => 0.5, attemptTimeoutMs: 5000, ...deps },
  );
}

async function failure(c: IstioCaClient): Promise<CaError> {
  const e = await c.sign("csr", 60).then(
    () => new Error("signed, expected a failure"),
    (x) => x,
  );
  expect(e).toBeInstanceOf(CaError);
  return e as CaError;
}

beforeAll(async () => {
  material = await servingCert();
  tlsCa = await ScriptedCa.start({ key: material.keyPem, cert: material.certPem });
  plainCa = await ScriptedCa.start();
  dir = mkdtempSync(join(tmpdir(), "caclient-wire-"));
  writeFileSync(join(dir, "root.pem"), material.rootPem);
  writeFileSync(join(dir, "token"), "tok-123\n");
  chain = [material.certPem, material.rootPem];
});
afterAll(async () => {
  await tlsCa.stop();
  await plainCa.stop();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  for (const ca of [tlsCa, plainCa]) {
    ca.requests.length = 0;
    ca.answer = reply(frame(certResponse(chain)));
  }
  sleeps.length = 0;
});

describe("the request on the wire", () => {
  test("TLS: grpc-go's headers, the deadline as grpc-timeout, metadata, one framed IstioCertificateRequest", async () => {
    const c = client(tlsCa, { csrMetadata: { CertSigner: "s1" } }, { attemptTimeoutMs: 7000 });
    expect(await c.sign("the-csr", 3600)).toEqual(chain);
    const r = tlsCa.requests[0]!;
    expect(r.headers[":method"]).toBe("POST");
    expect(r.headers[":scheme"]).toBe("https");
    expect(r.headers[":path"]).toBe("/istio.v1.auth.IstioCertificateService/CreateCertificate");
    expect(r.headers[":authority"]).toBe("istiod.istio-system.svc");
    expect(r.headers["content-type"]).toBe("application/grpc");
    expect(r.headers["te"]).toBe("trailers");
    expect(r.headers["user-agent"]).toBe("istio-agent-ts");
    expect(r.headers["grpc-timeout"]).toBe("7000m");
    expect(r.headers["clusterid"]).toBe("Kubernetes");
    expect(r.headers["authorization"]).toBe("Bearer tok-123");
    // one uncompressed message, decoded by protobufjs
    expect(r.body[0]).toBe(0);
    expect(r.body.readUInt32BE(1)).toBe(r.body.length - 5);
    expect(caCodec().decodeRequest(r.body.subarray(5))).toEqual({ csr: "the-csr", validityDuration: 3600, metadata: { CertSigner: "s1" } });
    c.close();
  });

  test("plaintext: :scheme http, :authority the address", async () => {
    const c = client(plainCa);
    await c.sign("csr", 60);
    expect(plainCa.requests[0]!.headers[":scheme"]).toBe("http");
    expect(plainCa.requests[0]!.headers[":authority"]).toBe(plainCa.address);
    c.close();
  });

  test("plaintext ignores a server name (:authority the address); the default deadline is 30 s", async () => {
    const c = client(plainCa, { serverName: "istiod.istio-system.svc" }, { attemptTimeoutMs: undefined });
    expect(c.dials).toBe(0);
    await c.sign("csr", 60);
    expect(plainCa.requests[0]!.headers[":authority"]).toBe(plainCa.address);
    expect(plainCa.requests[0]!.headers["grpc-timeout"]).toBe("30000m");
    c.close();
  });

  test("an IP server name is checked, not sent as :authority", async () => {
    const c = client(tlsCa, { serverName: "127.0.0.1" });
    await c.sign("csr", 60);
    expect(tlsCa.requests[0]!.headers[":authority"]).toBe(tlsCa.address);
    c.close();
  });

  test("CA_HEADER_* metadata: names lowercased, -bin values base64 without padding, gRPC's reserved names dropped", async () => {
    const reserved = {
      "Content-Type": "text/html",
      "user-agent": "curl",
      "grpc-message-type": "x",
      "grpc-encoding": "gzip",
      "grpc-message": "m",
      "grpc-status": "3",
      "grpc-timeout": "1S",
      "grpc-status-details-bin": "d",
      te: "gzip",
    };
    const c = client(plainCa, { headers: { ClusterID: "c1", "X-Trace-Bin": "ab", "one-bin": "a", "x_a.b-1": "sp ace~", ...reserved } });
    await c.sign("csr", 60);
    const h = plainCa.requests[0]!.headers;
    expect(h["clusterid"]).toBe("c1");
    expect(h["x-trace-bin"]).toBe("YWI"); // base64 of "ab" is "YWI="
    expect(h["one-bin"]).toBe("YQ"); // "YQ=="
    expect(h["x_a.b-1"]).toBe("sp ace~");
    expect(h["content-type"]).toBe("application/grpc");
    expect(h["user-agent"]).toBe("istio-agent-ts");
    expect(h["te"]).toBe("trailers");
    expect(h["grpc-timeout"]).toBe("5000m");
    for (const k of ["grpc-message-type", "grpc-encoding", "grpc-message", "grpc-status", "grpc-status-details-bin"]) expect(h[k]).toBeUndefined();
    c.close();
  });

  test("a header name or value HTTP/2 cannot carry is a config error naming the header, not retried, nothing sent", async () => {
    for (const [headers, want] of [
      [{ "bad name": "v" }, `gRPC metadata "bad name" for the CA: the name may hold only letters, digits, "_", "." and "-"`],
      [{ ok: "line\nbreak" }, `gRPC metadata "ok" for the CA: the value may hold only printable ASCII characters`],
    ] as const) {
      const c = client(plainCa, { headers });
      const e = await failure(c);
      expect(e.kind).toBe("config");
      expect(e.message).toBe(want);
      c.close();
    }
    expect(sleeps).toEqual([]);
    expect(plainCa.requests.length).toBe(0);
  });

  test("a token a header cannot carry is a token error naming its file, never the token", async () => {
    writeFileSync(join(dir, "token"), "secret-part1\u0001secret-part2");
    try {
      const c = client(plainCa);
      const e = await failure(c);
      expect(e.message).not.toContain("secret"); // grpc-js's own check put the whole value in its error
      expect(e.kind).toBe("token");
      expect(e.message).toBe(`the token from token file ${join(dir, "token")} holds characters a gRPC header cannot carry`);
      expect(plainCa.requests.length).toBe(0);
      c.close();
    } finally {
      writeFileSync(join(dir, "token"), "tok-123\n");
    }
  });
});

describe("statuses", () => {
  test("a trailers-only error: its code, grpc-message percent-decoded", async () => {
    plainCa.answer = trailersOnly("3", "bad%20CSR%3A%20%E2%9C%93%25");
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.kind).toBe("signing");
    expect(e.code).toBe(3);
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: INVALID_ARGUMENT: bad CSR: ✓%`);
    expect(plainCa.requests.length).toBe(1); // not retried
    c.close();
  });

  test("a status without grpc-message says so", async () => {
    plainCa.answer = trailersOnly("3");
    const c = client(plainCa);
    expect((await failure(c)).message).toBe(`CA ${plainCa.address}: CSR failed: INVALID_ARGUMENT: (no grpc-message)`);
    plainCa.answer = trailersOnly("7");
    expect((await failure(c)).message).toBe(`CA ${plainCa.address} rejected the token from token file ${join(dir, "token")}: (no grpc-message)`);
    c.close();
  });

  test("a trailers-only UNAUTHENTICATED is a rejected token", async () => {
    plainCa.answer = trailersOnly("16", "token%20expired");
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.kind).toBe("rejected-token");
    expect(e.message).toBe(`CA ${plainCa.address} rejected the token from token file ${join(dir, "token")}: token expired`);
    c.close();
  });

  test("a status in trailers after a message wins over the message", async () => {
    plainCa.answer = reply(frame(certResponse(chain)), "14", "draining");
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: UNAVAILABLE: draining`);
    expect(plainCa.requests.length).toBe(5);
    c.close();
  });

  test("HTTP 503 without grpc-status (an HTML page from a proxy) is UNAVAILABLE, retried", async () => {
    plainCa.answer = (s) => {
      s.respond({ ":status": 503, "content-type": "text/html" });
      s.end("<html><body>upstream connect error</body></html>");
    };
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.kind).toBe("unavailable");
    expect(e.code).toBe(14);
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: UNAVAILABLE: Received HTTP status code 503`);
    expect(plainCa.requests.length).toBe(5);
    expect(sleeps).toEqual([100, 200, 400, 800]);
    c.close();
  });

  test("a non-200 HTTP status decides even beside a grpc-status (grpc-go); 404 is UNIMPLEMENTED, not retried", async () => {
    plainCa.answer = (s) => s.respond({ ":status": 404, "grpc-status": "0" }, { endStream: true });
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: UNIMPLEMENTED: Received HTTP status code 404`);
    expect(plainCa.requests.length).toBe(1);
    c.close();
  });

  test("trailers without grpc-status: UNKNOWN, not retried", async () => {
    plainCa.answer = (s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.on("wantTrailers", () => s.sendTrailers({ "x-other": "1" }));
      s.end(frame(certResponse(chain)));
    };
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: UNKNOWN: No status information received`);
    expect(plainCa.requests.length).toBe(1);
    c.close();
  });

  test("OK without a message, two messages, a compressed message, a message that does not parse: INTERNAL, retried", async () => {
    const cases: [Buffer, string][] = [
      [Buffer.alloc(0), "the server sent no response message"],
      [Buffer.concat([frame(certResponse(chain)), frame(certResponse(chain))]), "more than one response message for a unary call"],
      [frame(certResponse(chain), true), "compressed response message, but no compression was negotiated"],
      [frame(Buffer.from([0x0a, 0x05, 0x61])), "Response message parsing error: "],
    ];
    for (const [body, want] of cases) {
      plainCa.requests.length = 0;
      plainCa.answer = reply(body);
      const c = client(plainCa);
      const e = await failure(c);
      expect(e.kind).toBe("signing");
      expect(e.code).toBe(13);
      expect(e.message.startsWith(`CA ${plainCa.address}: CSR failed: INTERNAL: ${want}`)).toBe(true);
      expect(plainCa.requests.length).toBe(5);
      c.close();
    }
  });

  test("an empty response message is a message: an empty chain, refused as too short", async () => {
    plainCa.answer = reply(frame(Buffer.alloc(0)));
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.kind).toBe("bad-response");
    expect(e.message).toBe(`CA ${plainCa.address} returned 0 certificate(s); want the workload certificate and at least the root`);
    c.close();
  });
});

describe("limits", () => {
  test("a response message over gRPC's 4 MiB is refused from its length prefix: RESOURCE_EXHAUSTED, retried", async () => {
    const prefix = Buffer.from([0, 0x00, 0x40, 0x00, 0x01]); // 4 MiB + 1 announced, never sent
    plainCa.answer = (s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc" });
      s.write(prefix);
    };
    const c = client(plainCa);
    const e = await failure(c);
    expect(e.code).toBe(8);
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: RESOURCE_EXHAUSTED: Received message larger than max (4194305 vs. 4194304)`);
    expect(plainCa.requests.length).toBe(5);
    c.close();
  });

  test("a response exactly at the cap is accepted; one byte over is not", async () => {
    const body = frame(certResponse(chain));
    const size = body.length - 5;
    plainCa.answer = reply(body);
    const at = client(plainCa, {}, { maxResponseBytes: size });
    expect((await at.sign("csr", 60)).length).toBe(2);
    at.close();
    const under = client(plainCa, {}, { maxResponseBytes: size - 1 });
    expect((await failure(under)).message).toBe(
      `CA ${plainCa.address}: CSR failed: RESOURCE_EXHAUSTED: Received message larger than max (${size} vs. ${size - 1})`,
    );
    under.close();
  });

  test("a CA that never answers: the deadline ends each attempt, the stream is reset (CANCEL), DEADLINE_EXCEEDED after 5", async () => {
    plainCa.answer = () => {};
    const c = client(plainCa, {}, { attemptTimeoutMs: 300 });
    const e = await Promise.race([failure(c), Bun.sleep(20_000).then(() => new CaError("config", "no deadline"))]);
    expect(e.kind).toBe("unavailable");
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: DEADLINE_EXCEEDED: Deadline exceeded after 300 ms`);
    expect(plainCa.requests.length).toBe(5);
    expect(plainCa.requests[0]!.headers["grpc-timeout"]).toBe("300m");
    await until(() => plainCa.requests.every((r) => r.resetCode !== undefined), "the CA saw every stalled stream reset", 5000);
    expect(plainCa.requests.map((r) => r.resetCode)).toEqual([8, 8, 8, 8, 8]); // NGHTTP2_CANCEL
    c.close();
  }, 30_000);

  test("a TLS handshake that never completes is cut by the same deadline", async () => {
    const net = await import("node:net");
    const silent = net.createServer(() => {}); // accepts, says nothing
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    const port = (silent.address() as { port: number }).port;
    const c = client(tlsCa, { address: `127.0.0.1:${port}` }, { attemptTimeoutMs: 200 });
    const e = await Promise.race([failure(c), Bun.sleep(20_000).then(() => new CaError("config", "no deadline"))]);
    expect(e.message).toBe(`CA 127.0.0.1:${port}: CSR failed: DEADLINE_EXCEEDED: Deadline exceeded after 200 ms`);
    c.close();
    silent.close();
  }, 30_000);
});

describe("the connection", () => {
  test("reused across CSRs: one dial, one connection at the CA", async () => {
    const before = plainCa.sessions;
    const c = client(plainCa);
    for (let i = 0; i < 3; i++) await c.sign("csr", 60);
    expect(c.dials).toBe(1);
    expect(plainCa.sessions - before).toBe(1);
    c.close();
  });

  test("after a failed attempt the next one dials again", async () => {
    let n = 0;
    plainCa.answer = (s, r) => (n++ === 0 ? trailersOnly("14", "busy")(s, r) : reply(frame(certResponse(chain)))(s, r));
    const c = client(plainCa);
    expect((await c.sign("csr", 60)).length).toBe(2);
    expect(c.dials).toBe(2);
    expect(sleeps).toEqual([100]);
    c.close();
  });

  test("a CA that restarts between CSRs: the dead connection is dropped and the next CSR dials the new one", async () => {
    const ca = await ScriptedCa.start();
    ca.answer = reply(frame(certResponse(chain)));
    const c = client(ca);
    expect((await c.sign("csr", 60)).length).toBe(2);
    await ca.stop();
    await ca.restart();
    ca.answer = reply(frame(certResponse(chain)));
    expect((await c.sign("csr", 60)).length).toBe(2);
    expect(c.dials).toBe(2);
    expect(ca.requests.length).toBe(2);
    c.close();
    await ca.stop();
  });

  test("a CA down for the first attempts: each retry redials, and the CSR succeeds once it is back", async () => {
    const ca = await ScriptedCa.start();
    const port = ca.port;
    await ca.stop();
    let sleepsSeen = 0;
    const c = client(
      ca,
      { address: `127.0.0.1:${port}` },
      {
        sleep: async (ms) => {
          sleeps.push(ms);
          if (++sleepsSeen === 2) {
            await ca.restart();
            ca.answer = reply(frame(certResponse(chain)));
          }
          return true;
        },
      },
    );
    expect((await c.sign("csr", 60)).length).toBe(2);
    expect(sleeps).toEqual([100, 200]);
    expect(c.dials).toBe(3);
    c.close();
    await ca.stop();
  });

  test("a connection refused is UNAVAILABLE, retried", async () => {
    const ca = await ScriptedCa.start();
    await ca.stop();
    const c = client(ca);
    const e = await failure(c);
    expect(e.kind).toBe("unavailable");
    expect(e.message.startsWith(`CA ${ca.address}: CSR failed: UNAVAILABLE: connection lost: `)).toBe(true);
    expect(c.dials).toBe(5);
    c.close();
  });

  test("after the CA's GOAWAY the next CSR uses a new connection, without a failed attempt", async () => {
    const c = client(plainCa);
    await c.sign("csr", 60);
    const sessions = plainCa.sessions;
    const first = plainCa.requests[0]!.session;
    plainCa.goaway();
    await until(() => plainCa.closed.has(first), "the client closed the connection the CA sent GOAWAY on", 5000);
    await c.sign("csr", 60);
    await c.sign("csr", 60);
    expect(c.dials).toBe(2);
    expect(plainCa.sessions - sessions).toBe(1);
    expect(sleeps).toEqual([]);
    c.close();
  });

  test("a GOAWAY while a CSR is in flight: that CSR completes, the next uses a new connection, the old one is closed once done", async () => {
    const held: (() => void)[] = [];
    plainCa.answer = (s, r) =>
      held.length === 0 && plainCa.requests.length === 1 ? held.push(() => reply(frame(certResponse(chain)))(s, r)) : reply(frame(certResponse(chain)))(s, r);
    const c = client(plainCa);
    const first = c.sign("csr", 60);
    await until(() => held.length === 1, "the CA holds the first CSR", 5000);
    const old = plainCa.requests[0]!.session;
    plainCa.goaway();
    await plainCa.pingAll(); // answered: the GOAWAY sent before the PING has reached the client
    expect((await c.sign("csr", 60)).length).toBe(2);
    expect(plainCa.requests[1]!.session).not.toBe(old);
    held[0]!();
    expect((await first).length).toBe(2);
    await until(() => plainCa.closed.has(old), "the client closed the old connection once its CSR was done", 5000);
    expect((await c.sign("csr", 60)).length).toBe(2);
    expect(plainCa.requests[2]!.session).toBe(plainCa.requests[1]!.session);
    expect(c.dials).toBe(2);
    expect(sleeps).toEqual([]);
    c.close();
  });

  test("an idle connection is closed after idleMs; the next CSR dials again", async () => {
    const c = client(plainCa, {}, { idleMs: 50 });
    await c.sign("csr", 60);
    const first = plainCa.requests[0]!.session;
    await until(() => plainCa.closed.has(first), "the CA saw the idle connection close", 5000);
    await c.sign("csr", 60);
    expect(c.dials).toBe(2);
    expect(plainCa.requests[1]!.session).not.toBe(first);
    c.close();
  });

  test("concurrent CSRs share the connection; the idle timer waits for the last of them", async () => {
    let held: (() => void) | undefined;
    plainCa.answer = (s, r) => {
      if (held === undefined) held = () => reply(frame(certResponse(chain)))(s, r);
      else reply(frame(certResponse(chain)))(s, r);
    };
    const c = client(plainCa, {}, { idleMs: 30 });
    const slow = c.sign("csr", 60);
    await until(() => plainCa.requests.length === 1, "the CA holds the first CSR", 5000);
    expect((await c.sign("csr", 60)).length).toBe(2); // the second settles while the first is in flight
    // Sentinel: a second client with the same idleMs, idle from a later moment, closes its connection;
    // an idle timer the first client had started when its second CSR settled would have fired first.
    const c2 = client(plainCa, {}, { idleMs: 30 });
    await c2.sign("csr", 60);
    const c2Session = plainCa.requests[2]!.session;
    await until(() => plainCa.closed.has(c2Session), "the second client's idle connection closed", 5000);
    held!();
    expect((await slow).length).toBe(2);
    expect(c.dials).toBe(1);
    expect(plainCa.requests[0]!.session).toBe(plainCa.requests[1]!.session);
    expect(plainCa.closed.has(plainCa.requests[0]!.session)).toBe(false);
    expect(sleeps).toEqual([]);
    c.close();
    c2.close();
  });

  test("gRPC's defaults: 4 MiB response cap, 30 min idle", async () => {
    const { DEFAULT_IDLE_MS, DEFAULT_MAX_RESPONSE_BYTES } = await import("../../src/xds/unary.ts");
    expect(DEFAULT_MAX_RESPONSE_BYTES).toBe(4_194_304);
    expect(DEFAULT_IDLE_MS).toBe(1_800_000);
  });

  test("close() while a CSR is in flight ends it CANCELLED (retried: CANCELLED is transient) and the connection goes", async () => {
    plainCa.answer = () => {};
    const c = client(plainCa, {}, { sleep: async () => false });
    const p = c.sign("csr", 60).catch((e) => e);
    await until(() => plainCa.requests.length === 1, "the CA holds the CSR", 5000);
    c.close();
    const e = (await p) as CaError;
    expect(e.message).toBe(`CA ${plainCa.address}: CSR failed: CANCELLED: call cancelled`);
    expect(e.code).toBe(1);
    await until(() => plainCa.requests[0]!.resetCode !== undefined, "the CA saw the CSR's stream reset", 5000);
    expect(plainCa.requests[0]!.resetCode).toBe(8); // CANCEL
  });
});
