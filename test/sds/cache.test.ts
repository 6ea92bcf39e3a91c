// The secret cache with an injected clock: rotation time and jitter, CA down during renewal, a
// token missing then fixed, root change, OUTPUT_CERTS writes (atomic, modes, only on change,
// unwritable directory), PCDS trust bundle merge.

import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LocalCa } from "../../src/ca/local.ts";
import { OutputCertsWriter } from "../../src/sds/output.ts";
import { until } from "./fake-clock.ts";
import { rig, type Rig } from "./helpers.ts";

let r: Rig;
afterEach(async () => {
  await r?.close();
  rmSync(r.dir, { recursive: true, force: true });
});

const HOUR = 3_600_000;

describe("SecretCache rotation", () => {
  test("issues once, reuses the cached certificate, rotates at expiry − r·lifetime with jitter", async () => {
    r = await rig();
    const a = await r.cache.get("default");
    const b = await r.cache.get("default");
    expect(b).toBe(a);
    expect(r.ca.requests.length).toBe(1);
    // random 0.5: sign +, r = 0.5 + 0.5·0.01 = 0.505 of a one-hour certificate
    const lifetime = a.expireMs - a.createdMs;
    expect(r.clock.nextAt()! - a.createdMs).toBeCloseTo(lifetime * (1 - 0.505), -1);
    r.clock.advance(r.clock.nextAt()! - r.clock.now() - 1000);
    expect(r.ca.requests.length).toBe(1);
    r.clock.advance(1000);
    await until(() => r.updates.includes("default"), "rotation push");
    expect(r.ca.requests.length).toBe(2);
    const c = await r.cache.get("default");
    expect(c.version).not.toBe(a.version);
    expect(c.privateKey).not.toBe(a.privateKey);
  });

  test("jitter spreads rotation: different random draws give different times within ±jitter", async () => {
    const times: number[] = [];
    for (const rnd of [0.1, 0.9]) {
      r = await rig({ rotation: { ratio: 0.5, jitter: 0.2 } }, () => rnd);
      const a = await r.cache.get("default");
      times.push((r.clock.nextAt()! - a.createdMs) / (a.expireMs - a.createdMs));
      await r.close();
      rmSync(r.dir, { recursive: true, force: true });
    }
    expect(times[0]).toBeCloseTo(1 - (0.5 - 0.1 * 0.2), 2);
    expect(times[1]).toBeCloseTo(1 - (0.5 + 0.9 * 0.2), 2);
    r = await rig();
  });

  test("CA down during renewal: the valid certificate stays in service, backoff, recovery", async () => {
    r = await rig();
    const a = await r.cache.get("default");
    r.ca.mode = "fail";
    r.clock.advance(r.clock.nextAt()! - r.clock.now());
    await until(() => r.log.lines.some((l) => l.includes("renewing the workload certificate failed (attempt 1)")), "first failure");
    expect(await r.cache.get("default")).toBe(a);
    expect(r.readiness.isReady()).toBe(true); // not close to expiry yet
    const first = r.clock.nextAt()! - r.clock.now();
    expect(first).toBeGreaterThanOrEqual(900);
    expect(first).toBeLessThanOrEqual(1100);
    r.clock.advance(first);
    await until(() => r.log.lines.some((l) => l.includes("(attempt 2)")), "second failure");
    expect(r.clock.nextAt()! - r.clock.now()).toBeGreaterThanOrEqual(1800);
    // close to expiry: readiness names the trouble as a warning, and stays ready (as Istio)
    r.clock.advance(a.expireMs - r.clock.now() - 0.05 * HOUR - 5000);
    await until(() => r.readiness.warnings().length > 0, "renewal warning");
    expect(r.readiness.isReady()).toBe(true);
    expect(r.readiness.describe()).toContain("certificate renewal");
    expect(r.readiness.describe()).toContain("UNAVAILABLE");
    const metrics = await r.registry.metrics();
    expect(metrics).toMatch(/istio_agent_num_failed_outgoing_requests\{request_type="csr"\} [1-9]/);
    expect(metrics).toMatch(/istio_agent_cert_expiry_seconds\{resource_name="default"\} \d+/);
    r.ca.mode = "ok";
    r.clock.advance(r.clock.nextAt()! - r.clock.now());
    await until(() => r.updates.includes("default"), "renewed");
    expect(r.readiness.warnings()).toEqual([]);
    expect((await r.cache.get("default")).version).not.toBe(a.version);
  });

  test("token missing, then expired, then fixed", async () => {
    r = await rig();
    rmSync(join(r.dir, "token"));
    await expect(r.cache.get("default").catch((e) => e.message)).resolves.toContain("no token at");
    writeFileSync(join(r.dir, "token"), "expired");
    await expect(r.cache.get("default").catch((e) => e.message)).resolves.toContain("rejected the token");
    writeFileSync(join(r.dir, "token"), "tok");
    expect((await r.cache.get("default")).certificateChain).toContain("BEGIN CERTIFICATE");
  });

  test("a new root from the CA pushes ROOTCA", async () => {
    r = await rig();
    await r.cache.get("default");
    const root1 = (await r.cache.get("ROOTCA")).rootCert;
    expect(root1).toBe(r.ca.caRootPem);
    r.ca.signer = await LocalCa.generate({ now: () => r.clock.now() });
    r.clock.advance(r.clock.nextAt()! - r.clock.now());
    await until(() => r.updates.includes("ROOTCA"), "ROOTCA push");
    expect((await r.cache.get("ROOTCA")).rootCert).toBe(r.ca.caRootPem);
    expect(r.updates).toContain("default");
  });

  test("PCDS trust bundle is merged into ROOTCA, pushed, and re-issues default", async () => {
    r = await rig();
    await r.cache.get("ROOTCA");
    const extra = (await LocalCa.generate()).rootPem;
    r.cache.updateTrustBundle([extra]);
    await until(() => r.updates.includes("ROOTCA") && r.updates.includes("default"), "bundle push");
    const root = (await r.cache.get("ROOTCA")).rootCert!;
    expect(root).toContain(extra.trim());
    expect(root).toContain(r.ca.caRootPem.trim());
    const requests = r.ca.requests.length;
    r.updates.length = 0;
    r.cache.updateTrustBundle([extra]); // same bundle: nothing to do
    // sentinel: a real change after it, pushed (ROOTCA and a re-issued default) once it is handled
    const extra2 = (await LocalCa.generate()).rootPem;
    r.cache.updateTrustBundle([extra, extra2]);
    await until(() => r.updates.includes("ROOTCA") && r.updates.includes("default"), "second bundle push");
    expect(r.log.lines.filter((l) => l.includes("trust bundle updated")).map((l) => l.split("\t").slice(2).join("\t"))).toEqual([
      "trust bundle updated from ProxyConfig: 1 certificate(s)",
      "trust bundle updated from ProxyConfig: 2 certificate(s)",
    ]);
    expect(r.updates.sort()).toEqual(["ROOTCA", "default"]);
    expect(r.ca.requests.length).toBe(requests + 1);
  });
});

