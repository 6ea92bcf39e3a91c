// Keys and CSRs for every algorithm and key format, signed by the fake CA through the real CA
// client, then checked by openssl: chain verifies to the root, key matches, SAN as expected.

import { describe, expect, test, beforeAll, afterAll } from "bun:test";
import { generateKeyAndCsr, keyOptionsFromEnv, spiffeId, type KeyOptions } from "../../src/ca/keygen.ts";
import { IstioCaClient } from "../../src/ca/client.ts";
import { FileTokenSource } from "../../src/ca/token.ts";
import { FakeCa } from "../support/fake-ca.ts";
import { certPubkey, certText, csrDerHex, csrSubject, csrText, keyPubkey, OPENSSL, verifyChain } from "./openssl.ts";
import { describeRequiring } from "../support/requires.ts";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// A literal, not spiffeId(): the expected value must not come from the code under test.
const SPIFFE = "spiffe://cluster.local/ns/bookinfo/sa/reviews";

test("spiffeId builds Istio's workload identity", () => {
  expect(spiffeId("cluster.local", "bookinfo", "reviews")).toBe(SPIFFE);
  expect(spiffeId("example.org", "default", "default")).toBe("spiffe://example.org/ns/default/sa/default");
});

describe("keyOptionsFromEnv", () => {
  const base = { ECC_SIGNATURE_ALGORITHM: "", ECC_CURVE: "P256", WORKLOAD_RSA_KEY_SIZE: 2048, PKCS8_KEY: false };
  test.each([
    [{}, { algorithm: "RSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }],
    [{ ECC_SIGNATURE_ALGORITHM: "ECDSA" }, { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }],
    [
      { ECC_SIGNATURE_ALGORITHM: "ECDSA", ECC_CURVE: "P384", PKCS8_KEY: true },
      { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P384", pkcs8: true },
    ],
    [{ WORKLOAD_RSA_KEY_SIZE: 4096 }, { algorithm: "RSA", rsaKeySize: 4096, curve: "P256", pkcs8: false }],
  ])("%j", (env, want) => {
    expect(keyOptionsFromEnv({ ...base, ...env })).toEqual(want as KeyOptions);
  });
  test.each([
    [{ ECC_SIGNATURE_ALGORITHM: "EdDSA" }, "ECC_SIGNATURE_ALGORITHM"],
    [{ ECC_CURVE: "P521" }, "ECC_CURVE"],
    [{ WORKLOAD_RSA_KEY_SIZE: 1024 }, "WORKLOAD_RSA_KEY_SIZE"],
  ])("rejects %j naming the variable", (env, name) => {
    expect(() => keyOptionsFromEnv({ ...base, ...env })).toThrow(name);
  });
});

describeRequiring(OPENSSL, "issued certificates verified by openssl", () => {
  let ca: FakeCa;
  let dir: string;
  let client: IstioCaClient;
  beforeAll(async () => {
    ca = await FakeCa.start({ token: "tok-1", spiffeId: SPIFFE });
    dir = mkdtempSync(join(tmpdir(), "keygen-"));
    writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
    writeFileSync(join(dir, "token"), "tok-1\n");
    client = new IstioCaClient(
      { address: ca.address, tls: true, rootCertPath: join(dir, "root.pem"), serverName: "istiod.istio-system.svc", headers: {} },
      { tokens: new FileTokenSource(join(dir, "token")), sleep: async () => true },
    );
  });
  afterAll(async () => {
    client.close();
    await ca.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const cases: [string, KeyOptions, string][] = [
    ["RSA-2048 PKCS#1", { algorithm: "RSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, "RSA PRIVATE KEY"],
    ["RSA-2048 PKCS#8", { algorithm: "RSA", rsaKeySize: 2048, curve: "P256", pkcs8: true }, "PRIVATE KEY"],
    ["ECDSA P-256 SEC1", { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, "EC PRIVATE KEY"],
    ["ECDSA P-384 SEC1", { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P384", pkcs8: false }, "EC PRIVATE KEY"],
    ["ECDSA P-256 PKCS#8", { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: true }, "PRIVATE KEY"],
  ];
  test.each(cases)("%s", async (_label, opts, pemType) => {
    const { keyPem, csrPem } = await generateKeyAndCsr(opts, SPIFFE);
    expect(keyPem.startsWith(`-----BEGIN ${pemType}-----`)).toBe(true);
    const csr = csrText(csrPem);
    expect(csr.ok).toBe(true);
    expect(csr.out).toContain(`URI:${SPIFFE}`);
    expect(csr.out).toMatch(/Subject Alternative Name: critical/);
    // Istio's GenCSRTemplate sets Organization [""]: Go encodes it as an empty PrintableString,
    // SEQUENCE { SET { SEQUENCE { OID 2.5.4.10, PrintableString "" } } } (the DER of a Go CSR).
    expect(csrSubject(csrPem)).toBe("subject=O = \n");
    expect(csrDerHex(csrPem)).toContain("0201003" + "00b31093007060355040a1300");
    const chain = await client.sign(csrPem, 3600);
    expect(chain.length).toBe(2);
    expect(chain[1]).toBe(ca.caRootPem);
    const v = verifyChain(chain.join(""), ca.caRootPem);
    expect(v.out).toContain("OK");
    expect(v.ok).toBe(true);
    expect(certPubkey(chain[0]!)).toBe(keyPubkey(keyPem));
    const text = certText(chain[0]!);
    expect(text).toContain(`URI:${SPIFFE}`);
    expect(text).toContain(opts.algorithm === "RSA" ? "rsaEncryption" : opts.curve === "P384" ? "secp384r1" : "prime256v1");
  });
});
