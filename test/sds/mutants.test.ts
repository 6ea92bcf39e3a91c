// The secret cache's state and order, driven in-process (the local CA signs directly, no gRPC, a
// manual clock): one signing shared by concurrent callers and retried after a failure, the exact
// rotation time, the renewal backoff and its attempt counter (reset on success), the readiness
// blocker, expiry at the boundary, close() stopping rotation, trust bundle and root changes, and
// listener failures. Times are literals computed by hand from a one-hour certificate issued at
// 2026-11-21T00:00:00Z. Found by mutation testing (npm run mutate -- sds).

import { beforeAll, describe, expect, test } from "bun:test";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { generateKeyAndCsr, type KeyAndCsr, type KeyOptions } from "../../src/ca/keygen.ts";
import type { SecretCacheOptions } from "../../src/sds/cache.ts";
import { closeToExpiry } from "../../src/sds/rotation.ts";
import { sotwDecide } from "../../src/sds/sotw.ts";
import { until } from "./fake-clock.ts";
import { ISSUED, KEY, makeFixtures, setupCache, SPIFFE, START, untilAsync, type Fixtures } from "./cache-rig.ts";

let fx: Fixtures;
beforeAll(async () => {
  fx = await makeFixtures();
}, 60_000);
const setup = (over: Partial<SecretCacheOptions> = {}, keygen?: (o: KeyOptions, s: string) => Promise<KeyAndCsr>, withBlocker = true) =>
  setupCache(fx, over, keygen, withBlocker);

describe("SecretCache: one signing at a time", () => {
  test("concurrent callers share one signing and get the same item; later callers get it from the cache", async () => {
    const s = setup();
    const [a, b] = await Promise.all([s.cache.get("default"), s.cache.get("default")]);
    expect(a).toBe(b);
    expect(await s.cache.get("default")).toBe(a);
    expect(s.signer.calls).toBe(1);
    expect(a.createdMs).toBe(START);
    expect(a.expireMs).toBe(START + 3_600_000);
    expect(s.cache.workloadExpiry()).toBe(START + 3_600_000);
    expect(s.updates).toEqual([]); // the first issuance replaces nothing
    s.cache.close();
  });

  test("a failed signing is not cached: the next caller signs again", async () => {
    const s = setup();
    s.signer.fail = "CA unavailable";
    await expect(s.cache.get("default")).rejects.toThrow("CA unavailable");
    s.signer.fail = undefined;
    const item = await s.cache.get("default");
    expect(item.expireMs).toBe(START + 3_600_000);
    expect(s.signer.calls).toBe(2);
    s.cache.close();
  });

  test("a certificate that does not match our key is refused", async () => {
    const other = await generateKeyAndCsr(KEY, SPIFFE);
    const s = setup({}, async () => ({ keyPem: other.keyPem, csrPem: fx.pair.csrPem }));
    await expect(s.cache.get("default")).rejects.toThrow("default: the local CA returned a certificate that does not match our key");
    s.cache.close();
  });

  test("without a CA or files, default and ROOTCA name what is missing", async () => {
    const s = setup({ signer: undefined });
    await expect(s.cache.get("default")).rejects.toThrow(/^default: no CA configured and no certificate files$/);
    await expect(s.cache.get("ROOTCA")).rejects.toThrow(/^ROOTCA: no CA configured and no root certificate file$/);
    const f = setup({
      signer: undefined,
      workloadFiles: { certChainPath: "/nonexistent/cert-chain.pem", keyPath: "/nonexistent/key.pem", rootCertPath: "/nonexistent/root-cert.pem" },
    });
    await expect(f.cache.get("default")).rejects.toThrow(
      "default: no CA configured and no certificate files at /nonexistent/cert-chain.pem / /nonexistent/key.pem",
    );
    await expect(f.cache.get("ROOTCA")).rejects.toThrow("ROOTCA: no CA configured and no root certificate file at /nonexistent/root-cert.pem");
  });
});

