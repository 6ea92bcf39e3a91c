// The PROV_CERT client certificate's check before a CA or istiod connection (src/ca/inspect.ts
// clientCertProblem): as Istio's pilot/pkg/grpc/tls.go, an expired or unreadable certificate is
// left out so the connection goes on the token. Certificates made by @peculiar/x509 with known dates.

import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { expect, test } from "bun:test";
import { clientCertProblem } from "../../src/ca/inspect.ts";
import { loadTlsMaterial } from "../../src/xds/upstream-config.ts";

const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
const NOT_AFTER = Date.parse("2026-06-01T12:00:00Z");

async function pem(notAfter: number): Promise<Buffer> {
  const keys = (await crypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const c = await x509.X509CertificateGenerator.createSelfSigned({
    name: "CN=vm",
    notBefore: new Date(notAfter - 86_400_000),
    notAfter: new Date(notAfter),
    keys,
    signingAlgorithm: EC,
  });
  return Buffer.from(c.toString("pem") + "\n");
}

test("valid until its notAfter, expired one second after, naming the time", async () => {
  const cert = await pem(NOT_AFTER);
  expect(clientCertProblem(cert, NOT_AFTER - 1000)).toBeUndefined();
  expect(clientCertProblem(cert, NOT_AFTER)).toBeUndefined();
  expect(clientCertProblem(cert, NOT_AFTER + 1000)).toBe("expired at 2026-06-01T12:00:00.000Z");
});

test("the first certificate of the chain decides (the leaf)", async () => {
  const chain = Buffer.concat([await pem(NOT_AFTER - 3_600_000), await pem(NOT_AFTER + 86_400_000)]);
  expect(clientCertProblem(chain, NOT_AFTER)).toBe("expired at 2026-06-01T11:00:00.000Z");
});

test("no certificate, or one that does not parse", () => {
  expect(clientCertProblem(Buffer.from(""), NOT_AFTER)).toBe("holds no certificate");
  expect(clientCertProblem(Buffer.from("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), NOT_AFTER)).toBe("holds no certificate");
  expect(clientCertProblem(Buffer.from("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), NOT_AFTER)).toMatch(/^cannot be parsed \(.+\)$/);
});

test("the istiod connection leaves an expired or unreadable client certificate out, keeps a valid one", async () => {
  const files = (cert: Buffer) => ({ exists: () => true, read: (p: string) => (p === "/prov/cert-chain.pem" ? cert : Buffer.from("key")) });
  const t = { root: { kind: "system" as const }, servername: "istiod", clientCert: { certPath: "/prov/cert-chain.pem", keyPath: "/prov/key.pem" } };
  const valid = await pem(NOT_AFTER);
  expect(loadTlsMaterial(t, files(valid), new Date(NOT_AFTER - 1000)).cert).toEqual(valid);
  expect(loadTlsMaterial(t, files(valid), new Date(NOT_AFTER + 1000)).cert).toBeUndefined();
  expect(loadTlsMaterial(t, files(Buffer.from("not pem")), new Date(NOT_AFTER)).cert).toBeUndefined();
});
