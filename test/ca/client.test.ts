// The CA client against the fake CA over TLS: outgoing metadata, the token re-read per request,
// request fields, Istio's retries, a rejected or missing token reported as such, bad responses.

import { describe, expect, test, beforeAll, afterAll, beforeEach } from "bun:test";
import { status } from "@grpc/grpc-js";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IstioCaClient } from "../../src/ca/client.ts";
import { CaError } from "../../src/ca/errors.ts";
import { generateKeyAndCsr } from "../../src/ca/keygen.ts";
import { FileTokenSource } from "../../src/ca/token.ts";
import { CA_MAX_ATTEMPTS } from "../../src/ca/retry.ts";
import { FakeCa, servingCert } from "../support/fake-ca.ts";
import { until } from "../sds/fake-clock.ts";

const SPIFFE = "spiffe://cluster.local/ns/ns1/sa/sa1";
let ca: FakeCa;
let dir: string;
let csr: string;
const sleeps: number[] = [];
let retries = 0;

function client(over: Partial<ConstructorParameters<typeof IstioCaClient>[0]> = {}, timeout?: number): IstioCaClient {
  return new IstioCaClient(
    {
      address: ca.address,
      tls: true,
      rootCertPath: join(dir, "root.pem"),
      serverName: "istiod.istio-system.svc",
      headers: { ClusterID: "Kubernetes", Foo: "bar" },
      csrMetadata: { CertSigner: "signer-a" },
      ...over,
    },
    {
      tokens: new FileTokenSource(join(dir, "token")),
      sleep: async (ms) => (sleeps.push(ms), true),
      random: () => 0.5,
      onRetry: () => retries++,
      ...(timeout ? { attemptTimeoutMs: timeout } : {}),
    },
  );
}

