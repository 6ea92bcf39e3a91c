// Independent verification with the openssl CLI: chain to root, key/cert pair, SAN.

import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Requirements } from "../support/requires.ts";

/** What the openssl-checked tests need (test/support/requires.ts). */
export const OPENSSL: Requirements = { tools: ["openssl"], apt: ["openssl"] };

function run(args: string[], input?: string): { code: number; out: string } {
  const r = spawnSync("openssl", args, { input, encoding: "utf8" });
  return { code: r.status ?? -1, out: (r.stdout ?? "") + (r.stderr ?? "") };
}

/** Verify `chainPem` (leaf first, root last) to `rootPem`, now or at `atMs`; returns openssl's output. */
export function verifyChain(chainPem: string, rootPem: string, atMs?: number): { ok: boolean; out: string } {
  const dir = mkdtempSync(join(tmpdir(), "ossl-"));
  try {
    writeFileSync(join(dir, "root.pem"), rootPem);
    writeFileSync(join(dir, "chain.pem"), chainPem);
    const at = atMs === undefined ? [] : ["-attime", String(Math.floor(atMs / 1000))];
    const r = run(["verify", ...at, "-CAfile", join(dir, "root.pem"), join(dir, "chain.pem")]);
    return { ok: r.code === 0 && /: OK/.test(r.out), out: r.out };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Public key of a certificate and of a private key, as PEM, to compare. */
export function certPubkey(certPem: string): string {
  return run(["x509", "-noout", "-pubkey"], certPem).out;
}

export function keyPubkey(keyPem: string): string {
  return run(["pkey", "-pubout"], keyPem).out;
}

export function certText(certPem: string): string {
  return run(["x509", "-noout", "-text"], certPem).out;
}

export function csrText(csrPem: string): { ok: boolean; out: string } {
  const r = run(["req", "-noout", "-text", "-verify"], csrPem);
  return { ok: r.code === 0, out: r.out };
}

/** The CSR as DER (openssl's conversion), in hex. */
export function csrDerHex(csrPem: string): string {
  const r = spawnSync("openssl", ["req", "-outform", "DER"], { input: csrPem });
  return Buffer.from(r.stdout ?? "").toString("hex");
}

/** The CSR's subject as openssl prints it (`req -noout -subject`). */
export function csrSubject(csrPem: string): string {
  return run(["req", "-noout", "-subject"], csrPem).out;
}
