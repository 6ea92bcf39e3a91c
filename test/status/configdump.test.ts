// The config dump's own logic: certificate states (warming, valid, renewing, expired) from
// certificates made by @peculiar/x509 with known serials and dates, the readiness history's
// events and bound, URLs without credentials, and redaction of secrets in ProxyConfig and node
// metadata. The compiled agent's dump is tested in operator-view.test.ts.

import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { describe, expect, test } from "bun:test";
import { buildConfigDump, certificatesView, safeUrl } from "../../src/debug/configdump.ts";
import { MAX_EVENTS, ReadinessHistory } from "../../src/debug/history.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import type { SecretCacheSnapshot } from "../../src/sds/cache.ts";
import { testConfig } from "../support/config.ts";

const NOW = Date.parse("2026-06-01T12:00:00Z");
const HOUR = 3_600_000;

async function cert(serial: string, notBefore: number, notAfter: number, spiffe?: string): Promise<string> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const c = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial,
    name: spiffe ? "" : "O=cluster.local",
    notBefore: new Date(notBefore),
    notAfter: new Date(notAfter),
    keys,
    signingAlgorithm: alg,
    extensions: spiffe ? [new x509.SubjectAlternativeNameExtension([{ type: "url", value: spiffe }], true)] : [],
  });
  return c.toString("pem") + "\n";
}

const SPIFFE = "spiffe://cluster.local/ns/demo/sa/app";

function snap(over: Partial<SecretCacheSnapshot>): SecretCacheSnapshot {
  return { spiffeId: SPIFFE, signer: "istiod", signing: false, renewFailures: 0, files: [], ...over };
}

describe("certificate states", () => {
  test("warming before the first certificate; the last CA error and when", () => {
    const v = certificatesView(snap({ signing: true, lastError: { message: "UNAVAILABLE: connection refused", atMs: NOW - 5000 } }), "istiod", NOW);
    expect(v).toEqual({
      spiffeId: SPIFFE,
      workloadState: "warming",
      renewFailures: 0,
      lastCaError: { message: "UNAVAILABLE: connection refused", at: "2026-06-01T11:59:55.000Z" },
      certificates: [],
    });
  });

  test("valid, renewing (a failed renewal or a CSR in flight), expired; serial, dates, SPIFFE ID", async () => {
    const chain = await cert("0a1b2c", NOW - HOUR, NOW + 23 * HOUR, SPIFFE);
    const workload = { chainPem: chain, createdMs: NOW - HOUR, expireMs: NOW + 23 * HOUR };
    const valid = certificatesView(snap({ workload }), "istiod", NOW);
    expect(valid.workloadState).toBe("valid");
    expect(valid.certificates).toEqual([
      {
        resource: "default",
        source: "ca:istiod",
        state: "valid",
        chainLength: 1,
        spiffeIds: [SPIFFE],
        subject: "",
        issuer: "",
        serial: "0a1b2c",
        notBefore: "2026-06-01T11:00:00.000Z",
        notAfter: "2026-06-02T11:00:00.000Z",
        expiresInSeconds: 23 * 3600,
      },
    ]);
    expect(certificatesView(snap({ workload, renewFailures: 2 }), "istiod", NOW).workloadState).toBe("renewing");
    expect(certificatesView(snap({ workload, signing: true }), "istiod", NOW).workloadState).toBe("renewing");
    const old = await cert("77", NOW - 25 * HOUR, NOW - HOUR, SPIFFE);
    const expired = certificatesView(snap({ workload: { chainPem: old, createdMs: NOW - 25 * HOUR, expireMs: NOW - HOUR }, renewFailures: 5 }), "istiod", NOW);
    expect(expired.certificates[0]).toMatchObject({ state: "expired", expiresInSeconds: -3600 });
    // Time left rounded down, and "expired" only once notAfter has passed: 0.4 s and 23h59m59.6s left.
    const justIssued = certificatesView(snap({ workload }), "istiod", NOW + 23 * HOUR - 86_399_600);
    expect(justIssued.certificates[0]).toMatchObject({ state: "valid", expiresInSeconds: 86_399 });
    const lastSecond = certificatesView(snap({ workload }), "istiod", NOW + 23 * HOUR - 400);
    expect(lastSecond.certificates[0]).toMatchObject({ state: "valid", expiresInSeconds: 0 });
  });

  test("ROOTCA certificates one by one; file-mounted resources named with their files", async () => {
    const r1 = await cert("01", NOW - HOUR, NOW + 1000 * HOUR);
    const r2 = await cert("02", NOW - 2 * HOUR, NOW - HOUR);
    const leaf = await cert("03", NOW - HOUR, NOW + HOUR, SPIFFE);
    const v = certificatesView(
      snap({
        rootPem: r1 + r2,
        files: [{ name: "file-cert:/c.pem~/k.pem", paths: ["/c.pem", "/k.pem"], chainPem: leaf, createdMs: 0, expireMs: NOW + HOUR }],
      }),
      "istiod",
      NOW,
    );
    expect(v.certificates.map((c) => [c.resource, c.source, c.serial, c.state])).toEqual([
      ["file-cert:/c.pem~/k.pem", "files:/c.pem", "03", "valid"],
      ["ROOTCA", "ca", "01", "valid"],
      ["ROOTCA", "ca", "02", "expired"],
    ]);
  });
});

