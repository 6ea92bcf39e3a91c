// SIGTERM while a 48 MiB push is on its way from istiod to Envoy (compiled agent, DISABLE_ENVOY,
// the test is Envoy on the XDS socket). What must hold: the whole message reaches the client,
// byte for byte, then the stream ends with a status, and the agent exits 0. The signal is sent
// right after istiod hands the message to its transport; whether the client had it by then is
// recorded (a loaded machine decides), not asserted.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { FakeIstiod } from "../support/fake-istiod.ts";
import type { Pod } from "../e2e/pod.ts";
import { podBesideIstiod } from "./proxyless-pod.ts";
import { CDS, EnvoyClient, TYPES } from "../xds/harness.ts";

const MiB = 1024 * 1024;
const SIZE = 48 * MiB;

let istiod: FakeIstiod;
let pod: Pod;

podBesideIstiod("sigterm", (s) => ({ pod, istiod } = s), {
  env: { ISTIO_GPRC_MAXRECVMSGSIZE: String(64 * MiB) },
  proxyConfig: { terminationDrainDuration: "1s", drainDuration: "1s" },
});

describe("SIGTERM during a 48 MiB push (compiled agent)", () => {
  test("the whole message reaches Envoy, then a status, and the agent exits 0", async () => {
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: CDS, versionInfo: "" });
    const up = await istiod.nextStream(10_000);
    await up.nextRequest((r) => r.typeUrl === CDS);
    // One resource whose value is 48 MiB of a repeating, position-dependent pattern.
    const value = Buffer.alloc(SIZE);
    for (let i = 0; i < SIZE; i += 4) value.writeUInt32LE(i, i);
    const sent = up.encode({ typeUrl: CDS, versionInfo: "big", resources: [{ typeUrl: CDS, value }] });
    const t0 = performance.now();
    up.sendRaw(sent);
    pod.agent.proc.kill("SIGTERM");
    const hadItAtSignal = envoy.received.length > 0;
    const status = await envoy.status;
    const statusMs = performance.now() - t0;
    const exit = await pod.waitExit(30_000);
    const exitMs = performance.now() - t0;
    expect(envoy.received.length).toBe(1);
    const got = envoy.received[0]!;
    expect(got.length).toBe(sent.length);
    const digest = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    expect(digest(got)).toBe(digest(sent));
    const res = TYPES.Res.toObject(TYPES.Res.decode(got)) as { versionInfo?: string };
    expect(res.versionInfo).toBe("big");
    expect(typeof status.code).toBe("number");
    expect(exit).toBe(0);
    console.log(
      `sigterm-push: ${(sent.length / MiB).toFixed(1)} MiB delivered whole (client had it at the signal: ${hadItAtSignal}); status ${status.code} "${status.details}" after ${statusMs.toFixed(0)} ms; exit ${exit} after ${exitMs.toFixed(0)} ms`,
    );
    envoy.close();
  }, 60_000);
});