describe("SecretCache: rotation and renewal", () => {
  test("rotation is due at expiry − ratio·lifetime, to the millisecond, and pushes default", async () => {
    const s = setup({ rotation: { ratio: 0.5, jitter: 0.01 } }); // random 0.5: ratio 0.505
    await s.cache.get("default");
    expect(s.clock.nextAt()).toBe(START + 1_782_000);
    expect(s.messages()).toContain("workload certificate rotation scheduled in 1782s");
    s.clock.advance(1_781_999);
    expect(s.keygens()).toBe(1);
    s.clock.advance(1);
    expect(s.keygens()).toBe(2); // renewal started synchronously at the due time
    await until(() => s.updates.includes("default"), "rotation push");
    expect(s.signer.calls).toBe(2);
    expect(s.cache.workloadExpiry()).toBe(START + 1_782_000 + 3_600_000);
    expect(s.clock.nextAt()).toBe(START + 1_782_000 + 1_782_000);
    s.cache.close();
  });

  test("failed renewals back off 1s, 2s, 4s with their attempt number; success resets the count", async () => {
    const s = setup();
    const first = await s.cache.get("default");
    s.signer.fail = "CA down";
    s.clock.advance(1_800_000);
    await until(() => s.messages().some((m) => m.includes("(attempt 1)")), "attempt 1");
    expect(s.messages()).toContain(
      "renewing the workload certificate failed (attempt 1): CA down; still serving the current certificate (expires in 1800s), retrying in 1.0s",
    );
    expect(s.clock.nextAt()).toBe(START + 1_801_000);
    expect(await s.cache.get("default")).toBe(first);
    s.clock.advance(1000);
    await until(() => s.messages().some((m) => m.includes("(attempt 2)")), "attempt 2");
    expect(s.messages()).toContain(
      "renewing the workload certificate failed (attempt 2): CA down; still serving the current certificate (expires in 1799s), retrying in 2.0s",
    );
    expect(s.clock.nextAt()).toBe(START + 1_803_000);
    s.clock.advance(2000);
    await until(() => s.messages().some((m) => m.includes("(attempt 3)")), "attempt 3");
    expect(s.clock.nextAt()).toBe(START + 1_807_000);
    s.signer.fail = undefined;
    s.clock.advance(4000);
    await until(() => s.blocker.includes("clear"), "renewed");
    expect(s.messages()).toContain("workload certificate renewed after 3 failed attempt(s)");
    // not close to expiry at any point: readiness was never blocked
    expect(s.blocker).toEqual(["clear"]);
    // the next failure counts from 1 again
    const renewedAt = START + 1_807_000;
    s.signer.fail = "CA down again";
    s.clock.advance(s.clock.nextAt()! - s.clock.now());
    await until(() => s.messages().some((m) => m.includes("CA down again")), "next failure");
    expect(s.messages().filter((m) => m.includes("CA down again"))).toEqual([
      "renewing the workload certificate failed (attempt 1): CA down again; still serving the current certificate (expires in 1800s), retrying in 1.0s",
    ]);
    expect(s.cache.workloadExpiry()).toBe(renewedAt + 3_600_000);
    expect(s.messages().filter((m) => m.startsWith("workload certificate renewed after"))).toHaveLength(1);
    s.cache.close();
  });

  test("a renewal failing close to expiry (< 10 % of the lifetime left) blocks readiness, naming the time left", async () => {
    const s = setup({ rotation: { ratio: 0.05, jitter: 0 } });
    await s.cache.get("default");
    expect(s.clock.nextAt()).toBe(START + 3_420_000);
    s.signer.fail = "CA down";
    s.clock.advance(3_420_000);
    await until(() => s.blocker.length >= 2, "blocked");
    expect(s.blocker).toEqual(["reblock", "fail: certificate expires in 180s and renewing the workload certificate failed (attempt 1): CA down"]);
    s.cache.close();
  });

  test("exactly at expiry the cached certificate is no longer served", async () => {
    const s = setup();
    const first = await s.cache.get("default");
    s.cache.close(); // no rotation: only expiry decides
    s.signer.fail = "CA down";
    s.clock.advance(3_599_999);
    expect(await s.cache.get("default")).toBe(first);
    s.clock.advance(1);
    await expect(s.cache.get("default")).rejects.toThrow("CA down");
  });

  test("after close() the rotation timer is gone and a signing finishing late schedules nothing", async () => {
    const s = setup();
    await s.cache.get("default");
    expect(s.clock.pending()).toBe(1);
    s.signer.hold = [];
    s.clock.advance(1_800_000);
    await until(() => s.signer.hold!.length === 1, "renewal signing started");
    s.cache.close();
    expect(s.clock.pending()).toBe(0);
    s.signer.hold[0]!.resolve();
    await until(() => s.messages().filter((m) => m.startsWith(ISSUED)).length === 2, "late issuance logged");
    expect(s.clock.pending()).toBe(0);
  });
});