beforeAll(async () => {
  ca = await FakeCa.start({ token: "good", spiffeId: SPIFFE });
  dir = mkdtempSync(join(tmpdir(), "caclient-"));
  writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
  csr = (await generateKeyAndCsr({ algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, SPIFFE)).csrPem;
});
afterAll(async () => {
  await ca.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  ca.mode = "ok";
  ca.requests.length = 0;
  sleeps.length = 0;
  retries = 0;
  writeFileSync(join(dir, "token"), "good\n");
});

describe("IstioCaClient", () => {
  test("sends the CSR, TTL, CertSigner and headers; token re-read on every request", async () => {
    const c = client();
    const chain = await c.sign(csr, 7200);
    expect(chain.length).toBe(2);
    const r = ca.requests[0]!;
    expect(r.validityDuration).toBe(7200);
    expect(r.metadata).toEqual({ CertSigner: "signer-a" });
    expect(r.headers["clusterid"]).toBe("Kubernetes");
    expect(r.headers["foo"]).toBe("bar");
    expect(r.headers["authorization"]).toBe("Bearer good");
    writeFileSync(join(dir, "token"), "rotated");
    const e2 = await c.sign(csr, 7200).catch((e) => e);
    expect(e2.message).toMatch(/rejected the token/);
    expect(ca.requests[1]!.headers["authorization"]).toBe("Bearer rotated");
    c.close();
  });

  test("retries transient failures 5 attempts in all, with Istio's backoff", async () => {
    ca.mode = "fail";
    const c = client();
    const err = await c.sign(csr, 60).catch((e) => e);
    expect(err).toBeInstanceOf(CaError);
    expect(err.message).toContain("UNAVAILABLE");
    expect(ca.requests.length).toBe(CA_MAX_ATTEMPTS);
    expect(retries).toBe(CA_MAX_ATTEMPTS - 1);
    expect(sleeps).toEqual([100, 200, 400, 800]);
    c.close();
  });

  test("does not retry a non-transient code", async () => {
    ca.mode = "fail";
    ca.failCode = status.INVALID_ARGUMENT;
    const c = client();
    expect(String(await c.sign(csr, 60).catch((e) => e))).toMatch("INVALID_ARGUMENT");
    expect(ca.requests.length).toBe(1);
    ca.failCode = status.UNAVAILABLE;
    c.close();
  });

  test("a rejected token is reported as such, naming the token file, without the token", async () => {
    ca.mode = "reject-token";
    const c = client();
    const err = (await c.sign(csr, 60).catch((e) => e)) as CaError;
    expect(err.kind).toBe("rejected-token");
    expect(err.message).toContain(join(dir, "token"));
    expect(err.message).not.toContain("good");
    expect(ca.requests.length).toBe(1);
    c.close();
  });

  test("a missing token sends no authorization header and says the token is missing", async () => {
    rmSync(join(dir, "token"));
    const c = client();
    const err = (await c.sign(csr, 60).catch((e) => e)) as CaError;
    expect(err.kind).toBe("rejected-token");
    expect(err.message).toContain("no token at");
    expect(ca.requests[0]!.headers["authorization"]).toBeUndefined();
    c.close();
  });

  test("a chain of one certificate is refused", async () => {
    ca.mode = "short-chain";
    const c = client();
    expect(String(await c.sign(csr, 60).catch((e) => e))).toMatch(/returned 1 certificate/);
    c.close();
  });

  // Each attempt's deadline covers connecting too: under load an attempt may expire before its
  // request reaches the CA. So the CA's count of requests is not asserted exactly; what must hold
  // at any speed is that a request the CA holds forever is cut by the deadline and retried.
  test("a stalled CA hits the per-attempt deadline and is retried", async () => {
    ca.mode = "stall";
    const c = client({}, 1000);
    const signed = c.sign(csr, 60);
    await until(() => ca.requests.length >= 1, "a request held by the stalled CA", 20_000);
    ca.mode = "ok"; // the held request is never answered: only its deadline ends it
    const chain = await Promise.race([signed, Bun.sleep(20_000).then(() => "still waiting after 20 s: no per-attempt deadline")]);
    expect(Array.isArray(chain) ? chain.length : chain).toBe(2);
    expect(retries).toBeGreaterThanOrEqual(1);
    expect(ca.requests.length).toBeGreaterThanOrEqual(2);
    c.close();
  }, 45_000);

  test("a CA stalled on every attempt ends with DEADLINE_EXCEEDED after 5 attempts with Istio's backoff", async () => {
    ca.mode = "stall";
    const c = client({}, 200);
    const err = (await Promise.race([c.sign(csr, 60).catch((e) => e), Bun.sleep(20_000).then(() => new Error("no per-attempt deadline"))])) as Error;
    expect(err).toBeInstanceOf(CaError);
    expect(err.message).toContain("DEADLINE_EXCEEDED");
    expect(retries).toBe(CA_MAX_ATTEMPTS - 1);
    expect(sleeps).toEqual([100, 200, 400, 800]);
    expect(ca.requests.length).toBeLessThanOrEqual(CA_MAX_ATTEMPTS);
    c.close();
  }, 45_000);

  test("a wrong server name fails the TLS handshake", async () => {
    const c = client({ serverName: "not-istiod.example" }, 2000);
    expect(await c.sign(csr, 60).catch((e) => e)).toBeInstanceOf(CaError);
    expect(ca.requests.length).toBe(0);
    c.close();
  });

  test("an IP address as server name is checked against the certificate's IP SANs", async () => {
    const ok = client({ serverName: "127.0.0.1" }, 2000);
    expect((await ok.sign(csr, 60)).length).toBe(2);
    ok.close();
    const bad = client({ serverName: "127.0.0.2" }, 2000);
    expect(await bad.sign(csr, 60).catch((e) => e)).toBeInstanceOf(CaError);
    bad.close();
  });

  test("an unreachable CA: every attempt dials and reads the root, which is parsed and loaded into TLS once", async () => {
    const c = client({ address: "127.0.0.1:1", serverName: "127.0.0.1" });
    for (let i = 0; i < 2; i++) expect(String(await c.sign(csr, 60).catch((e) => e))).toContain("ECONNREFUSED");
    expect(c.dials).toBe(2 * CA_MAX_ATTEMPTS);
    expect(c.rootParses).toBe(1);
    expect(c.tlsContexts).toBe(1);
    c.close();
  });

  test("a root rewritten between dials is checked again: a broken one is named, the good one is used again", async () => {
    const root = join(dir, "rewritten.pem");
    writeFileSync(root, ca.tls!.rootPem);
    const c = client({ rootCertPath: root });
    expect((await c.sign(csr, 60)).length).toBe(2);
    c.close(); // the next CSR dials again, reading the file as it is then
    writeFileSync(root, "not a certificate\n");
    const err = await c.sign(csr, 60).catch((e) => e);
    expect(err).toBeInstanceOf(CaError);
    expect(err.message).toContain(`root certificate ${root} is not PEM`);
    writeFileSync(root, ca.tls!.rootPem);
    expect((await c.sign(csr, 60)).length).toBe(2);
    expect(c.rootParses).toBe(2); // the good root once, the broken one once; the good one again is known
    expect(c.tlsContexts).toBe(1); // the broken root never reached TLS
    c.close();
  });

  test("a rotated root makes a new TLS context: a CA the old root could not verify is trusted at the next dial", async () => {
    const root = join(dir, "rotated.pem");
    writeFileSync(root, (await servingCert()).rootPem); // another mesh's root
    const c = client({ rootCertPath: root });
    expect(String(await c.sign(csr, 60).catch((e) => e))).toMatch(/CSR failed: UNAVAILABLE/);
    expect(ca.requests.length).toBe(0);
    writeFileSync(root, ca.tls!.rootPem);
    expect((await c.sign(csr, 60)).length).toBe(2);
    expect(c.tlsContexts).toBe(2);
    c.close();
  });

  test("a missing root file is a config error naming the path", async () => {
    const c = client({ rootCertPath: join(dir, "nope.pem") });
    expect(String(await c.sign(csr, 60).catch((e) => e))).toMatch(join(dir, "nope.pem"));
    c.close();
  });
});
