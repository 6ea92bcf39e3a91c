// istiod absent at start, then flapping (on/off, every connection dropped when it goes away),
// against the compiled agent; the test is Envoy on the XDS socket. Each "on" phase: a fresh
// stream (as Envoy reconnects) asks for version c<N>; istiod answers it. What must hold: nothing
// lost, duplicated or reordered; every stream cut by istiod's departure ends UNAVAILABLE; the
// stream opened after each return is served (within 5 s: no backoff carried over from the failed
// dials; how fast is a figure, printed, not a bound: under load a return took 268 ms against the
// 200 ms this test once asserted). CI: 6 cycles of 400 ms; FAULTS_LONG=1: 10 of 1 s (20 s).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { freePort } from "../support/ports.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { FakeIstiod, makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import { Relay } from "../e2e/mesh.ts";
import type { Pod } from "../e2e/pod.ts";
import { startProxylessPod } from "./proxyless-pod.ts";
import { CDS, EnvoyClient, versionOf } from "../xds/harness.ts";

const LONG = process.env.FAULTS_LONG === "1";
const CYCLES = LONG ? 10 : 6;
const PHASE_MS = LONG ? 1000 : 400;
/** The mid-message case's push: under Istio's 4 MiB default receive limit, cut after its first MiB. */
const BIG = 3 * 1024 * 1024;
const CUT_AFTER = 1024 * 1024;
const bigSent = new Map<string, Buffer>();

let work: string;
let pki: TestPki;
let istiod: FakeIstiod;
let relay: Relay;
let pod: Pod;
let closedPort: number;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-faults-flap-"));
  pki = makeTestPki(join(work, "pki"));
  istiod = new FakeIstiod({ pki });
  // Answer every request with the version it asks for (the test's sequence number); a version
  // starting "big" gets one BIG-byte resource, and what was sent is kept for the test to compare.
  istiod.onStream = (s) =>
    s.call.on("data", () => {
      const r = s.requests[s.requests.length - 1]!;
      if (r.typeUrl !== CDS) return;
      const v = r.versionInfo ?? "";
      if (!v.startsWith("big")) return void s.send({ typeUrl: CDS, versionInfo: v, resources: [] });
      const value = Buffer.alloc(BIG);
      for (let i = 0; i + 4 <= BIG; i += 4) value.writeUInt32LE(i, i);
      const bytes = s.encode({ typeUrl: CDS, versionInfo: v, resources: [{ typeUrl: CDS, value }] });
      bigSent.set(v, bytes);
      s.sendRaw(bytes);
    });
  await istiod.start();
  closedPort = await freePort();
  relay = await new Relay(closedPort).start(); // istiod absent at start
  pod = await startProxylessPod(pki, `127.0.0.1:${relay.port}`);
}, 30_000);

afterAll(async () => {
  pod?.kill();
  relay?.close();
  await istiod?.stop();
  pod?.box.cleanup();
  rmSync(work, { recursive: true, force: true });
});

describe("istiod absent, then flapping (compiled agent)", () => {
  test("absent at start: the stream ends UNAVAILABLE naming the dial failure, the agent keeps serving", async () => {
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: CDS, versionInfo: "c0" });
    const s = await envoy.status;
    envoy.close();
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(s.details).toContain(`127.0.0.1:${relay.port}`);
    expect(pod.exitCode()).toBeNull();
  });

  test(`${CYCLES} on/off cycles of ${PHASE_MS} ms: in order, once each, UNAVAILABLE on loss, served after every return`, async () => {
    const seen: string[] = [];
    const servedAfterMs: number[] = [];
    for (let n = 1; n <= CYCLES; n++) {
      relay.targetPort = istiod.port; // istiod back
      const back = performance.now();
      const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
      envoy.send({ typeUrl: CDS, versionInfo: `c${n}` });
      await envoy.waitFor(1, 5000);
      servedAfterMs.push(performance.now() - back);
      await Bun.sleep(PHASE_MS);
      relay.targetPort = closedPort; // istiod gone: new dials refused, live connections dropped
      relay.cut();
      const s = await envoy.status;
      expect(s.code).toBe(grpc.status.UNAVAILABLE);
      seen.push(...envoy.received.map(versionOf));
      envoy.close();
      await Bun.sleep(PHASE_MS);
    }
    expect(seen).toEqual(Array.from({ length: CYCLES }, (_, i) => `c${i + 1}`));
    expect(pod.exitCode()).toBeNull();
    writeFileSync(join(work, "figures.json"), JSON.stringify({ cycles: CYCLES, phaseMs: PHASE_MS, servedAfterMs }));
    console.log(`istiod flap: ${CYCLES} cycles, served again after ${servedAfterMs.map((m) => m.toFixed(0)).join("/")} ms`);
  }, 60_000);

  test("istiod killed mid-message (a 3 MiB push cut after its first MiB): nothing of it reaches Envoy as a message, UNAVAILABLE; after the return the whole message arrives", async () => {
    relay.targetPort = istiod.port;
    const cut = relay.cutAfterBytes(CUT_AFTER);
    const first = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    first.send({ typeUrl: CDS, versionInfo: "big1" });
    await cut;
    relay.targetPort = closedPort;
    const s = await first.status;
    expect({ code: s.code, received: first.received.length }).toEqual({ code: grpc.status.UNAVAILABLE, received: 0 });
    expect(bigSent.has("big1")).toBe(true); // istiod did send it: the cut was mid-message
    first.close();
    relay.targetPort = istiod.port;
    const second = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    second.send({ typeUrl: CDS, versionInfo: "big2" });
    const [got] = await second.waitFor(1, 10_000);
    const digest = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    expect({ length: got!.length, sha256: digest(got!) }).toEqual({ length: bigSent.get("big2")!.length, sha256: digest(bigSent.get("big2")!) });
    expect(versionOf(got!)).toBe("big2");
    expect(second.received.length).toBe(1);
    second.close();
    expect(pod.exitCode()).toBeNull();
  }, 30_000);
});
