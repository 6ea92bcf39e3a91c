// The local CA (CA_PROVIDER=local) writes certificates and reads requests by hand (src/ca/certwrite.ts,
// src/ca/pkcs10.ts). Judged by openssl: chains verify, fields print as Istio's CA writes them, the
// key id is RFC 5280's SHA-1 of the public key, roots made by openssl (RSA, EC, without a key id)
// load and sign; and requests that are not what they claim are refused, naming why.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalCa } from "../../src/ca/local.ts";
import { generateKeyAndCsr } from "../../src/ca/keygen.ts";
import { certPubkey, certText, keyPubkey, OPENSSL, verifyChain } from "./openssl.ts";
import { describeRequiring } from "../support/requires.ts";

const SPIFFE = "spiffe://cluster.local/ns/bookinfo/sa/reviews";
/** 2026-11-27T21:00:00Z: the CA's injected clock. */
const NOW = Date.UTC(2026, 10, 27, 21, 0, 0);

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "local-ca-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function openssl(args: string[], input?: string): string {
  const r = spawnSync("openssl", args, { input, encoding: "utf8", cwd: dir });
  if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

/** A line of `openssl x509 -text` after `heading`. */
const after = (text: string, heading: string) => text.split("\n")[text.split("\n").findIndex((l) => l.includes(heading)) + 1]?.trim();

/** SHA-1 of the subjectPublicKey bits, from openssl's DER of the certificate's public key. */
function rfc5280KeyId(certPem: string, keyBytes: number): string {
  const der = spawnSync("openssl", ["pkey", "-pubin", "-outform", "DER"], { input: certPubkey(certPem) }).stdout as Buffer;
  return createHash("sha1")
    .update(der.subarray(der.length - keyBytes))
    .digest("hex")
    .toUpperCase()
    .match(/../g)!
    .join(":");
}