describe("OUTPUT_CERTS", () => {
  test("writes key, chain and root atomically with 0600, only when changed", async () => {
    r = await rig();
    const out = join(r.dir, "out");
    (r.cache.opts as { output?: OutputCertsWriter }).output = new OutputCertsWriter(out, 0o600);
    const item = await r.cache.get("default");
    await until(() => existsSync(join(out, "root-cert.pem")), "output files");
    expect(readFileSync(join(out, "key.pem"), "utf8")).toBe(item.privateKey!);
    expect(readFileSync(join(out, "cert-chain.pem"), "utf8")).toBe(item.certificateChain!);
    expect(readFileSync(join(out, "root-cert.pem"), "utf8")).toBe(r.ca.caRootPem);
    for (const f of ["key.pem", "cert-chain.pem", "root-cert.pem"]) expect(statSync(join(out, f)).mode & 0o777).toBe(0o600);
    const w = new OutputCertsWriter(out, 0o644);
    expect(await w.write({ key: item.privateKey!, chain: item.certificateChain!, root: r.ca.caRootPem })).toEqual([]);
    expect(await w.write({ root: "changed\n" })).toEqual(["root-cert.pem"]);
    expect(statSync(join(out, "root-cert.pem")).mode & 0o777).toBe(0o644);
  });

  test("an unwritable OUTPUT_CERTS directory is logged and SDS keeps serving", async () => {
    r = await rig();
    const out = join(r.dir, "ro");
    mkdirSync(out);
    writeFileSync(join(out, "key.pem"), "old");
    chmodSync(out, 0o500);
    const isRoot = process.getuid?.() === 0;
    const target = isRoot ? join(r.dir, "file-not-dir") : out;
    if (isRoot) writeFileSync(target, "a file where a directory should be");
    (r.cache.opts as { output?: OutputCertsWriter }).output = new OutputCertsWriter(target, 0o600);
    const item = await r.cache.get("default");
    expect(item.privateKey).toContain("PRIVATE KEY");
    expect(r.log.lines.some((l) => l.includes("OUTPUT_CERTS: writing") && l.includes("SDS keeps serving"))).toBe(true);
    expect(r.log.lines.some((l) => l.includes(item.privateKey!.split("\n")[1]!))).toBe(false);
    chmodSync(out, 0o700);
  });
});
