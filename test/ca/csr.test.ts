// The hand-written PKCS#10 CSR (src/ca/csr.ts) judged by independent tools: openssl verifies its
// signature and prints its fields; `openssl asn1parse` reads its DER element by element against
// the structure Istio's Go code writes (literals below); @peculiar/x509, which built the CSR until
// 2026-11-27, builds one from the same key and must read the same in openssl (for RSA, whose
// PKCS#1 v1.5 signature is deterministic, byte for byte).

import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { generateKeyAndCsr, type KeyOptions } from "../../src/ca/keygen.ts";
import { buildCsr } from "../../src/ca/csr.ts";
import { CaError } from "../../src/ca/errors.ts";
import { loadX509 } from "../support/x509.ts";
import { csrText, OPENSSL } from "./openssl.ts";
import { describeRequiring } from "../support/requires.ts";

const SPIFFE = "spiffe://cluster.local/ns/bookinfo/sa/reviews";
/** The subjectAltName extension's value for SPIFFE: SEQUENCE { [6] "spiffe://…" } (as Go and the library wrote it). */
const SAN_HEX = "302F862D7370696666653A2F2F636C75737465722E6C6F63616C2F6E732F626F6F6B696E666F2F73612F72657669657773";

function openssl(args: string[], input: string | Uint8Array): { code: number; out: string } {
  const r = spawnSync("openssl", args, { input, encoding: "utf8" });
  return { code: r.status ?? -1, out: (r.stdout ?? "") + (r.stderr ?? "") };
}

interface Element {
  offset: number;
  depth: number;
  headerLength: number;
  length: number;
  /** "prim OBJECT :organizationName", "cons SEQUENCE", … */
  what: string;
}

/** `openssl asn1parse -i` of `input` (PEM, or DER with -inform DER), one element a line. */
function asn1parse(input: string | Uint8Array, extra: string[] = []): Element[] {
  const args = ["asn1parse", "-i", ...(typeof input === "string" ? [] : ["-inform", "DER"]), ...extra];
  const r = openssl(args, input);
  if (r.code !== 0) throw new Error(`openssl asn1parse failed: ${r.out}`);
  return r.out
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const m = /^\s*(\d+):d=(\d+)\s+hl=(\d+)\s+l=\s*(\d+)\s+(prim|cons):\s*(.*?)\s*$/.exec(l);
      if (!m) throw new Error(`unexpected asn1parse line: ${l}`);
      return { offset: +m[1]!, depth: +m[2]!, headerLength: +m[3]!, length: +m[4]!, what: `${m[5]} ${m[6]!.replace(/\s+/g, " ")}` };
    });
}

const der = (pem: string): Buffer => Buffer.from(pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, ""), "base64");

/** Istio's CSR, element by element: what differs per key is the key's algorithm and the signature's. */
function expectedStructure(keyAlgorithm: string[], signatureAlgorithm: string[]): string[] {
  return [
    "0 cons SEQUENCE", // CertificationRequest
    "1 cons SEQUENCE", //  CertificationRequestInfo
    "2 prim INTEGER :00", //   version 0
    "2 cons SEQUENCE", //   subject: O=""
    "3 cons SET",
    "4 cons SEQUENCE",
    "5 prim OBJECT :organizationName",
    "5 prim PRINTABLESTRING :",
    "2 cons SEQUENCE", //   SubjectPublicKeyInfo
    "3 cons SEQUENCE",
    ...keyAlgorithm.map((a) => `4 prim ${a}`),
    "3 prim BIT STRING",
    "2 cons cont [ 0 ]", //   attributes
    "3 cons SEQUENCE",
    "4 prim OBJECT :Extension Request",
    "4 cons SET",
    "5 cons SEQUENCE",
    "6 cons SEQUENCE",
    "7 prim OBJECT :X509v3 Subject Alternative Name",
    "7 prim BOOLEAN :255", //     critical
    `7 prim OCTET STRING [HEX DUMP]:${SAN_HEX}`,
    "1 cons SEQUENCE", //  signatureAlgorithm
    ...signatureAlgorithm.map((a) => `2 prim ${a}`),
    "1 prim BIT STRING", //  signature
  ];
}

const RSA = (bits: number): KeyOptions => ({ algorithm: "RSA", rsaKeySize: bits, curve: "P256", pkcs8: false });
const EC = (curve: "P256" | "P384", pkcs8 = false): KeyOptions => ({ algorithm: "ECDSA", rsaKeySize: 2048, curve, pkcs8 });

