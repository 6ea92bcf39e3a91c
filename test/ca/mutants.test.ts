// The CA side's small pure parts with literal expectations: Istio's retry policy (which gRPC codes
// are retried, the delays with their ±10 % jitter) and the PEM helpers (blocks, joining, merging
// roots, parsing a certificate). The certificate comes from `openssl req -x509` (an independent
// tool), its SAN and dates read from openssl's own output when it was made.

import { describe, expect, test } from "bun:test";
import { certInfo, joinPem, keyMatchesCert, mergeRoots, pemBlocks, validCerts } from "../../src/ca/pem.ts";
import { CaError } from "../../src/ca/errors.ts";
import { CA_MAX_ATTEMPTS, isRetriable, retryDelayMs } from "../../src/ca/retry.ts";
import { lazySigner } from "../../src/ca/lazy.ts";
import type { CertificateSigner } from "../../src/ca/signer.ts";

describe("retry policy (Istio's CA client)", () => {
  test("five attempts; only transient codes are retried", () => {
    expect(CA_MAX_ATTEMPTS).toBe(5);
    // CANCELLED 1, DEADLINE_EXCEEDED 4, RESOURCE_EXHAUSTED 8, ABORTED 10, INTERNAL 13, UNAVAILABLE 14
    expect([0, 1, 2, 3, 4, 5, 7, 8, 10, 12, 13, 14, 16].filter((c) => isRetriable(c))).toEqual([1, 4, 8, 10, 13, 14]);
    expect(isRetriable(undefined)).toBe(false);
  });

  test("delays: none before the first attempt, then 100 ms doubling, ±10 %", () => {
    expect(retryDelayMs(0, () => 0.9)).toBe(0);
    expect(retryDelayMs(-1, () => 0.9)).toBe(0);
    expect(retryDelayMs(1, () => 0)).toBeCloseTo(90, 9);
    expect(retryDelayMs(1, () => 0.75)).toBeCloseTo(105, 9);
    expect(retryDelayMs(3, () => 0.25)).toBeCloseTo(380, 9);
  });
});

