// Differential: the certificate request Istio's CA receives from Istio's pilot-agent and from
// ours, for the same pod environment: key type and size, subject, SANs and requested validity
// (read with openssl), and the gRPC metadata that carries the token and the cluster ID.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { freePort } from "../e2e/pod.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { startIstiodLite, LITE_TOKEN, type CsrRecord, type IstiodLite } from "./support/istiod-lite.ts";
import { istioBootstrapTemplate, runAgentUntilEnvoy } from "./support/agent-run.ts";

/** What openssl says about a PEM CSR: key algorithm and size, subject, SANs. */
function describeCsr(pem: string): { key: string; subject: string; san: string } {
  const p = Bun.spawnSync(["openssl", "req", "-noout", "-text"], { stdin: Buffer.from(pem), stdout: "pipe", stderr: "pipe" });
  const text = p.stdout.toString();
  const key = [/Public Key Algorithm: (\S+)/.exec(text)?.[1], /Public-Key: \((\d+ bit)\)/.exec(text)?.[1], /ASN1 OID: (\S+)/.exec(text)?.[1]]
    .filter(Boolean)
    .join(" ");
  const subject = /Subject:(.*)/.exec(text)?.[1]?.trim() ?? "";
  const san = /X509v3 Subject Alternative Name:[^\n]*\n\s*(.*)/.exec(text)?.[1]?.trim() ?? "";
  return { key, subject, san };
}

/**
 * The CSR's DER as `openssl asn1parse -i` reads it, one "depth class tag[:value]" per element, the
 * bytes that differ between any two requests (key, signature) and the lengths left out: Istio's Go
 * encoding and ours element by element (ours is written by hand, src/ca/csr.ts).
 */
function derStructure(pem: string): string[] {
  const p = Bun.spawnSync(["openssl", "asn1parse", "-i"], { stdin: Buffer.from(pem), stdout: "pipe", stderr: "pipe" });
  return p.stdout
    .toString()
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) =>
      l
        .replace(/^\s*\d+:d=(\d+)\s+hl=\d+\s+l=\s*\d+\s+(prim|cons):\s*/, "$1 $2 ")
        .replace(/\s+/g, " ")
        .trim(),
    );
}

/**
 * No known differences: the subject (Istio's empty Organization) and an empty `clusterid` header
 * without ISTIO_META_CLUSTER_ID, once reported here, are now Istio's on our side too.
 */
/** Metadata that says something about the caller (transport headers left out). */
const CALLER_METADATA = ["authorization", "clusterid"];

describeRequiring(
  { check: interopUnmet, tools: ["openssl"], apt: ["openssl"] },
  "CSR differential: what Istio's CA receives from Istio's pilot-agent and from ours",
  () => {
    let lite: IstiodLite;
    beforeAll(async () => {
      lite = await startIstiodLite("");
    }, 90_000);
    afterAll(async () => {
      await lite?.stop();
    });

    const ENVS: Record<string, string>[] = [
      {},
      { ISTIO_META_CLUSTER_ID: "cluster-b" },
      { ECC_SIGNATURE_ALGORITHM: "ECDSA" },
      { TRUST_DOMAIN: "example.org" },
      { SECRET_TTL: "2h" },
      { WORKLOAD_RSA_KEY_SIZE: "3072" },
    ];
    for (const extra of ENVS) {
      test(`same CSR and metadata with ${JSON.stringify(extra)}`, async () => {
        requireBinary();
        const ports = { status: await freePort(), admin: await freePort() };
        const csrFor = async (bin: string): Promise<CsrRecord | undefined> => {
          const before = lite.records().length;
          const newCsr = () =>
            lite
              .records()
              .slice(before)
              .find((r): r is CsrRecord => r.kind === "csr");
          await runAgentUntilEnvoy({
            bin,
            args: ["proxy", "sidecar"],
            env: {
              POD_NAME: "csr-0",
              POD_NAMESPACE: "fake-namespace",
              SERVICE_ACCOUNT: "fake-sa",
              INSTANCE_IP: "10.1.2.3",
              CLOUD_PLATFORM: "none",
              CA_ADDR: lite.caAddress,
              PROXY_CONFIG: JSON.stringify({ discoveryAddress: lite.xdsAddress, binaryPath: "<ENVOY>", statusPort: ports.status, proxyAdminPort: ports.admin }),
              ...extra,
            },
            files: { "var/run/secrets/tokens/istio-token": LITE_TOKEN, "var/run/secrets/istio/root-cert.pem": lite.rootPem },
            template: istioBootstrapTemplate(),
            until: () => newCsr() !== undefined,
            timeoutMs: 20_000,
          });
          return newCsr();
        };
        const theirs = await csrFor(PILOT_AGENT);
        const ours = await csrFor(DIST_AGENT);
        expect(theirs).toBeDefined();
        expect(ours).toBeDefined();
        const view = (r: CsrRecord) => ({
          csr: describeCsr(r.request.csr),
          der: derStructure(r.request.csr),
          validityDuration: r.request.validityDuration,
          metadata: Object.fromEntries(CALLER_METADATA.map((k) => [k, r.metadata[k]])),
        });
        const a = view(theirs!);
        const b = view(ours!);
        // Literals first: Istio's CA must see what we believe Istio sends, so an oracle change shows.
        expect(a.csr.subject).toBe("O =");
        expect(a.der).toContain("7 prim BOOLEAN :255"); // the SAN extension is critical
        expect(a.der.length).toBeGreaterThan(20);
        expect(a.metadata.clusterid).toEqual(["ISTIO_META_CLUSTER_ID" in extra ? String((extra as Record<string, string>).ISTIO_META_CLUSTER_ID) : ""]);
        expect(b).toEqual(a);
      }, 60_000);
    }
  },
);