const cases: {
  label: string;
  opts: KeyOptions;
  text: string[];
  keyAlgorithm: string[];
  signatureAlgorithm: string[];
  /** ECDSA: the byte size of the curve's order, the upper bound of r's and s's length. */
  ecdsaScalar?: number;
}[] = [
  {
    label: "RSA-2048",
    opts: RSA(2048),
    text: ["Public Key Algorithm: rsaEncryption", "Public-Key: (2048 bit)", "Exponent: 65537 (0x10001)", "Signature Algorithm: sha256WithRSAEncryption"],
    keyAlgorithm: ["OBJECT :rsaEncryption", "NULL"],
    signatureAlgorithm: ["OBJECT :sha256WithRSAEncryption", "NULL"],
  },
  {
    label: "RSA-4096 (WORKLOAD_RSA_KEY_SIZE=4096), PKCS#8 key",
    opts: { ...RSA(4096), pkcs8: true },
    text: ["Public Key Algorithm: rsaEncryption", "Public-Key: (4096 bit)", "Signature Algorithm: sha256WithRSAEncryption"],
    keyAlgorithm: ["OBJECT :rsaEncryption", "NULL"],
    signatureAlgorithm: ["OBJECT :sha256WithRSAEncryption", "NULL"],
  },
  {
    label: "ECDSA P-256",
    opts: EC("P256"),
    text: ["Public Key Algorithm: id-ecPublicKey", "Public-Key: (256 bit)", "ASN1 OID: prime256v1", "Signature Algorithm: ecdsa-with-SHA256"],
    keyAlgorithm: ["OBJECT :id-ecPublicKey", "OBJECT :prime256v1"],
    signatureAlgorithm: ["OBJECT :ecdsa-with-SHA256"],
    ecdsaScalar: 32,
  },
  {
    label: "ECDSA P-384, PKCS#8 key",
    opts: EC("P384", true),
    text: ["Public Key Algorithm: id-ecPublicKey", "Public-Key: (384 bit)", "ASN1 OID: secp384r1", "Signature Algorithm: ecdsa-with-SHA384"],
    keyAlgorithm: ["OBJECT :id-ecPublicKey", "OBJECT :secp384r1"],
    signatureAlgorithm: ["OBJECT :ecdsa-with-SHA384"],
    ecdsaScalar: 48,
  },
];

describeRequiring(OPENSSL, "the CSR, read by openssl", () => {
  test.each(cases)(
    "$label: the signature verifies; SAN URI (critical), key and signature algorithm as Istio's",
    async ({ opts, text }) => {
      const { csrPem } = await generateKeyAndCsr(opts, SPIFFE);
      expect(csrPem).toMatch(/^-----BEGIN CERTIFICATE REQUEST-----\n([A-Za-z0-9+/=]{64}\n)*[A-Za-z0-9+/=]{1,64}\n-----END CERTIFICATE REQUEST-----\n$/);
      const r = csrText(csrPem);
      expect(r.out).toContain("Certificate request self-signature verify OK");
      expect(r.ok).toBe(true);
      expect(r.out).toContain("Version: 1 (0x0)");
      expect(r.out).toMatch(/Subject: O = \n/);
      expect(r.out).toMatch(/X509v3 Subject Alternative Name: critical\n\s+URI:spiffe:\/\/cluster\.local\/ns\/bookinfo\/sa\/reviews\n/);
      for (const line of text) expect(r.out).toContain(line);
    },
    30_000,
  );

  test.each(cases)(
    "$label: DER element by element as openssl asn1parse reads it",
    async ({ opts, keyAlgorithm, signatureAlgorithm, ecdsaScalar }) => {
      const { csrPem } = await generateKeyAndCsr(opts, SPIFFE);
      const bytes = der(csrPem);
      const elements = asn1parse(csrPem);
      expect(elements.map((e) => `${e.depth} ${e.what}`)).toEqual(expectedStructure(keyAlgorithm, signatureAlgorithm));
      // One element, nothing after it; each element inside its parent (asn1parse would fail otherwise).
      expect(elements[0]!.headerLength + elements[0]!.length).toBe(bytes.length);
      // The SAN value: SEQUENCE { [6] IMPLICIT IA5String } (GeneralName's uniformResourceIdentifier).
      const san = elements.find((e) => e.what.startsWith("prim OCTET STRING"))!;
      expect(asn1parse(bytes, ["-strparse", String(san.offset)]).map((e) => `${e.depth} ${e.what}`)).toEqual(["0 cons SEQUENCE", "1 prim cont [ 6 ]"]);
      // The signature BIT STRING: no unused bits; for ECDSA an Ecdsa-Sig-Value of two positive INTEGERs.
      const sig = elements.at(-1)!;
      expect(bytes[sig.offset + sig.headerLength]).toBe(0);
      if (ecdsaScalar === undefined) {
        expect(sig.length - 1).toBe(opts.rsaKeySize / 8);
        return;
      }
      const value = asn1parse(bytes, ["-strparse", String(sig.offset)]);
      expect(value.map((e) => `${e.depth} ${e.what.replace(/:[0-9A-F]+$/, "")}`)).toEqual(["0 cons SEQUENCE", "1 prim INTEGER ", "1 prim INTEGER "]);
      const inner = bytes.subarray(sig.offset + sig.headerLength + 1);
      for (const int of value.slice(1)) {
        expect(int.what).toMatch(/^prim INTEGER :[0-9A-F]+$/); // not negative: asn1parse would print "-"
        expect(int.length).toBeLessThanOrEqual(ecdsaScalar + 1);
        // Minimal (DER): a leading 0x00 only before a byte whose high bit is set.
        const first = inner[int.offset + int.headerLength]!;
        if (first === 0) expect(inner[int.offset + int.headerLength + 1]! & 0x80).toBe(0x80);
      }
    },
    30_000,
  );

  // The CSR @peculiar/x509 built before 2026-11-27 (keygen.ts's call, verbatim) from the same key pair.
  async function libraryCsr(keys: CryptoKeyPair, sign: { name: string; hash?: string }): Promise<string> {
    const x509 = await loadX509();
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: "O=",
      keys,
      signingAlgorithm: sign,
      extensions: [new x509.SubjectAlternativeNameExtension([{ type: "url", value: SPIFFE }], true)],
    });
    return csr.toString("pem") + "\n";
  }

  const keyPairs: [string, () => Promise<CryptoKeyPair>, { name: string; hash?: string }][] = [
    [
      "RSA-2048",
      () =>
        crypto.subtle.generateKey({ name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }, true, [
          "sign",
          "verify",
        ]) as Promise<CryptoKeyPair>,
      { name: "RSASSA-PKCS1-v1_5" },
    ],
    [
      "ECDSA P-256",
      () => crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"]) as Promise<CryptoKeyPair>,
      { name: "ECDSA", hash: "SHA-256" },
    ],
    [
      "ECDSA P-384",
      () => crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-384" }, true, ["sign", "verify"]) as Promise<CryptoKeyPair>,
      { name: "ECDSA", hash: "SHA-384" },
    ],
  ];

  test.each(keyPairs)(
    "%s: the same openssl -text as @peculiar/x509's CSR from the same key, apart from the signature bytes",
    async (label, generate, sign) => {
      const keys = await generate();
      const ours = await buildCsr(keys, SPIFFE);
      const theirs = await libraryCsr(keys, sign);
      const text = (pem: string) => csrText(pem).out.replace(/(Signature Value:\n)(\s+[0-9a-f:]+\n?)+/, "$1<signature>\n");
      expect(text(ours)).toContain("Certificate request self-signature verify OK");
      expect(text(ours)).toBe(text(theirs));
      if (label.startsWith("RSA"))
        expect(ours).toBe(theirs); // PKCS#1 v1.5 signs deterministically: the same bytes
      else {
        // Everything before the signature (CertificationRequestInfo and the algorithm) is the same DER.
        const [a, b] = [der(ours), der(theirs)];
        const sigAt = (bytes: Buffer) => asn1parse(bytes).at(-1)!.offset;
        expect(sigAt(a)).toBe(sigAt(b));
        expect(a.subarray(0, sigAt(a)).subarray(4).toString("hex")).toBe(b.subarray(0, sigAt(b)).subarray(4).toString("hex"));
      }
    },
    30_000,
  );
});

