// A client on the XDS socket that opens streams and resets them, many times over, must cost istiod
// nothing and the agent little: the upstream is dialed on a stream's first request, a connection
// that resets streams faster than HTTP/2 servers allow is told GOAWAY ENHANCE_YOUR_CALM, and the
// per-stream log lines are rate-limited. Also: the status Envoy reads when istiod goes away.
import { afterEach, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { CDS, startHarness, harnessScope } from "./harness.ts";
import { E, RawPeer, headersFrame, rst } from "./h2-support.ts";
import { makeTestPki } from "../support/fake-istiod.ts";
import { copyFileSync } from "node:fs";
import { join } from "node:path";

const scope = harnessScope(afterEach);
const client = (delta = false) => scope.client(delta);

describe("xds proxy: hostile or churning clients", () => {
  test("a stream that never sends a request never dials istiod; the first request does", async () => {
    scope.h = await startHarness();
    const idle = client();
    const active = client(); // replaces `idle`; `idle` ends without ever having dialed
    expect((await idle.status).code).toBe(grpc.status.CANCELLED);
    active.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream(); // sentinel: the first request made the only dial
    expect((await up.nextRequest()).typeUrl).toBe(CDS);
    expect(scope.h.istiod.streams.length).toBe(1);
  });

  test("5,000 open-then-reset streams: no upstream stream, GOAWAY ENHANCE_YOUR_CALM, few log lines", async () => {
    scope.h = await startHarness();
    const peer = await RawPeer.connect(scope.h.proxy.socketPath);
    for (let batch = 0; batch < 50; batch++) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 100; i++) {
        const id = 2 * (batch * 100 + i) + 1;
        frames.push(headersFrame(id), rst(id, E.CANCEL));
      }
      peer.send(...frames);
    }
    const g = await peer.goaway(10_000);
    expect(g.code).toBe(E.ENHANCE_YOUR_CALM);
    expect(g.debug).toBe("too_many_resets");
    expect(g.last).toBeLessThan(2 * 5000);
    await peer.waitClosed();
    // A normal client is served after, and its stream is the first upstream stream.
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest();
    expect(scope.h.istiod.streams.length).toBe(1);
    expect(scope.h.lines.length).toBeLessThan(100);
    expect(scope.h.lines.some((l) => l.includes("too_many_resets"))).toBe(true);
    // 10 per 10 s per kind of line, plus the normal client's (which may be suppressed too).
    expect(scope.h.lines.filter((l) => l.includes("Envoy opened")).length).toBeLessThanOrEqual(10);
  });

  test("resets at a normal rate are not punished", async () => {
    scope.h = await startHarness();
    const peer = await RawPeer.connect(scope.h.proxy.socketPath);
    for (let i = 0; i < 50; i++) peer.send(headersFrame(2 * i + 1), rst(2 * i + 1, E.CANCEL));
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    await (await scope.h.istiod.nextStream()).nextRequest();
    expect(peer.seen.some((f) => f.type === 7)).toBe(false);
    expect(peer.ended).toBe(false);
  });
});

describe("xds proxy: the status Envoy reads", () => {
  test("istiod goes away mid-stream: Envoy's stream ends UNAVAILABLE, not CANCELLED", async () => {
    scope.h = await startHarness();
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    await (await scope.h.istiod.nextStream()).nextRequest();
    await scope.h.istiod.stop();
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
  });

  test("TLS: a SAN mismatch is named in grpc-message", async () => {
    scope.h = await startHarness({ env: { ISTIOD_SAN: "wrong.example.com" } });
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(s.details).toContain("wrong.example.com");
    expect(s.details).toMatch(/does not match|altnames/i);
  });

  test("TLS: an unknown authority is named in grpc-message", async () => {
    scope.h = await startHarness();
    const other = makeTestPki(join(scope.h.root, "other-pki"));
    copyFileSync(other.caCert, join(scope.h.root, "var/run/secrets/istio/root-cert.pem"));
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(s.details).toMatch(/certificate|authority|verify/i);
  });
});