describe("readiness history", () => {
  test("raised, failed (a new error only), cleared; warnings marked", () => {
    let now = NOW;
    const r = new Readiness(() => now);
    const h = new ReadinessHistory(r, () => now);
    const dns = r.block("dns table received");
    now += 1000;
    dns.fail("not yet");
    dns.fail("not yet");
    const cert = r.warn("certificate warmed");
    now += 1000;
    dns.clear();
    cert.clear();
    expect(h.snapshot()).toEqual({
      events: [
        { atMs: NOW, name: "dns table received", event: "raised", gates: true },
        { atMs: NOW + 1000, name: "dns table received", event: "failed", gates: true, error: "not yet" },
        { atMs: NOW + 1000, name: "certificate warmed", event: "raised", gates: false },
        { atMs: NOW + 2000, name: "dns table received", event: "cleared", gates: true },
        { atMs: NOW + 2000, name: "certificate warmed", event: "cleared", gates: false },
      ],
      dropped: 0,
    });
  });

  test(`bounded: past ${MAX_EVENTS} events the oldest go, counted`, () => {
    const r = new Readiness(() => NOW);
    const h = new ReadinessHistory(r, () => NOW);
    const b = r.block("x");
    for (let i = 0; i < MAX_EVENTS; i++) b.fail(`e${i}`);
    const s = h.snapshot();
    expect(s.events.length).toBe(MAX_EVENTS);
    expect(s.dropped).toBe(1);
    expect(s.events.at(-1)!.error).toBe(`e${MAX_EVENTS - 1}`);
    expect(s.events[0]!.error).toBe("e0");
  });
});

test("URLs lose their user:password part", () => {
  expect(safeUrl("oci://user:s3cret@registry.example/ns/plugin:1")).toBe("oci://registry.example/ns/plugin:1");
  expect(safeUrl("https://registry.example/p.wasm")).toBe("https://registry.example/p.wasm");
});

test("the dump redacts secrets in ProxyConfig and node metadata, and holds no PEM", async () => {
  const cfg = testConfig({
    env: {
      POD_NAME: "app-0",
      POD_NAMESPACE: "demo",
      ISTIO_META_WASM_IMAGE_PULL_SECRET: "pull-s3cret",
      ISTIO_META_APP_NAME: "shop",
      PROXY_CONFIG: JSON.stringify({ proxyMetadata: { API_TOKEN: "tok-s3cret", PLAIN: "p" } }),
    },
  });
  const readiness = new Readiness(() => NOW);
  const chain = await cert("0a", NOW - HOUR, NOW + HOUR, SPIFFE);
  const dump = buildConfigDump({
    config: cfg,
    now: () => NOW,
    startedMs: NOW - 60_000,
    pid: 42,
    readiness,
    history: new ReadinessHistory(readiness, () => NOW),
    logLevels: () => ({ default: "info" }),
    secrets: () => snap({ workload: { chainPem: chain, rootPem: chain, createdMs: NOW - HOUR, expireMs: NOW + HOUR }, rootPem: chain }),
  });
  const text = JSON.stringify(dump);
  expect(text).not.toContain("s3cret");
  expect(text).not.toContain("-----BEGIN");
  expect(dump.node.metadata).toEqual({ APP_NAME: "shop", WASM_IMAGE_PULL_SECRET: "<redacted>" });
  expect(dump.proxyConfig.proxyMetadata).toEqual({ value: { API_TOKEN: "<redacted>", PLAIN: "p" }, source: "PROXY_CONFIG" });
  expect(dump.agent).toMatchObject({ pid: 42, started: "2026-06-01T11:59:00.000Z", uptimeSeconds: 60 });
  expect(dump.envoy).toEqual({ enabled: false });
});