describeRequiring(OPENSSL, "the local CA's certificates, judged by openssl", () => {
  test("generated root: self-signed, O=<trust domain>, CA:TRUE and Certificate Sign, CRL Sign (both critical), the key id of its key, 10 years", async () => {
    const ca = await LocalCa.generate({ trustDomain: "mesh.example", now: () => NOW });
    const text = certText(ca.rootPem);
    expect(text).toContain("Issuer: O = mesh.example");
    expect(text).toContain("Subject: O = mesh.example");
    expect(text).toContain("Signature Algorithm: ecdsa-with-SHA256");
    expect(text).toContain("NIST CURVE: P-256");
    expect(text).toContain("X509v3 Basic Constraints: critical");
    expect(after(text, "X509v3 Basic Constraints")).toBe("CA:TRUE");
    expect(after(text, "X509v3 Key Usage: critical")).toBe("Certificate Sign, CRL Sign");
    expect(after(text, "X509v3 Subject Key Identifier")).toBe(rfc5280KeyId(ca.rootPem, 65));
    expect(text).toContain("Not Before: Nov 27 20:59:00 2026 GMT");
    expect(text).toContain("Not After : Nov 24 21:00:00 2036 GMT");
    expect(verifyChain(ca.rootPem, ca.rootPem, NOW).ok).toBe(true);
    // The name is a PrintableString, as Go's crypto/x509 writes a printable organization.
    expect(openssl(["asn1parse"], ca.rootPem)).toContain("PRINTABLESTRING   :mesh.example");
  });

  for (const [label, opts] of [
    ["ECDSA P-256", { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }],
    ["RSA 2048", { algorithm: "RSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }],
  ] as const) {
    test(`a workload's ${label} CSR: the leaf chains to the root, carries the CSR's key, an empty subject, the SPIFFE URI as a critical SAN, Istio's usages, the root's key id, the TTL asked`, async () => {
      const ca = await LocalCa.generate({ now: () => NOW });
      const { keyPem, csrPem } = await generateKeyAndCsr(opts, SPIFFE);
      const [leaf, root] = await ca.sign(csrPem, 3600);
      expect(root).toBe(ca.rootPem);
      const v = verifyChain(leaf!, ca.rootPem, NOW + 60_000); // at the CA's clock: the leaf lives an hour from NOW
      expect(v.out).toContain(": OK");
      expect(certPubkey(leaf!)).toBe(keyPubkey(keyPem));
      const text = certText(leaf!);
      expect(text).toMatch(/Subject: *\n/);
      expect(text).toContain("Issuer: O = cluster.local");
      expect(text).toContain("X509v3 Subject Alternative Name: critical");
      expect(after(text, "X509v3 Subject Alternative Name")).toBe(`URI:${SPIFFE}`);
      expect(after(text, "X509v3 Key Usage: critical")).toBe("Digital Signature, Key Encipherment");
      expect(after(text, "X509v3 Extended Key Usage")).toBe("TLS Web Server Authentication, TLS Web Client Authentication");
      expect(text).toContain("X509v3 Basic Constraints: critical");
      expect(after(text, "X509v3 Basic Constraints")).toBe("CA:FALSE");
      expect(after(text, "X509v3 Authority Key Identifier")).toBe(after(certText(ca.rootPem), "X509v3 Subject Key Identifier"));
      expect(text).toContain("Not Before: Nov 27 20:59:00 2026 GMT");
      expect(text).toContain("Not After : Nov 27 22:00:00 2026 GMT");
      // A positive serial of at most 16 bytes.
      const serial = after(text, "Serial Number")!.replace(/:/g, "");
      expect(serial).toMatch(/^[0-7][0-9a-f]{31}$|^[0-9a-f]{1,31}$/);
    });
  }

  test("roots made by openssl load from PEM: RSA (PKCS#1 key, no key id: computed), EC (SEC1 key); leaves chain; a TTL past the root's expiry is cut to it", async () => {
    // An RSA root with only basicConstraints: no subjectKeyIdentifier, so the leaf's AKI is computed.
    openssl(["genrsa", "-traditional", "-out", "rsa-root.key", "2048"]);
    writeFileSync(
      join(dir, "ca.ext"),
      "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\nsubjectKeyIdentifier=none\nauthorityKeyIdentifier=none\n",
    );
    openssl(["req", "-new", "-key", "rsa-root.key", "-subj", "/O=Example Org", "-out", "rsa-root.csr"]);
    openssl(["x509", "-req", "-in", "rsa-root.csr", "-signkey", "rsa-root.key", "-days", "1", "-extfile", "ca.ext", "-out", "rsa-root.pem"]);
    const rsaRoot = readFileSync(join(dir, "rsa-root.pem"), "utf8");
    expect(certText(rsaRoot)).not.toContain("Subject Key Identifier");
    expect(readFileSync(join(dir, "rsa-root.key"), "utf8")).toContain("BEGIN RSA PRIVATE KEY");
    const rsaCa = await LocalCa.fromPem({ certPem: rsaRoot, keyPem: readFileSync(join(dir, "rsa-root.key"), "utf8") });
    const { csrPem } = await generateKeyAndCsr({ algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, SPIFFE);
    const [leaf] = await rsaCa.sign(csrPem, 10 * 86_400);
    expect(verifyChain(leaf!, rsaRoot).out).toContain(": OK");
    const text = certText(leaf!);
    expect(text).toContain("Signature Algorithm: sha256WithRSAEncryption");
    expect(text).toContain("Issuer: O = Example Org");
    expect(after(text, "X509v3 Authority Key Identifier")).toBe(rfc5280KeyId(rsaRoot, 270));
    // 10 days asked, the root ends within 1 day: the leaf ends with it.
    expect(text.match(/Not After : (.*)/)![1]).toBe(certText(rsaRoot).match(/Not After : (.*)/)![1]);

    openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ec-root.key"]);
    openssl(["req", "-x509", "-new", "-key", "ec-root.key", "-subj", "/O=cluster.local", "-days", "30", "-out", "ec-root.pem"]);
    expect(readFileSync(join(dir, "ec-root.key"), "utf8")).toContain("BEGIN EC PRIVATE KEY");
    const ecRoot = readFileSync(join(dir, "ec-root.pem"), "utf8");
    const ecCa = await LocalCa.fromPem({ certPem: ecRoot, keyPem: readFileSync(join(dir, "ec-root.key"), "utf8") });
    const [ecLeaf] = await ecCa.sign(csrPem, 3600);
    expect(verifyChain(ecLeaf!, ecRoot).out).toContain(": OK");
    expect(after(certText(ecLeaf!), "X509v3 Authority Key Identifier")).toBe(after(certText(ecRoot), "X509v3 Subject Key Identifier"));
  });

  test("a root whose key is not its own, or a certificate that is not a CA, is refused naming why", async () => {
    openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "other.key"]);
    openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "root2.key"]);
    openssl(["req", "-x509", "-new", "-key", "root2.key", "-subj", "/O=cluster.local", "-days", "30", "-out", "root2.pem"]);
    const root2 = readFileSync(join(dir, "root2.pem"), "utf8");
    await expect(LocalCa.fromPem({ certPem: root2, keyPem: readFileSync(join(dir, "other.key"), "utf8") })).rejects.toThrow(
      "root-key.pem is not the key of root-cert.pem",
    );
    writeFileSync(join(dir, "leaf.ext"), "basicConstraints=critical,CA:FALSE\n");
    openssl(["req", "-new", "-key", "other.key", "-subj", "/O=leaf", "-out", "leaf.csr"]);
    openssl(["x509", "-req", "-in", "leaf.csr", "-signkey", "other.key", "-days", "1", "-extfile", "leaf.ext", "-out", "leaf.pem"]);
    await expect(
      LocalCa.fromPem({ certPem: readFileSync(join(dir, "leaf.pem"), "utf8"), keyPem: readFileSync(join(dir, "other.key"), "utf8") }),
    ).rejects.toThrow("root-cert.pem is not a CA certificate");
  });

  test("requests: only the URIs of the SAN are copied (openssl's CSR with DNS and URI names); a forged signature, no URI, not PEM, truncated DER are refused naming why", async () => {
    const ca = await LocalCa.generate({ now: () => NOW });
    openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "w.key"]);
    openssl(["req", "-new", "-key", "w.key", "-subj", "/CN=ignored", "-addext", `subjectAltName=DNS:ignored.example,URI:${SPIFFE}`, "-out", "w.csr"]);
    const csr = readFileSync(join(dir, "w.csr"), "utf8");
    const [leaf] = await ca.sign(csr, 600);
    const text = certText(leaf!);
    expect(after(text, "X509v3 Subject Alternative Name")).toBe(`URI:${SPIFFE}`);
    expect(text).not.toContain("ignored");

    openssl(["req", "-new", "-key", "w.key", "-subj", "/CN=nouri", "-out", "nouri.csr"]);
    await expect(ca.sign(readFileSync(join(dir, "nouri.csr"), "utf8"), 600)).rejects.toThrow("CSR has no URI SAN");

    // Flip one bit of the signature (the last bytes of the DER).
    const der = Buffer.from(csr.replace(/-----[^-]+-----|\s/g, ""), "base64");
    der[der.length - 2]! ^= 0x01;
    const forged = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString("base64")}\n-----END CERTIFICATE REQUEST-----\n`;
    await expect(ca.sign(forged, 600)).rejects.toThrow(/CSR signature (does not verify|cannot be checked)/);
    // A different subject under the same signature.
    const tampered = Buffer.from(der);
    tampered[der.length - 2]! ^= 0x01;
    const at = tampered.indexOf(Buffer.from("ignored"));
    tampered[at]! ^= 0x20;
    await expect(ca.sign(`-----BEGIN CERTIFICATE REQUEST-----\n${tampered.toString("base64")}\n-----END CERTIFICATE REQUEST-----\n`, 600)).rejects.toThrow(
      "CSR signature does not verify",
    );

    await expect(ca.sign("not a csr", 600)).rejects.toThrow("CSR is not a valid PEM certificate request: no CERTIFICATE REQUEST block");
    const cut = `-----BEGIN CERTIFICATE REQUEST-----\n${der.subarray(0, 40).toString("base64")}\n-----END CERTIFICATE REQUEST-----\n`;
    await expect(ca.sign(cut, 600)).rejects.toThrow(/^CSR is not a valid PEM certificate request: CertificationRequest: .* run past the end/);
  });
});
