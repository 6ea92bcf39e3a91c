// istiod slow to answer a fresh stream, and the agent itself held while it dials, against the
// compiled agent (Envoy is the test, on the XDS socket; istiod the fake over mutual TLS). The
// agent's dial deadline is 5 s. What must hold: it bounds the connection (TCP, TLS, istiod's
// HTTP/2 SETTINGS), as gRPC's dial does in Istio's agent, never istiod's first message (gRPC
// servers send their response headers with it); and time the agent did not run (stopped with
// SIGSTOP for longer than the deadline right after it started dialing) is not held against istiod.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { FakeIstiod, makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import type { Pod } from "../e2e/pod.ts";
import { Relay } from "../e2e/mesh.ts";
import { startProxylessPod } from "./proxyless-pod.ts";
import { CDS, EnvoyClient, versionOf } from "../xds/harness.ts";

/** Past the agent's 5 s dial deadline (src/xds/upstream-config.ts). */
const SLOW_MS = 6500;

let work: string;
let pki: TestPki;
let istiod: FakeIstiod;
let pod: Pod;
/** Milliseconds istiod waits before the first message of each stream. */
let firstAnswerDelayMs = 0;

let hop: Relay;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-faults-istiod-slow-"));
  pki = makeTestPki(join(work, "pki"));
  istiod = new FakeIstiod({ pki });
  istiod.onStream = (s) =>
    s.call.on("data", () => {
      const r = s.requests[s.requests.length - 1]!;
      if (r.typeUrl !== CDS) return;
      const answer = () => void (!s.ended && s.send({ typeUrl: CDS, versionInfo: r.versionInfo ?? "", resources: [] }));
      if (firstAnswerDelayMs > 0) setTimeout(answer, firstAnswerDelayMs);
      else answer();
    });
  await istiod.start();
  hop = await new Relay(istiod.port).start();
  pod = await startProxylessPod(pki, `127.0.0.1:${hop.port}`);
}, 30_000);

afterAll(async () => {
  pod?.agent.proc.kill("SIGCONT");
  pod?.kill();
  hop?.close();
  await istiod?.stop();
  pod?.box.cleanup();
  rmSync(work, { recursive: true, force: true });
});

describe("istiod slow to answer, the agent held while dialing (compiled agent)", () => {
  test(`istiod's first message ${SLOW_MS} ms after the stream opened (past the 5 s dial deadline) reaches Envoy; the stream stays open`, async () => {
    firstAnswerDelayMs = SLOW_MS;
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    let status: grpc.StatusObject | undefined;
    void envoy.status.then((s) => (status = s));
    const t0 = performance.now();
    envoy.send({ typeUrl: CDS, versionInfo: "slow1" });
    const [got] = await envoy.waitFor(1, SLOW_MS + 5000);
    const tookMs = performance.now() - t0;
    expect(versionOf(got!)).toBe("slow1");
    expect(tookMs).toBeGreaterThanOrEqual(SLOW_MS - 100); // it really was the slow answer
    expect(status).toBeUndefined();
    envoy.close();
    expect(pod.exitCode()).toBeNull();
    console.log(`istiod slow: first answer after ${tookMs.toFixed(0)} ms reached Envoy`);
  }, 30_000);

  test("the agent stopped (SIGSTOP) for 6 s right after it began dialing istiod: the stream is served once it runs again, not failed by the overslept deadline", async () => {
    firstAnswerDelayMs = 0;
    const proc = pod.agent.proc;
    let stoppedAt = 0;
    hop.onConnect = () => {
      hop.onConnect = undefined;
      proc.kill("SIGSTOP");
      stoppedAt = performance.now();
      setTimeout(() => proc.kill("SIGCONT"), 6000);
    };
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    let status: grpc.StatusObject | undefined;
    void envoy.status.then((s) => (status = s));
    envoy.send({ typeUrl: CDS, versionInfo: "held1" });
    const ended = envoy.status.then((s) => {
      throw new Error(`the stream ended before istiod's answer: ${JSON.stringify(s)}; agent log tail:\n${pod.tail()}`);
    });
    const [got] = await Promise.race([envoy.waitFor(1, 15_000), ended]);
    expect(stoppedAt).toBeGreaterThan(0); // the hop saw the dial, so the deadline was running when the agent stopped
    expect(performance.now() - stoppedAt).toBeGreaterThanOrEqual(5900);
    expect(versionOf(got!)).toBe("held1");
    expect(status).toBeUndefined();
    envoy.close();
    expect(pod.exitCode()).toBeNull();
  }, 30_000);

  test("a server that accepts the connection and never speaks HTTP/2 still fails the dial at the 5 s deadline: UNAVAILABLE naming it", async () => {
    const silent = createServer(() => {}); // accepts, reads nothing, says nothing
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    hop.targetPort = (silent.address() as { port: number }).port;
    try {
      const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
      const t0 = performance.now();
      envoy.send({ typeUrl: CDS, versionInfo: "silent1" });
      const s = await envoy.status;
      const tookMs = performance.now() - t0;
      envoy.close();
      expect(s.code).toBe(grpc.status.UNAVAILABLE);
      expect(s.details).toBe(`connecting to istiod 127.0.0.1:${hop.port}: no answer within 5000 ms`);
      expect(tookMs).toBeGreaterThanOrEqual(4900);
      expect(tookMs).toBeLessThan(10_000);
      expect(pod.exitCode()).toBeNull();
    } finally {
      hop.targetPort = istiod.port;
      silent.close();
    }
  }, 30_000);
});
