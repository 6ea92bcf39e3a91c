import { afterEach, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { copyFileSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import { CDS, LDS, TYPES, metricValue, startHarness, harnessScope } from "./harness.ts";
import { makeTestPki } from "../support/fake-istiod.ts";
import { NAME_TABLE_TYPE } from "../../src/xds/types.ts";

const scope = harnessScope(afterEach);
const client = (delta = false) => scope.client(delta);

describe("xds proxy: Delta", () => {
  test("delta stream: pass-through both ways, NameTable consumed and ACKed with the nonce", async () => {
    scope.h = await startHarness();
    const envoy = client(true);
    const sent = envoy.send({ typeUrl: LDS, resourceNamesSubscribe: ["*"] });
    const up = await scope.h.istiod.nextStream();
    expect(up.delta).toBe(true);
    expect((await up.nextRequest((r) => r.typeUrl === LDS)).raw.equals(sent)).toBe(true);
    await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE);
    up.send({ typeUrl: NAME_TABLE_TYPE, nonce: "d1", resources: [{ typeUrl: NAME_TABLE_TYPE, value: Buffer.from("t"), name: "nt" }] });
    const ack = await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE && r.responseNonce === "d1");
    expect(ack.errorDetail).toBeUndefined();
    const resp = up.encode({ typeUrl: LDS, nonce: "d2", resources: [{ typeUrl: LDS, value: Buffer.from("l"), name: "l1" }] });
    up.sendRaw(resp);
    const [got] = await envoy.waitFor(1);
    expect(got!.equals(resp)).toBe(true);
    expect(TYPES.DeltaRes.decode(got!).toJSON().nonce).toBe("d2");
  });
});

describe("xds proxy: upstream dialing", () => {
  test("no token file: no authorization header", async () => {
    scope.h = await startHarness({ token: null });
    client().send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest();
    expect(up.metadata["authorization"]).toBeUndefined();
  });

  test("token re-read on every connect", async () => {
    scope.h = await startHarness();
    const e1 = client();
    e1.send({ typeUrl: CDS });
    const up1 = await scope.h.istiod.nextStream();
    expect(up1.metadata["authorization"]).toBe("Bearer test-token");
    writeFileSync(join(scope.h.root, "var/run/secrets/tokens/istio-token"), "rotated");
    client().send({ typeUrl: CDS });
    const up2 = await scope.h.istiod.nextStream();
    expect(up2.metadata["authorization"]).toBe("Bearer rotated");
  });

  test("TLS server name mismatch fails the dial; Envoy gets UNAVAILABLE and the failure is counted", async () => {
    scope.h = await startHarness({ env: { ISTIOD_SAN: "wrong.example.com" } });
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(scope.h.istiod.streams.length).toBe(0);
    expect(await metricValue(scope.h.registry, "istio_agent_istiod_connection_failures")).toBe(1);
    expect(scope.h.readiness.warnings().map((w) => w.name)).toContain("xds connected");
    expect(scope.h.readiness.describe()).toContain("xds connected");
  });

  test("an IP server name (VMs dialing istiod by IP) is verified against the certificate's IP SANs", async () => {
    scope.h = await startHarness({ env: { ISTIOD_SAN: "127.0.0.1" }, sans: ["127.0.0.1"] });
    const ok = client();
    ok.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest();
    await scope.h.stop();

    scope.h = await startHarness({ env: { ISTIOD_SAN: "127.0.0.2" }, sans: ["127.0.0.1"] });
    const bad = client();
    bad.send({ typeUrl: CDS });
    const s = await bad.status;
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(s.details).toContain("127.0.0.2");
    expect(scope.h.istiod.streams.length).toBe(0);
  });

  test("root CA: an untrusted root fails; replacing the file applies to the next connection", async () => {
    scope.h = await startHarness();
    const rootPath = join(scope.h.root, "var/run/secrets/istio/root-cert.pem");
    const other = makeTestPki(join(scope.h.root, "other-pki"));
    copyFileSync(other.caCert, rootPath);
    const e1 = client();
    e1.send({ typeUrl: CDS });
    expect((await e1.status).code).toBe(grpc.status.UNAVAILABLE);
    copyFileSync(scope.h.pki.caCert, rootPath);
    const e2 = client();
    e2.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest();
  });

  test("missing root CA file: the dial fails with a message naming the file", async () => {
    scope.h = await startHarness();
    rmSync(join(scope.h.root, "var/run/secrets/istio/root-cert.pem"));
    const e = client();
    e.send({ typeUrl: CDS });
    const s = await e.status;
    expect(s.code).toBe(grpc.status.UNAVAILABLE);
    expect(s.details).toContain("root-cert.pem");
  });

  test("client certificate from PROV_CERT is presented to an istiod that requires one", async () => {
    scope.h = await startHarness({ requireClientCert: true, env: { PROV_CERT: "./prov" } });
    const prov = join(scope.h.root, "prov");
    require("node:fs").mkdirSync(prov);
    copyFileSync(scope.h.pki.clientCert, join(prov, "cert-chain.pem"));
    copyFileSync(scope.h.pki.clientKey, join(prov, "key.pem"));
    copyFileSync(scope.h.pki.caCert, join(prov, "root-cert.pem"));
    client().send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    expect((await up.nextRequest()).typeUrl).toBe(CDS);
    // The certificate istiod saw is the one from PROV_CERT (compared as DER with node's parser).
    const want = new X509Certificate(readFileSync(scope.h.pki.clientCert)).raw;
    expect(up.peerCertDer?.toString("hex")).toBe(want.toString("hex"));
  });

  test("plaintext with controlPlaneAuthPolicy NONE", async () => {
    scope.h = await startHarness({ tls: false });
    client().send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    expect((await up.nextRequest()).typeUrl).toBe(CDS);
  });
});

