// UnaryChannel directly (the CA client's tests cover it through IstioCaClient): a call refused
// by the server's concurrent-stream limit, and the error it rejects with.

import { afterAll, beforeAll, expect, test } from "bun:test";
import http2 from "node:http2";
import net from "node:net";
import { GrpcCallError, UnaryChannel } from "../../src/xds/unary.ts";
import { ScriptedCa, frame, reply } from "../ca/scripted-ca.ts";
import { until } from "../sds/fake-clock.ts";

let ca: ScriptedCa;
beforeAll(async () => {
  ca = await ScriptedCa.start(undefined, 0, { maxConcurrentStreams: 1 });
});
afterAll(() => ca.stop());

test("GrpcCallError: its name, code, details, and a message of the code's name and the details", () => {
  const e = new GrpcCallError(14, "down");
  expect(e.name).toBe("GrpcCallError");
  expect(e.code).toBe(14);
  expect(e.details).toBe("down");
  expect(e.message).toBe("UNAVAILABLE: down");
  expect(e).toBeInstanceOf(Error);
});

test("a call past the server's concurrent-stream limit fails UNAVAILABLE at once; the one in flight completes", async () => {
  const held: (() => void)[] = [];
  ca.answer = (s, r) => (held.length === 0 ? held.push(() => reply(frame(Buffer.from("ok")))(s, r)) : reply(frame(Buffer.from("no")))(s, r));
  const ch = new UnaryChannel({ dial: () => net.connect(ca.port, "127.0.0.1"), scheme: "http", authority: ca.address });
  const first = ch.call("/svc/M", [], Buffer.from("a"), 5000);
  await until(() => held.length === 1, "the server holds the first call", 5000);
  const e = await ch.call("/svc/M", [], Buffer.from("b"), 5000).catch((x) => x);
  expect(e).toBeInstanceOf(GrpcCallError);
  expect((e as GrpcCallError).code).toBe(14);
  expect((e as GrpcCallError).details).toBe("peer's concurrent stream limit reached");
  held[0]!();
  expect(Buffer.from(await first).toString()).toBe("ok");
  expect(ch.dials).toBe(1);
  ch.close();
});

test("a call past its deadline resets its stream (RST_STREAM CANCEL) while the connection stays", async () => {
  ca.requests.length = 0;
  ca.answer = () => {};
  const ch = new UnaryChannel({ dial: () => net.connect(ca.port, "127.0.0.1"), scheme: "http", authority: ca.address });
  const e = await ch.call("/svc/M", [], Buffer.from("a"), 200).catch((x) => x);
  expect((e as GrpcCallError).code).toBe(4);
  await until(() => ca.requests[0]?.resetCode !== undefined, "the server saw the stream reset", 5000);
  expect(ca.requests[0]!.resetCode).toBe(8);
  expect(ca.closed.has(ca.requests[0]!.session)).toBe(false);
  ch.close();
});

test("a grpc-status in the response headers (not trailers-only) is no status: without trailers the call is UNKNOWN", async () => {
  ca.answer = (s) => {
    s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "0" });
    s.end(frame(Buffer.from("ok")));
  };
  const ch = new UnaryChannel({ dial: () => net.connect(ca.port, "127.0.0.1"), scheme: "http", authority: ca.address });
  const e = await ch.call("/svc/M", [], Buffer.from("a"), 5000).catch((x) => x);
  expect((e as GrpcCallError).code).toBe(2);
  expect((e as GrpcCallError).details).toBe("No status information received");
  ch.close();
});

test("the server's GOAWAY with a call in flight: our side closes gracefully at once (GOAWAY back), the held answer still arrives, then the socket ends", async () => {
  const server = http2.createServer();
  const events: string[] = [];
  let hold: (() => void) | undefined;
  let serverSession: http2.ServerHttp2Session | undefined;
  server.on("session", (s) => {
    serverSession = s;
    s.on("goaway", (code) => events.push(`client goaway ${code}`));
    s.on("close", () => events.push("closed"));
  });
  server.on("stream", (st: http2.ServerHttp2Stream) => {
    st.on("data", () => {});
    hold = () => {
      st.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      st.on("wantTrailers", () => st.sendTrailers({ "grpc-status": "0" }));
      st.end(frame(Buffer.from("late answer")));
    };
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as net.AddressInfo).port;
  const ch = new UnaryChannel({ dial: () => net.connect(port, "127.0.0.1"), scheme: "http", authority: `127.0.0.1:${port}` });
  try {
    const call = ch.call("/svc/M", [], Buffer.from("a"), 10_000);
    await until(() => hold !== undefined, "the server holds the call", 5000);
    serverSession!.goaway(0, 1);
    await until(() => events.includes("client goaway 0"), "the client's GOAWAY in answer", 5000);
    expect(events).toEqual(["client goaway 0"]); // the connection is still up
    hold!();
    expect(Buffer.from(await call).toString()).toBe("late answer");
    await until(() => events.includes("closed"), "the connection to close once the call was answered", 5000);
    expect(events).toEqual(["client goaway 0", "closed"]);
    expect(ch.dials).toBe(1);
  } finally {
    ch.close();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
