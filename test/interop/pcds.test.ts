// Interop: the PCDS trust bundle from Istio's own discovery server. istiod-lite runs as istiod
// does with ISTIO_MULTIROOT_MESH=true (Istio's TrustBundle and PcdsGenerator: the CA's root plus
// the mesh config's caCertificates); our agent with PROXY_CONFIG_XDS_AGENT=true subscribes to
// ProxyConfig and serves the bundle in SDS's ROOTCA; when the mesh config's certificates change,
// istiod pushes and ROOTCA follows on the same stream.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { selfSignedCert } from "../support/self-signed.ts";
import { discoveryTypes } from "../support/fake-istiod.ts";
import { decodeDiscoveryResponse, decodeResource } from "../e2e/envoy-resources.ts";
import { fetchSecret } from "../e2e/mesh.ts";
import { startPod, until, type Pod } from "../e2e/pod.ts";
import { interopUnmet } from "./support/go-build.ts";
import { LITE_NAMESPACE, LITE_SERVICE_ACCOUNT, LITE_TOKEN, startIstiodLite, type IstiodLite } from "./support/istiod-lite.ts";
import { readStandinRecords, writeStandinLauncher } from "./support/envoy-standin.ts";

const SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/** The certificates of a PEM bundle, whitespace-normalised and sorted (a set). */
const certSet = (pem: string): string[] =>
  (pem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []).map((c) => c.replace(/\s+/g, "")).sort();

describeRequiring({ check: interopUnmet, tools: ["openssl"], apt: ["openssl"] }, "interop: PCDS trust bundle from Istio's discovery server", () => {
  const work = mkdtempSync(join(tmpdir(), "agent-interop-pcds-"));
  const record = join(work, "envoy.jsonl");
  let lite: IstiodLite;
  let pod: Pod;
  let anchorA = "";
  let anchorB = "";

  beforeAll(async () => {
    anchorA = selfSignedCert("/O=anchor-a", 2, ["basicConstraints=critical,CA:TRUE"]).cert;
    anchorB = selfSignedCert("/O=anchor-b", 2, ["basicConstraints=critical,CA:TRUE"]).cert;
    lite = await startIstiodLite("", { meshCaCertificates: anchorA });
    pod = await startPod({
      env: {
        POD_NAME: "pcds-0",
        POD_NAMESPACE: LITE_NAMESPACE,
        SERVICE_ACCOUNT: LITE_SERVICE_ACCOUNT,
        CA_ADDR: lite.caAddress,
        ISTIOD_SAN: "istiod.istio-system.svc",
        PROXY_CONFIG_XDS_AGENT: "true",
        INTEROP_ENVOY_RECORD: record,
        INTEROP_ENVOY_XDS: "sotw",
        ISTIO_DELTA_XDS: "false",
      },
      proxyConfig: { discoveryAddress: lite.xdsAddress, binaryPath: writeStandinLauncher(work), terminationDrainDuration: "1s", drainDuration: "2s" },
      files: { "var/run/secrets/istio/root-cert.pem": lite.rootPem, "var/run/secrets/tokens/istio-token": LITE_TOKEN },
    });
  }, 90_000);

  afterAll(async () => {
    pod?.kill();
    pod?.box.cleanup();
    for (const r of readStandinRecords(record))
      if (r.event === "start")
        try {
          process.kill(r.pid, "SIGKILL");
        } catch {}
    await lite?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  /** ROOTCA as our SDS serves it now: the set of trusted CA certificates. */
  async function rootCa(): Promise<string[]> {
    const { Req } = discoveryTypes();
    const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());
    const res = decodeDiscoveryResponse(await fetchSecret(pod.path("var/run/secrets/workload-spiffe-uds/socket"), "ROOTCA", enc));
    const secret = decodeResource(SECRET, res.resources[0]!.value) as { validation_context?: { trusted_ca?: { inline_bytes?: Uint8Array } } };
    return certSet(Buffer.from(secret.validation_context?.trusted_ca?.inline_bytes ?? []).toString("utf8"));
  }
  const same = (a: string[], b: string[]) => a.join("|") === b.join("|");

  test("ROOTCA holds istiod's trust bundle: the CA's root and the mesh config's caCertificates", async () => {
    const want = certSet(lite.rootPem + anchorA);
    expect(want.length).toBe(2);
    const got = await until(
      pod,
      "ROOTCA with the PCDS trust bundle",
      async () => {
        const r = await rootCa().catch(() => undefined);
        return r && same(r, want) ? r : undefined;
      },
      40_000,
    );
    expect(got).toEqual(want);
  }, 60_000);

  test("a changed mesh trust anchor is pushed by istiod and replaces the old one in ROOTCA", async () => {
    await lite.reloadMeshCaCertificates(anchorB);
    const want = certSet(lite.rootPem + anchorB);
    // anchor B's arrival is the sentinel: the same push removes anchor A.
    const got = await until(
      pod,
      "ROOTCA with anchor B",
      async () => {
        const r = await rootCa().catch(() => undefined);
        return r?.includes(certSet(anchorB)[0]!) ? r : undefined;
      },
      40_000,
    );
    expect(got).toEqual(want);
    expect(got).not.toContain(certSet(anchorA)[0]);
    expect(pod.exitCode()).toBeNull();
  }, 60_000);
});
