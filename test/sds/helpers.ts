// Shared set-up for SDS tests: a secret cache wired to the fake CA through the real CA client,
// on a fake clock.

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IstioCaClient } from "../../src/ca/client.ts";
import { LocalCa } from "../../src/ca/local.ts";
import { FileTokenSource } from "../../src/ca/token.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { SecretCache, type SecretCacheOptions } from "../../src/sds/cache.ts";
import { SecretMetrics } from "../../src/sds/metrics.ts";
import { FakeCa } from "../support/fake-ca.ts";
import { FakeClock } from "./fake-clock.ts";

export const SPIFFE = "spiffe://cluster.local/ns/default/sa/app";

export interface Rig {
  dir: string;
  clock: FakeClock;
  ca: FakeCa;
  client: IstioCaClient;
  cache: SecretCache;
  log: ReturnType<typeof memoryLogger>;
  registry: ReturnType<typeof newRegistry>;
  readiness: Readiness;
  updates: string[];
  close(): Promise<void>;
}

export async function rig(over: Partial<SecretCacheOptions> = {}, random = () => 0.5): Promise<Rig> {
  const clock = new FakeClock(Date.now());
  const dir = mkdtempSync(join(tmpdir(), "sds-"));
  const ca = await FakeCa.start({ token: "tok", spiffeId: SPIFFE, signer: await LocalCa.generate({ now: () => clock.now() }) });
  writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
  writeFileSync(join(dir, "token"), "tok");
  // A generous attempt timeout: on a loaded machine (mutation runs, parallel suites) a first
  // signing can take seconds, and a retry would break the tests' request counts.
  const client = new IstioCaClient(
    { address: ca.address, tls: true, rootCertPath: join(dir, "root.pem"), serverName: "istiod.istio-system.svc", headers: {} },
    { tokens: new FileTokenSource(join(dir, "token")), sleep: async () => true, attemptTimeoutMs: 30_000 },
  );
  const log = memoryLogger();
  const registry = newRegistry();
  const readiness = new Readiness(() => clock.now());
  const metrics = new SecretMetrics(registry, clock);
  const cache = new SecretCache(
    {
      signer: client,
      keyOptions: { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false },
      spiffeId: SPIFFE,
      ttlSeconds: 3600,
      rotation: { ratio: 0.5, jitter: 0.01 },
      debounceMs: 20,
      ...over,
    },
    {
      log: log.log,
      metrics,
      clock,
      random,
      renewalBlocker: {
        reblock: () => readiness.warn("certificate renewal"),
        fail: (e) => readiness.warn("certificate renewal").fail(e),
        clear: () => readiness.clear("certificate renewal"),
      },
    },
  );
  const updates: string[] = [];
  cache.onUpdate((n) => updates.push(n));
  return {
    dir,
    clock,
    ca,
    client,
    cache,
    log,
    registry,
    readiness,
    updates,
    async close() {
      cache.close();
      await ca.close();
    },
  };
}