// Made by `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650
// -subj /O=test -addext subjectAltName=URI:spiffe://cluster.local/ns/default/sa/app,DNS:app.example`;
// `openssl x509 -noout -dates` printed notBefore=Nov 24 06:05:44 2026 GMT, notAfter=Nov 21 06:05:44 2036 GMT.
const CERT = `-----BEGIN CERTIFICATE-----
MIIBuDCCAV2gAwIBAgIUcaSdbobFptr0GzwBjCJi/+37c9EwCgYIKoZIzj0EAwIw
DzENMAsGA1UECgwEdGVzdDAeFw0yNjExMjQwNjA1NDRaFw0zNjExMjEwNjA1NDRa
MA8xDTALBgNVBAoMBHRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAScXOnY
9hgGe++m1njZvaFNmtoiJ4z3DM8cxzNTyb9didxllFk22ypqWID/WlnNZN2gqTRa
N5qcMRAsd770qz6Eo4GWMIGTMB0GA1UdDgQWBBSToZbIW950NjpOG+Gex1oebcjD
WzAfBgNVHSMEGDAWgBSToZbIW950NjpOG+Gex1oebcjDWzAPBgNVHRMBAf8EBTAD
AQH/MEAGA1UdEQQ5MDeGKHNwaWZmZTovL2NsdXN0ZXIubG9jYWwvbnMvZGVmYXVs
dC9zYS9hcHCCC2FwcC5leGFtcGxlMAoGCCqGSM49BAMCA0kAMEYCIQDI7hRb4D40
8t8VF35E/awLRweBdeWhFXUiHvmgDYBdxgIhAOGCQjytRucXF+MECCqN7Ep4oD3c
CxVOKAFAQpsFetoH
-----END CERTIFICATE-----
`;
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgklVSGDTW/Ukod4SV
2sIHkQ5MukeBtod2KnzvJSP6rb6hRANCAAScXOnY9hgGe++m1njZvaFNmtoiJ4z3
DM8cxzNTyb9didxllFk22ypqWID/WlnNZN2gqTRaN5qcMRAsd770qz6E
-----END PRIVATE KEY-----
`;

describe("PEM helpers", () => {
  const a = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
  const b = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----";
  const k = "-----BEGIN PRIVATE KEY-----\nKKKK\n-----END PRIVATE KEY-----";

  test("pemBlocks: every block or only one type, each ending with one newline", () => {
    const text = `junk\n${b}   \n${k}\n\n${a}\n`;
    expect(pemBlocks(text)).toEqual([`${b}\n`, `${k}\n`, `${a}\n`]);
    expect(pemBlocks(text, "CERTIFICATE")).toEqual([`${b}\n`, `${a}\n`]);
    expect(pemBlocks(text, "PRIVATE KEY")).toEqual([`${k}\n`]);
    expect(pemBlocks("-----BEGIN CERTIFICATE-----\nX\n-----END PRIVATE KEY-----")).toEqual([]);
  });

  test("joinPem adds a newline only where one is missing", () => {
    expect(joinPem([a, `${b}\n`])).toBe(`${a}\n${b}\n`);
    expect(joinPem([])).toBe("");
  });

  test("mergeRoots: deduplicated across bundles, trimmed, sorted", () => {
    expect(mergeRoots([`${b}\n`, a], [`  ${a}\n\n`])).toEqual([`${a}\n`, `${b}\n`]);
  });

  test("validCerts drops and counts blocks that do not parse", () => {
    expect(validCerts(`${a}\n${b}\n`)).toEqual({ certs: [], invalid: 2 });
  });

  test("a certificate that does not parse is a bad-response CaError naming what it was", () => {
    let err: unknown;
    try {
      certInfo(a, "certificate from istiod CA");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CaError);
    expect((err as CaError).kind).toBe("bad-response");
    expect((err as CaError).message.startsWith("certificate from istiod CA: not a valid PEM certificate (")).toBe(true);
  });

  test("a key that does not parse matches nothing", () => {
    expect(keyMatchesCert(k, a)).toBe(false);
  });

  test("certInfo reads dates and URI SANs only (openssl-made certificate); its key matches", () => {
    const info = certInfo(CERT);
    expect(info.notBefore).toBe(Date.parse("2026-11-24T06:05:44Z"));
    expect(info.notAfter).toBe(Date.parse("2036-11-21T06:05:44Z"));
    expect(info.uris).toEqual(["spiffe://cluster.local/ns/default/sa/app"]);
    expect(keyMatchesCert(KEY, CERT)).toBe(true);
    expect(validCerts(CERT + a)).toEqual({ certs: [CERT], invalid: 1 });
  });
});

// `openssl req -x509 ... -subj /O=test2 -addext subjectAltName=DNS:a.example,URI:spiffe://td/ns/a/sa/b,URI:spiffe://td/ns/c/sa/d`
const CERT2 = `-----BEGIN CERTIFICATE-----
MIIBvDCCAWGgAwIBAgIUFdTjYOR5+n7QjiNFcNNg/3/QbUIwCgYIKoZIzj0EAwIw
EDEOMAwGA1UECgwFdGVzdDIwHhcNMjYxMTI0MDYxMDQ4WhcNMzYxMTIxMDYxMDQ4
WjAQMQ4wDAYDVQQKDAV0ZXN0MjBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABNbf
fyzK/L+SifrNxvPi3UhZKdKCyqj46ve1XwZcF1ZNslGNaaRqMHJ+heM2ZbtML0zK
ULpd3RtzYWQbaTN6CQijgZgwgZUwHQYDVR0OBBYEFNEmyT9JeFvMir8WO5rTPW3D
+fx/MB8GA1UdIwQYMBaAFNEmyT9JeFvMir8WO5rTPW3D+fx/MA8GA1UdEwEB/wQF
MAMBAf8wQgYDVR0RBDswOYIJYS5leGFtcGxlhhVzcGlmZmU6Ly90ZC9ucy9hL3Nh
L2KGFXNwaWZmZTovL3RkL25zL2Mvc2EvZDAKBggqhkjOPQQDAgNJADBGAiEAnlDj
sXjRNi1xZuWoKFDftjIoPH9/j0e2ysw1IZSIB2ICIQDJiIPilExN2vv/MdG2sgae
tLZotC9TQHaSxKZ4tBte8g==
-----END CERTIFICATE-----
`;

describe("PEM helpers: more", () => {
  test("URI SANs after another kind of name are all read", () => {
    expect(certInfo(CERT2).uris).toEqual(["spiffe://td/ns/a/sa/b", "spiffe://td/ns/c/sa/d"]);
  });

  test("an unparseable certificate with no description is called a certificate", () => {
    expect(() => certInfo("garbage")).toThrow(/^certificate: not a valid PEM certificate \(/);
  });
});

describe("lazySigner", () => {
  const noClose =
    (counter: { builds: number }): (() => Promise<CertificateSigner>) =>
    async () => (counter.builds++, { name: "inner", sign: async () => ["leaf", "root"] });

  test("prepare() alone starts the build, once", async () => {
    const c = { builds: 0 };
    const s = lazySigner("local", noClose(c));
    s.prepare!();
    s.prepare!();
    expect(c.builds).toBe(1);
    expect(await s.sign("csr", 60)).toEqual(["leaf", "root"]);
    expect(c.builds).toBe(1);
  });

  test("a built signer without close() is fine to close, before or after the build finished", async () => {
    const early = lazySigner("local", noClose({ builds: 0 }));
    const pending = early.sign("csr", 60);
    early.close!();
    expect(await pending).toEqual(["leaf", "root"]);
    const late = lazySigner("local", noClose({ builds: 0 }));
    await late.sign("csr", 60);
    expect(() => late.close!()).not.toThrow();
  });
});
