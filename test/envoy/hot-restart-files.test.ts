// ENVOY_HOT_RESTART (beyond Istio, opt-in) starts a new Envoy epoch when what the README names
// changes: mounted certificate files and the bootstrap, not only a custom config file. The
// compiled agent runs with file-mounted certificates (FILE_MOUNTED_CERTS, ./etc/certs) and the
// Envoy stand-in; rewriting cert-chain.pem must start epoch 1 with Istio's hot-restart flags.

import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPod, until, type Pod } from "../e2e/pod.ts";
import { readRecords, writeFakeEnvoyLauncher } from "../support/fake-envoy.ts";
import { makeTestPki } from "../support/fake-istiod.ts";
import { readFileSync } from "node:fs";

const work = mkdtempSync(join(tmpdir(), "agent-hot-restart-"));
let pod: Pod | undefined;
afterAll(() => {
  pod?.kill();
  for (const r of readRecords(join(work, "record.jsonl"))) {
    try {
      process.kill(r.pid, "SIGKILL");
    } catch {}
  }
  pod?.box.cleanup();
  rmSync(work, { recursive: true, force: true });
});

test("hot-restart epochs trigger on a mounted certificate file change (compiled agent)", async () => {
  const pki = makeTestPki(join(work, "pki"));
  const record = join(work, "record.jsonl");
  const pem = (p: string) => readFileSync(p, "utf8");
  pod = await startPod({
    env: { FILE_MOUNTED_CERTS: "true", ENVOY_HOT_RESTART: "true", FAKE_ENVOY_RECORD: record },
    proxyConfig: { discoveryAddress: "127.0.0.1:1", binaryPath: writeFakeEnvoyLauncher(work), drainDuration: "2s" },
    files: { "etc/certs/cert-chain.pem": pem(pki.serverCert), "etc/certs/key.pem": pem(pki.serverKey), "etc/certs/root-cert.pem": pem(pki.caCert) },
  });
  const starts = () => readRecords(record).filter((r) => r.event === "start");
  await pod.agent.waitFor(/hot restart enabled: a change to .*etc\/certs\/cert-chain\.pem/);
  const first = await until(pod, "Envoy epoch 0", () => starts()[0]);
  expect(first.argv!.slice(first.argv!.indexOf("--restart-epoch"), first.argv!.indexOf("--restart-epoch") + 2)).toEqual(["--restart-epoch", "0"]);
  writeFileSync(pod.path("etc/certs/cert-chain.pem"), pem(pki.caCert));
  const second = await until(pod, "Envoy epoch 1 after the certificate changed", () => starts()[1], 10_000);
  expect(second.argv!.slice(second.argv!.indexOf("--restart-epoch"), second.argv!.indexOf("--restart-epoch") + 2)).toEqual(["--restart-epoch", "1"]);
  expect(pod.exitCode()).toBeNull();
}, 30_000);
