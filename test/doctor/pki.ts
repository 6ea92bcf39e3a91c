// Certificates made by the openssl CLI (independent of the agent's code): a mesh root CA, a server
// certificate it signs with chosen DNS SANs, an expired CA (openssl ca with explicit dates), and a
// self-signed leaf that is not a CA.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface KeyPair {
  cert: string;
  key: string;
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync("openssl", args, { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.stderr}`);
}

function inTemp<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), "doctor-pki-"));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

/** A self-signed CA (basicConstraints CA:TRUE), valid for 30 days. */
export function makeCa(org = "mesh root"): KeyPair {
  return inTemp((d) => {
    openssl(
      [
        "req",
        "-x509",
        ...EC,
        "-keyout",
        "k.pem",
        "-out",
        "c.pem",
        "-days",
        "30",
        "-subj",
        `/O=${org}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      ],
      d,
    );
    return { cert: readFileSync(join(d, "c.pem"), "utf8"), key: readFileSync(join(d, "k.pem"), "utf8") };
  });
}

/** A server certificate for `dnsNames` (and 127.0.0.1), signed by `ca`. */
export function makeServerCert(ca: KeyPair, dnsNames: string[]): KeyPair {
  return inTemp((d) => {
    writeFileSync(join(d, "ca.pem"), ca.cert);
    writeFileSync(join(d, "ca.key"), ca.key);
    const san = [...dnsNames.map((n) => `DNS:${n}`), "IP:127.0.0.1"].join(",");
    writeFileSync(join(d, "ext.cnf"), `subjectAltName=${san}\nbasicConstraints=CA:FALSE\n`);
    openssl(["req", "-new", ...EC, "-keyout", "k.pem", "-out", "r.csr", "-subj", "/O=istiod"], d);
    openssl(["x509", "-req", "-in", "r.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "c.pem", "-days", "10", "-extfile", "ext.cnf"], d);
    return { cert: readFileSync(join(d, "c.pem"), "utf8"), key: readFileSync(join(d, "k.pem"), "utf8") };
  });
}

/** A CA whose validity ended on 2020-01-02. */
export function makeExpiredCa(): string {
  return inTemp((d) => {
    writeFileSync(join(d, "index.txt"), "");
    writeFileSync(join(d, "serial"), "01\n");
    writeFileSync(
      join(d, "ca.cnf"),
      "[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\npolicy=p\nunique_subject=no\n[p]\nO=optional\n[v3ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n",
    );
    openssl(["req", "-new", ...EC, "-keyout", "k.pem", "-subj", "/O=expired root", "-out", "r.csr"], d);
    openssl(
      [
        "ca",
        "-batch",
        "-config",
        "ca.cnf",
        "-selfsign",
        "-keyfile",
        "k.pem",
        "-in",
        "r.csr",
        "-out",
        "c.pem",
        "-startdate",
        "20200101000000Z",
        "-enddate",
        "20200102000000Z",
        "-extensions",
        "v3ca",
        "-notext",
      ],
      d,
    );
    return readFileSync(join(d, "c.pem"), "utf8");
  });
}

/** A self-signed certificate with basicConstraints CA:FALSE (a leaf). */
export function makeLeafNotCa(): string {
  return inTemp((d) => {
    openssl(
      ["req", "-x509", ...EC, "-keyout", "k.pem", "-out", "c.pem", "-days", "30", "-subj", "/O=just a leaf", "-addext", "basicConstraints=critical,CA:FALSE"],
      d,
    );
    return readFileSync(join(d, "c.pem"), "utf8");
  });
}

/** An unsigned JWT (`alg: none`) with the given claims: the agent only reads them. */
export function jwt(claims: Record<string, unknown>): string {
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${b64({ alg: "RS256", typ: "JWT" })}.${b64(claims)}.c2lnbmF0dXJl`;
}