describe("SecretCache: roots and listeners", () => {
  test("the same trust bundle twice does nothing the second time; a new one re-issues default and pushes ROOTCA", async () => {
    const s = setup();
    await s.cache.get("default");
    s.cache.updateTrustBundle([fx.caB.rootPem]);
    expect(s.keygens()).toBe(2); // re-issue started at once
    await until(() => s.updates.includes("ROOTCA") && s.updates.includes("default"), "bundle push");
    const root = (await s.cache.get("ROOTCA")).rootCert!;
    expect(root).toContain(fx.caA.rootPem.trim());
    expect(root).toContain(fx.caB.rootPem.trim());
    const lines = s.messages().filter((m) => m.startsWith("trust bundle updated"));
    s.cache.updateTrustBundle([fx.caB.rootPem, fx.caB.rootPem]);
    expect(s.keygens()).toBe(2);
    expect(s.messages().filter((m) => m.startsWith("trust bundle updated"))).toEqual(lines);
    expect(lines).toEqual(["trust bundle updated from ProxyConfig: 1 certificate(s)"]);
    s.cache.close();
  });

  test("default and ROOTCA fetched while a trust-bundle re-issue is in flight are whole, parseable PEM", async () => {
    const s = setup();
    const first = await s.cache.get("default");
    s.signer.hold = [];
    s.cache.updateTrustBundle([fx.caB.rootPem]);
    await until(() => s.signer.hold!.length === 1, "re-issue signing started");
    const [during, root] = await Promise.all([s.cache.get("default"), s.cache.get("ROOTCA")]);
    expect(during).toBe(first);
    expect(new X509Certificate(during.certificateChain!).checkPrivateKey(createPrivateKey(during.privateKey!))).toBe(true);
    expect(root.rootCert!.match(/-----BEGIN CERTIFICATE-----/g)).toHaveLength(2);
    for (const pem of root.rootCert!.split(/(?<=-----END CERTIFICATE-----\n)/).filter((p) => p.trim())) expect(() => new X509Certificate(pem)).not.toThrow();
    s.signer.hold[0]!.resolve();
    await until(() => s.updates.includes("default"), "re-issued");
    const after = await s.cache.get("default");
    expect(after).not.toBe(first);
    expect(new X509Certificate(after.certificateChain!).checkPrivateKey(createPrivateKey(after.privateKey!))).toBe(true);
    s.cache.close();
  });

  test("a trust bundle before any certificate signs once (for the CA's root), not a second time to re-issue", async () => {
    const s = setup();
    s.cache.updateTrustBundle([fx.caB.rootPem]);
    expect(s.keygens()).toBe(1);
    await until(() => s.updates.includes("ROOTCA"), "ROOTCA push");
    expect(s.keygens()).toBe(1);
    expect(s.signer.calls).toBe(1);
    s.cache.close();
  });

  test("a renewal with the same root pushes default only; with a new root also ROOTCA", async () => {
    const s = setup();
    await s.cache.get("default");
    await s.cache.get("ROOTCA");
    s.clock.advance(1_800_000);
    await until(() => s.blocker.includes("clear"), "renewed");
    expect(s.updates).toEqual(["default"]);
    expect(s.messages().filter((m) => m.startsWith("root certificate changed") || m.startsWith("workload certificate renewed after"))).toEqual([]);
    s.signer.ca = fx.caB;
    s.clock.advance(1_800_000);
    await until(() => s.blocker.filter((b) => b === "clear").length === 2, "renewed again");
    expect(s.updates).toEqual(["default", "default", "ROOTCA"]);
    expect(s.messages()).toContain("root certificate changed with the new workload certificate: pushing ROOTCA");
    expect((await s.cache.get("ROOTCA")).rootCert).toBe(fx.caB.rootPem);
    s.cache.close();
  });

  test("a failing listener is logged by name and the others still hear; an unsubscribed one does not", async () => {
    const s = setup();
    const heard: string[] = [];
    s.cache.onUpdate(() => {
      throw new Error("boom");
    });
    const off = s.cache.onUpdate((n) => heard.push(`off:${n}`));
    s.cache.onUpdate((n) => heard.push(n));
    off();
    await s.cache.get("default");
    s.clock.advance(1_800_000);
    await until(() => s.blocker.includes("clear"), "renewed");
    expect(heard).toEqual(["default"]);
    expect(s.updates).toEqual(["default"]);
    expect(s.messages()).toContain("secret update listener failed for default: boom");
    s.cache.close();
  });
});

