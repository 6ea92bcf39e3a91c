// Interop: Istio's own discovery server answering a fresh stream 7 s late (istiod-lite with
// --first-response-delay 7s: each stream's first response, and with it gRPC's response headers,
// is held). Istio's agent bounds only the connection (its 5 s dial context; grpc-go's stream is up
// once its headers are sent), so the slow first answer reaches Envoy. Ours must do the same: the
// stand-in Envoy gets istiod's CDS through our agent, the stream is never failed, and the agent
// logs no dial timeout.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { startPod, until, type Pod } from "../e2e/pod.ts";
import { interopUnmet } from "./support/go-build.ts";
import { LITE_NAMESPACE, LITE_SERVICE_ACCOUNT, LITE_TOKEN, startIstiodLite, type IstiodLite } from "./support/istiod-lite.ts";
import { meshYaml } from "./support/mesh-yaml.ts";
import { CDS, readStandinRecords, writeStandinLauncher } from "./support/envoy-standin.ts";

describeRequiring({ check: () => interopUnmet(["istiod-lite"]) }, "interop: Istio's discovery server slow to answer a fresh stream", () => {
  let lite: IstiodLite;
  let pod: Pod | undefined;
  const work = mkdtempSync(join(tmpdir(), "agent-interop-slow-"));

  beforeAll(async () => {
    lite = await startIstiodLite(meshYaml({ a: 50061, b: 50062 }, "b"), { firstResponseDelay: "7s" });
  }, 90_000);

  afterAll(async () => {
    pod?.kill();
    for (const r of readStandinRecords(join(work, "slow.jsonl")))
      if (r.event === "start")
        try {
          process.kill(r.pid, "SIGKILL");
        } catch {}
    pod?.box.cleanup();
    await lite?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("the first CDS, 7 s after the stream opened (past our 5 s dial deadline), reaches the stand-in Envoy; no dial timeout", async () => {
    const recordFile = join(work, "slow.jsonl");
    const t0 = performance.now();
    pod = await startPod({
      env: {
        POD_NAME: "slow-0",
        POD_NAMESPACE: LITE_NAMESPACE,
        SERVICE_ACCOUNT: LITE_SERVICE_ACCOUNT,
        CA_ADDR: lite.caAddress,
        ISTIOD_SAN: "istiod.istio-system.svc",
        INTEROP_ENVOY_RECORD: recordFile,
        INTEROP_ENVOY_XDS: "sotw",
        ISTIO_DELTA_XDS: "false",
      },
      proxyConfig: { discoveryAddress: lite.xdsAddress, binaryPath: writeStandinLauncher(work), terminationDrainDuration: "1s", drainDuration: "2s" },
      files: { "var/run/secrets/istio/root-cert.pem": lite.rootPem, "var/run/secrets/tokens/istio-token": LITE_TOKEN },
    });
    const p = pod;
    await until(
      p,
      "CDS from istiod through the agent",
      () => (readStandinRecords(recordFile).some((r) => r.event === "xds" && r.typeUrl === CDS) ? true : undefined),
      40_000,
    );
    const tookMs = performance.now() - t0;
    expect(tookMs).toBeGreaterThanOrEqual(7000); // it was the held answer
    expect(readStandinRecords(recordFile).filter((r) => r.event === "error" || r.event === "xds-end")).toEqual([]);
    expect(p.agent.output()).not.toContain("no answer within");
    expect(p.agent.output()).not.toContain("upstream connection failed");
    expect(p.exitCode()).toBeNull();
    console.log(`interop istiod-slow: first CDS through the agent after ${tookMs.toFixed(0)} ms`);
  }, 60_000);
});
