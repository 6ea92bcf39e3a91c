// COMPLIANCE_POLICY applies to the agent's own TLS (to istiod and to the CA), as Istio's
// EnforceGoCompliance does for pilot-agent's gRPC clients. The expected settings are Istio's
// (pkg/model/fips.go at 86c9f01fd735); what a real TLS server negotiates with our clients is read
// on the server side (node:tls), with a certificate made by openssl.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type Server, type TLSSocket } from "node:tls";
import { complianceTls, compliancePolicyProblem, FIPS_TLS12_CIPHERS } from "../../src/lib/compliance.ts";
import { IstiodUpstream } from "../../src/xds/upstream.ts";
import type { UpstreamDialConfig } from "../../src/xds/upstream-config.ts";
import { IstioCaClient } from "../../src/ca/client.ts";
import { testRequiring } from "../support/requires.ts";
import { selfSignedCert } from "../support/self-signed.ts";

describe("complianceTls (Istio's EnforceGoCompliance)", () => {
  test("each policy's versions, suites and curves", () => {
    const fips = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384";
    expect(complianceTls("")).toEqual({ minVersion: "TLSv1.2" });
    expect(complianceTls("fips-140-2")).toEqual({ minVersion: "TLSv1.2", maxVersion: "TLSv1.2", ciphers: fips, ecdhCurve: "P-256" });
    expect(complianceTls("fips-140-3")).toEqual({ minVersion: "TLSv1.2", maxVersion: "TLSv1.3", ciphers: fips, ecdhCurve: "P-256:P-384" });
    expect(complianceTls("pqc")).toEqual({ minVersion: "TLSv1.3", ciphers: "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384", ecdhCurve: "X25519MLKEM768" });
  });
  test("an unknown policy is named and the defaults kept", () => {
    expect(compliancePolicyProblem("fips")).toBe(
      'COMPLIANCE_POLICY="fips" is not one of fips-140-2, fips-140-3, pqc: unknown compliance policy, TLS defaults used',
    );
    expect(compliancePolicyProblem("fips-140-2")).toBeUndefined();
    expect(compliancePolicyProblem("")).toBeUndefined();
  });
});

interface Seen {
  protocol: string | null;
  cipher: string;
}

describe("COMPLIANCE_POLICY applies to the agent's own TLS", () => {
  let dir: string;
  let server: Server;
  let port = 0;
  const seen: Seen[] = [];
  let waiters: (() => void)[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "compliance-"));
    const pair = selfSignedCert("/CN=istiod.istio-system.svc", 1, ["subjectAltName=DNS:istiod.istio-system.svc"]);
    writeFileSync(join(dir, "cert.pem"), pair.cert);
    server = createServer(
      {
        key: pair.key,
        cert: pair.cert,
        minVersion: "TLSv1.2",
        maxVersion: "TLSv1.3",
        ALPNProtocols: ["h2"],
      },
      (s: TLSSocket) => {
        seen.push({ protocol: s.getProtocol(), cipher: s.getCipher().name });
        for (const w of waiters.splice(0)) w();
        s.destroy();
      },
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => {
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Run `dial` and return what the server saw of the one connection it made. */
  async function handshake(dial: () => void): Promise<Seen> {
    const before = seen.length;
    const got = new Promise<void>((r) => waiters.push(r));
    dial();
    await Promise.race([got, Bun.sleep(5000)]);
    expect(seen.length).toBeGreaterThan(before);
    return seen[before]!;
  }

  function xdsDial(policy: string): () => void {
    const cfg: UpstreamDialConfig = {
      address: `127.0.0.1:${port}`,
      host: "127.0.0.1",
      port,
      tls: { root: { kind: "file", path: join(dir, "cert.pem") }, servername: "istiod.istio-system.svc" },
      tokenPath: join(dir, "no-token"),
      clusterId: "Kubernetes",
      xdsHeaders: {},
      keepaliveMs: 30_000,
      keepaliveTimeoutMs: 10_000,
      connectTimeoutMs: 2000,
      compliancePolicy: policy,
    };
    return () => {
      const s = new IstiodUpstream(cfg).open(
        { path: "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources", delta: false },
        { onConnected() {}, onData() {}, onDrain() {}, onClose() {} },
      );
      setTimeout(() => s.close(), 1000);
    };
  }

  function caDial(policy: string): () => void {
    return () => {
      const c = new IstioCaClient(
        {
          address: `127.0.0.1:${port}`,
          tls: true,
          rootCertPath: join(dir, "cert.pem"),
          serverName: "istiod.istio-system.svc",
          headers: {},
          compliancePolicy: policy,
        },
        { tokens: { describe: "none", token: async () => undefined }, sleep: async () => false, attemptTimeoutMs: 2000 },
      );
      void c.sign("-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n", 3600).catch(() => {});
    };
  }

  testRequiring(
    { tools: ["openssl"], apt: ["openssl"] },
    "istiod connection: fips-140-2 negotiates TLS 1.2 with a FIPS suite; no policy negotiates TLS 1.3",
    async () => {
      const fips = await handshake(xdsDial("fips-140-2"));
      expect(fips.protocol).toBe("TLSv1.2");
      expect(FIPS_TLS12_CIPHERS).toContain(fips.cipher);
      expect((await handshake(xdsDial(""))).protocol).toBe("TLSv1.3");
    },
    20_000,
  );

  testRequiring(
    { tools: ["openssl"], apt: ["openssl"] },
    "CA connection: fips-140-2 negotiates TLS 1.2 with a FIPS suite; no policy negotiates TLS 1.3",
    async () => {
      const fips = await handshake(caDial("fips-140-2"));
      expect(fips.protocol).toBe("TLSv1.2");
      expect(FIPS_TLS12_CIPHERS).toContain(fips.cipher);
      expect((await handshake(caDial(""))).protocol).toBe("TLSv1.3");
    },
    20_000,
  );
});