describe("SecretCache: guards, metrics and pure rules", () => {
  test("after close() a new trust bundle starts no signing", async () => {
    const s = setup();
    await s.cache.get("default");
    s.cache.close();
    s.cache.updateTrustBundle([fx.caB.rootPem]);
    expect(s.keygens()).toBe(1);
  });

  test("a trust bundle before any certificate with the CA down: ROOTCA waits, and no renewal retry is scheduled", async () => {
    const s = setup();
    s.signer.fail = "CA down";
    s.cache.updateTrustBundle([fx.caB.rootPem]);
    await until(() => s.messages().some((m) => m.startsWith("ROOTCA not available yet")), "ROOTCA attempt failed");
    // sentinel: a later signing attempt, started and failed after the first one settled
    await expect(s.cache.get("default")).rejects.toThrow("CA down");
    expect(s.messages().filter((m) => m.startsWith("renewing the workload certificate failed"))).toEqual([]);
    expect(s.clock.pending()).toBe(0);
    s.cache.close();
  });

  test("a renewal that fails after close() logs nothing and schedules nothing", async () => {
    const s = setup();
    await s.cache.get("default");
    s.signer.hold = [];
    s.signer.fail = "CA down";
    s.clock.advance(1_800_000);
    await until(() => s.signer.hold!.length === 1, "renewal signing started");
    s.cache.close();
    s.signer.hold[0]!.resolve();
    // sentinel: a later signing attempt, started and failed after the renewal's failure settled
    await untilAsync(async () => (await s.metric("istio_agent_num_failed_outgoing_requests"))[0]?.value === 1, "renewal failure counted");
    s.signer.hold = undefined;
    s.clock.advance(3_600_000);
    await expect(s.cache.get("default")).rejects.toThrow("CA down");
    expect(s.messages().filter((m) => m.startsWith("renewing the workload certificate failed"))).toEqual([]);
    expect(s.clock.pending()).toBe(0);
  });

  test("without a readiness blocker, a failing renewal close to expiry still schedules its retry", async () => {
    const s = setup({ rotation: { ratio: 0.05, jitter: 0 } }, undefined, false);
    await s.cache.get("default");
    s.signer.fail = "CA down";
    s.clock.advance(3_420_000);
    await until(() => s.clock.nextAt() === START + 3_421_000, "retry scheduled");
    s.cache.close();
  });

  test("CSR metrics: one request labelled csr, failures counted, latency no longer than the call", async () => {
    const s = setup();
    const t0 = performance.now();
    await s.cache.get("default");
    const elapsed = performance.now() - t0;
    expect(await s.metric("istio_agent_num_outgoing_requests")).toEqual([{ labels: { request_type: "csr" }, value: 1 }]);
    const latency = await s.metric("istio_agent_outgoing_latency");
    expect(latency.map((v) => v.labels)).toEqual([{ request_type: "csr" }]);
    expect(latency[0]!.value).toBeGreaterThan(0);
    expect(latency[0]!.value).toBeLessThanOrEqual(elapsed);
    s.signer.fail = "CA down";
    s.clock.advance(1_800_000);
    await untilAsync(async () => (await s.metric("istio_agent_num_failed_outgoing_requests")).length === 1, "failure counted");
    expect(await s.metric("istio_agent_num_failed_outgoing_requests")).toEqual([{ labels: { request_type: "csr" }, value: 1 }]);
    s.cache.close();
  });

  test("SotW: the same names again is an ACK, fewer names is a removal", () => {
    const st = { watched: new Set(["a", "b"]), lastNonce: "n1", seenRequest: true };
    expect(sotwDecide(st, { resourceNames: ["b", "a"], responseNonce: "n1" })).toEqual({ action: "ignore", reason: "ack", watched: new Set(["b", "a"]) });
    expect(sotwDecide(st, { resourceNames: ["a"], responseNonce: "n1" })).toEqual({ action: "ignore", reason: "removed names", watched: new Set(["a"]) });
  });

  test("close to expiry means strictly less than a tenth of the lifetime left", () => {
    expect(closeToExpiry(0, 1000, 900)).toBe(false);
    expect(closeToExpiry(0, 1000, 901)).toBe(true);
  });
});