describe("xds proxy: load and bad input", () => {
  test("both sides pushing hard at once: no deadlock, order preserved both ways", async () => {
    scope.h = await startHarness({ dns: false });
    const envoy = client();
    const up$ = scope.h.istiod.nextStream();
    envoy.send({ typeUrl: CDS, versionInfo: "0" });
    const up = await up$;
    const N = 60;
    const big = Buffer.alloc(512 * 1024, 1);
    const sentResp: Buffer[] = [];
    for (let i = 0; i < N; i++) {
      sentResp.push(up.encode({ typeUrl: CDS, versionInfo: String(i), nonce: `n${i}`, resources: [{ typeUrl: CDS, value: big }] }));
      up.sendRaw(sentResp[i]!);
      envoy.send({ typeUrl: CDS, versionInfo: String(i + 1), responseNonce: `n${i}`, resourceNames: Array.from({ length: 200 }, (_, k) => `cluster-${k}`) });
    }
    const got = await envoy.waitFor(N, 20000);
    for (let i = 0; i < N; i++) expect(got[i]!.equals(sentResp[i]!)).toBe(true);
    const last = await up.nextRequest((r) => r.versionInfo === String(N), 0, 20000);
    expect(last).toBeDefined();
    expect(up.requests.map((r) => Number(r.versionInfo))).toEqual(Array.from({ length: N + 1 }, (_, i) => i));
  }, 30000);

  test("a malformed request from Envoy ends the stream with INVALID_ARGUMENT", async () => {
    scope.h = await startHarness();
    const envoy = client();
    envoy.call.write(Buffer.from([0x22, 0x50, 0x41])); // field 4, length 80, 1 byte present
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(s.details).toContain("malformed DiscoveryRequest");
  });

  test("a malformed response from istiod ends the stream with INTERNAL", async () => {
    scope.h = await startHarness();
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest();
    up.sendRaw(Buffer.from([0x12, 0x05, 0x0a, 0x7f, 0x41]));
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.INTERNAL);
    expect(s.details).toContain("malformed DiscoveryResponse from istiod");
    await up.closed;
  });

  test("oversized request: RESOURCE_EXHAUSTED naming the limit", async () => {
    scope.h = await startHarness({ env: { ISTIO_GPRC_MAXRECVMSGSIZE: "1024" } });
    const envoy = client();
    envoy.send({ typeUrl: CDS, resourceNames: Array.from({ length: 100 }, (_, i) => `cluster-number-${i}`) });
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(s.details).toContain("ISTIO_GPRC_MAXRECVMSGSIZE");
  });
});