describe("keys and names the CSR cannot carry: an error naming what", () => {
  const ecdsa = () => crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"]) as Promise<CryptoKeyPair>;

  test("an RSA key bound to SHA-1", async () => {
    const keys = (await crypto.subtle.generateKey(
      { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-1" },
      true,
      ["sign", "verify"],
    )) as CryptoKeyPair;
    const e = await buildCsr(keys, SPIFFE).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CaError);
    expect((e as CaError).kind).toBe("keygen");
    expect((e as Error).message).toBe(
      "CSR: a RSASSA-PKCS1-v1_5 SHA-1 key cannot sign a certificate request (want RSASSA-PKCS1-v1_5 SHA-256, or ECDSA P-256 or P-384)",
    );
  }, 30_000);

  test("an ECDSA P-521 key", async () => {
    const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-521" }, true, ["sign", "verify"])) as CryptoKeyPair;
    await expect(buildCsr(keys, SPIFFE)).rejects.toThrow("CSR: a ECDSA P-521 key cannot sign a certificate request");
  });

  test('a "private" key WebCrypto will not sign with (the public key in its place)', async () => {
    const keys = await ecdsa();
    const e = await buildCsr({ publicKey: keys.publicKey, privateKey: keys.publicKey }, SPIFFE).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CaError);
    expect((e as CaError).kind).toBe("keygen");
    expect((e as Error).message).toStartWith("CSR: WebCrypto refused to sign with the ECDSA key: ");
  });

  test("a public key WebCrypto will not export", async () => {
    const keys = await ecdsa();
    const raw = await crypto.subtle.exportKey("raw", keys.publicKey);
    const sealed = await crypto.subtle.importKey("raw", raw, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
    const e = await buildCsr({ publicKey: sealed, privateKey: keys.privateKey }, SPIFFE).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CaError);
    expect((e as Error).message).toStartWith("CSR: WebCrypto refused to export the ECDSA key: ");
  });

  test("a SPIFFE URI with non-ASCII characters (an IA5String holds ASCII only, as Go's x509 refuses too)", async () => {
    const keys = await ecdsa();
    await expect(buildCsr(keys, "spiffe://cluster.local/ns/bücher/sa/default")).rejects.toThrow(
      'CSR: SAN URI "spiffe://cluster.local/ns/bücher/sa/default" has non-ASCII characters, which an IA5String cannot hold',
    );
  });
});
