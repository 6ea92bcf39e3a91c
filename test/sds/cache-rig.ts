// The secret cache in-process for the mutation tests (mutants*.test.ts): two local CAs and one
// key/CSR made once per file (generating them is the slow part), a signer whose CA, failures and
// timing the test controls, a manual clock, a recorded readiness blocker and log.

import { LocalCa } from "../../src/ca/local.ts";
import { generateKeyAndCsr, type KeyAndCsr, type KeyOptions } from "../../src/ca/keygen.ts";
import type { CertificateSigner } from "../../src/ca/signer.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { SecretCache, type SecretCacheOptions } from "../../src/sds/cache.ts";
import { SecretMetrics } from "../../src/sds/metrics.ts";
import { FakeClock } from "./fake-clock.ts";

export const START = Date.parse("2026-11-21T00:00:00Z");
export const SPIFFE = "spiffe://cluster.local/ns/default/sa/app";
export const KEY: KeyOptions = { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false };
export const ISSUED = "workload certificate issued by local CA";

/** Made once per file; the CAs read the current test's clock through `clockNow`. */
export interface Fixtures {
  caA: LocalCa;
  caB: LocalCa;
  /** One key and CSR for every signing (the cache does not care; generating them is slow under load). */
  pair: KeyAndCsr;
  clockNow: { fn: () => number };
}

export async function makeFixtures(): Promise<Fixtures> {
  const clockNow = { fn: () => START };
  return {
    pair: await generateKeyAndCsr(KEY, SPIFFE),
    caA: await LocalCa.generate({ now: () => clockNow.fn() }),
    caB: await LocalCa.generate({ now: () => clockNow.fn() }),
    clockNow,
  };
}

interface Deferred {
  resolve(): void;
  reject(e: Error): void;
}

/** A signer whose CA, failures and timing the test controls. */
export class TestSigner implements CertificateSigner {
  readonly name = "local";
  ca!: LocalCa;
  calls = 0;
  fail: string | undefined;
  hold: Deferred[] | undefined;
  async sign(csr: string, ttl: number): Promise<string[]> {
    this.calls++;
    if (this.hold) await new Promise<void>((resolve, reject) => this.hold!.push({ resolve, reject }));
    if (this.fail) throw new Error(this.fail);
    return this.ca.sign(csr, ttl);
  }
}

export function setupCache(
  fx: Fixtures,
  over: Partial<SecretCacheOptions> = {},
  keygen?: (o: KeyOptions, s: string) => Promise<KeyAndCsr>,
  withBlocker = true,
) {
  const clock = new FakeClock(START);
  fx.clockNow.fn = () => clock.now();
  const signer = new TestSigner();
  signer.ca = fx.caA;
  const mem = memoryLogger();
  const blocker: string[] = [];
  let keygens = 0;
  const registry = newRegistry();
  const cache = new SecretCache(
    { signer, keyOptions: KEY, spiffeId: SPIFFE, ttlSeconds: 3600, rotation: { ratio: 0.5, jitter: 0 }, debounceMs: 20, ...over },
    {
      log: mem.log,
      metrics: new SecretMetrics(registry, clock),
      clock,
      random: () => 0.5,
      ...(withBlocker
        ? { renewalBlocker: { reblock: () => blocker.push("reblock"), fail: (m: string) => blocker.push(`fail: ${m}`), clear: () => blocker.push("clear") } }
        : {}),
      generateKey: (o, s) => (keygens++, keygen ? keygen(o, s) : Promise.resolve(fx.pair)),
    },
  );
  const updates: string[] = [];
  cache.onUpdate((n) => updates.push(n));
  /** Log lines without the timestamp and level: message, then fields as `\tkey=value`. */
  const messages = () => mem.lines.map((l) => l.split("\t").slice(2).join("\t"));
  const metric = async (name: string) =>
    ((await registry.getSingleMetric(name)!.get()) as { values: { labels: Record<string, string>; value: number }[] }).values;
  return { clock, signer, cache, blocker, updates, messages, keygens: () => keygens, metric };
}

/** Let promises settle until the async `cond` holds (real time, bounded). */
export async function untilAsync(cond: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
