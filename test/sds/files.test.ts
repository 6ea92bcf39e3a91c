// File-mounted certificates: file-cert / file-root resources, a Kubernetes `..data` symlink swap
// pushed to subscribers, a mismatched key refused with the file named, invalid roots tolerated.

import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalCa } from "../../src/ca/local.ts";
import { generateKeyAndCsr } from "../../src/ca/keygen.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { SecretCache } from "../../src/sds/cache.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { SecretMetrics } from "../../src/sds/metrics.ts";
import { until } from "./fake-clock.ts";

async function pair(ca: LocalCa): Promise<{ chain: string; key: string }> {
  const k = await generateKeyAndCsr({ algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, "spiffe://cluster.local/ns/f/sa/f");
  return { chain: (await ca.sign(k.csrPem, 3600)).join(""), key: k.keyPem };
}

let dir: string;
let cache: SecretCache;
const log = memoryLogger();
afterEach(() => {
  cache?.close();
  rmSync(dir, { recursive: true, force: true });
});

function newCache(workloadFiles?: { certChainPath: string; keyPath: string; rootCertPath: string }) {
  const registry = newRegistry();
  cache = new SecretCache(
    {
      keyOptions: { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false },
      spiffeId: "x",
      ttlSeconds: 60,
      rotation: { ratio: 0.5, jitter: 0 },
      debounceMs: 30,
      fileRetryMs: 200,
      ...(workloadFiles ? { workloadFiles } : {}),
    },
    { log: log.log, metrics: new SecretMetrics(registry, systemClock), clock: systemClock },
  );
  const updates: string[] = [];
  cache.onUpdate((n) => updates.push(n));
  return { updates, registry };
}

describe("file-mounted certificates", () => {
  test("Kubernetes ..data swap is seen (twice) and pushed", async () => {
    dir = mkdtempSync(join(tmpdir(), "files-"));
    const ca = await LocalCa.generate();
    const mount = (name: string, p: { chain: string; key: string }) => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, "cert-chain.pem"), p.chain);
      writeFileSync(join(dir, name, "key.pem"), p.key);
      writeFileSync(join(dir, name, "root-cert.pem"), ca.rootPem);
    };
    mount("..2026_11_21_a", await pair(ca));
    symlinkSync("..2026_11_21_a", join(dir, "..data"));
    for (const f of ["cert-chain.pem", "key.pem", "root-cert.pem"]) symlinkSync(join("..data", f), join(dir, f));
    const { updates } = newCache();
    const name = `file-cert:${join(dir, "cert-chain.pem")}~${join(dir, "key.pem")}`;
    const v1 = await cache.get(name);
    for (const [i, stamp] of ["b", "c"].entries()) {
      const p = await pair(ca);
      mount(`..2026_11_21_${stamp}`, p);
      symlinkSync(`..2026_11_21_${stamp}`, join(dir, "..data_tmp"));
      renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
      await until(() => updates.filter((u) => u === name).length === i + 1, `push after swap ${stamp}`);
      const now = await cache.get(name);
      expect(now.certificateChain).toBe(p.chain);
      expect(now.version).not.toBe(v1.version);
    }
    const root = await cache.get(`file-root:${join(dir, "root-cert.pem")}`);
    expect(root.rootCert).toBe(ca.rootPem);
  });

  test("default and ROOTCA from mounted files; key that does not match is refused naming the file", async () => {
    dir = mkdtempSync(join(tmpdir(), "files-"));
    const ca = await LocalCa.generate();
    const a = await pair(ca);
    const b = await pair(ca);
    writeFileSync(join(dir, "cert-chain.pem"), a.chain);
    writeFileSync(join(dir, "key.pem"), a.key);
    writeFileSync(join(dir, "root-cert.pem"), "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n" + ca.rootPem);
    newCache({ certChainPath: join(dir, "cert-chain.pem"), keyPath: join(dir, "key.pem"), rootCertPath: join(dir, "root-cert.pem") });
    expect((await cache.get("default")).certificateChain).toBe(a.chain);
    expect((await cache.get("ROOTCA")).rootCert).toBe(ca.rootPem); // invalid block dropped
    writeFileSync(join(dir, "bad-key.pem"), b.key);
    const err = await cache.get(`file-cert:${join(dir, "cert-chain.pem")}~${join(dir, "bad-key.pem")}`).catch((e) => e);
    expect(err.message).toContain("does not match");
    expect(err.message).toContain("bad-key.pem");
  });

  test("file-root:system serves the OS bundle; a missing file is named", async () => {
    dir = mkdtempSync(join(tmpdir(), "files-"));
    newCache();
    const sys = await cache.get("file-root:system").catch((e) => e);
    if (sys instanceof Error) expect(sys.message).toContain("no OS trust bundle");
    else expect(sys.rootCert).toContain("BEGIN CERTIFICATE");
    const missing = await cache.get(`file-root:${join(dir, "none.pem")}`).catch((e) => e);
    expect(missing.message).toContain(join(dir, "none.pem"));
  });

  test("file-root naming /dev/zero, a FIFO or a huge file is refused at once, naming the file and the limit", async () => {
    dir = mkdtempSync(join(tmpdir(), "files-"));
    newCache();
    const fifo = join(dir, "pipe.pem");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const huge = join(dir, "huge.pem");
    writeFileSync(huge, "");
    truncateSync(huge, 10 * 1024 ** 3);
    const t0 = performance.now();
    const [zero, pipe, big] = await Promise.all([`file-root:/dev/zero`, `file-root:${fifo}`, `file-root:${huge}`].map((n) => cache.get(n).catch((e) => e)));
    expect(zero.message).toContain("/dev/zero: is a character device, not a regular file");
    expect(pipe.message).toContain(`${fifo}: is a FIFO, not a regular file`);
    expect(big.message).toContain(`${huge}: larger than the 4 MiB limit`);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});
