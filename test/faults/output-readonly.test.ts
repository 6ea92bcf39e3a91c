// OUTPUT_CERTS on a read-only mount (the agent runs in its own mount namespace where the
// directory is bind-mounted read-only; the test sees the same directory writable). What must
// hold: every write fails with EROFS named in the log, SDS keeps serving the certificate (and
// the renewed one), the files already there are untouched and no temp file is left behind.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { discoveryTypes } from "../support/fake-istiod.ts";
import { decodeDiscoveryResponse, decodeSecret } from "../e2e/envoy-resources.ts";
import { fetchSecret } from "../e2e/mesh.ts";
import { killRecordedEnvoys, startPod, until, xdsYamlWithPort, type Pod } from "../e2e/pod.ts";
import { writeE2eEnvoyLauncher } from "../e2e/xds-envoy.ts";

const OLD = "old content, not ours to touch\n";
let work: string;
let certs: string;
let pod: Pod;

const { Req } = discoveryTypes();
const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());
async function sdsDefault(): Promise<{ chain: string; key: string }> {
  const res = decodeDiscoveryResponse(await fetchSecret(pod.path("var/run/secrets/workload-spiffe-uds/socket"), "default", enc));
  const s = decodeSecret(res.resources[0]!.value);
  return { chain: s.certificateChain ?? "", key: s.privateKey ?? "" };
}

describeRequiring({ root: true, tools: ["unshare", "mount"], apt: ["util-linux", "mount"] }, "OUTPUT_CERTS read-only (compiled agent)", () => {
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "agent-faults-ro-"));
    certs = join(work, "certs");
    mkdirSync(certs);
    writeFileSync(join(certs, "key.pem"), OLD);
    pod = await startPod({
      prefix: ["unshare", "-m", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', certs],
      // The SDS server runs for Envoy (the e2e stand-in) only, as Istio's.
      env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", OUTPUT_CERTS: certs, SECRET_TTL: "4s", FAKE_ENVOY_RECORD: join(work, "envoy-record.jsonl") },
      proxyConfig: { controlPlaneAuthPolicy: "NONE", binaryPath: writeE2eEnvoyLauncher(work), terminationDrainDuration: "1s", drainDuration: "2s" },
      files: { "xds.yaml": xdsYamlWithPort(1) },
    });
  }, 30_000);
  afterAll(() => {
    pod?.kill();
    killRecordedEnvoys(join(work, "envoy-record.jsonl"));
    pod?.box.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  test("writes fail naming the file, SDS keeps serving through a renewal, nothing left behind", async () => {
    // The agent's start, local mode's first load and the first certificate come first: on a loaded
    // machine (r13, load 14) that took longer than until's default 15 s. This asserts what happens,
    // not how fast, so it waits up to the test's own budget.
    await until(pod, "a write refused with EROFS", () => /OUTPUT_CERTS: writing \S+: EROFS; SDS keeps serving/.exec(pod.agent.output())?.[0], 30_000);
    await until(pod, "the SDS socket", () => (existsSync(pod.path("var/run/secrets/workload-spiffe-uds/socket")) ? true : undefined));
    const first = await sdsDefault();
    expect(first.chain).toContain("BEGIN CERTIFICATE");
    expect(first.key).toContain("PRIVATE KEY");
    // A renewal (SECRET_TTL=4s: about every 2 s), refused again, and served.
    const refusals = () => (pod.agent.output().match(/: EROFS; SDS keeps serving/g) ?? []).length;
    const before = refusals();
    await until(pod, "a renewed certificate over SDS", async () => ((await sdsDefault()).chain !== first.chain ? true : undefined), 15_000);
    await until(pod, "the renewed certificate's write refused too", () => (refusals() > before ? true : undefined), 10_000);
    expect(readdirSync(certs)).toEqual(["key.pem"]);
    expect(readFileSync(join(certs, "key.pem"), "utf8")).toBe(OLD);
    expect(pod.exitCode()).toBeNull();
    console.log(`output-readonly: ${refusals()} refused writes, each naming its file; SDS served through a renewal; nothing left behind`);
  }, 70_000);
});
