// Istio's pkg/wasm/cache_test.go TestWasmCache cases through the cache's public API (the HTTP
// and OCI fetchers are counting fakes: what is tested is when the cache goes to the network and
// what it keeps), plus the fake-clock purge, the in-use guard and the single download for
// concurrent identical requests.

import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { ModuleCache, moduleNameFromUrl } from "../../src/wasm/cache.ts";
import { wasmMetrics } from "../../src/wasm/metrics.ts";
import type { Scratch } from "../../src/wasm/spool.ts";
import type { GetOptions, PullPolicy } from "../../src/wasm/types.ts";
import { FakeClock, sha256 } from "./support.ts";

const WASM_HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const httpData = Uint8Array.from([...WASM_HEADER, ...new TextEncoder().encode("data")]);
const differentData = Uint8Array.from([...httpData, ...new TextEncoder().encode("different data")]);
const invalidData = new TextEncoder().encode("invalid binary");
const httpSum = sha256(httpData);
const ociBinary = Uint8Array.from([...WASM_HEADER, ...new TextEncoder().encode("oci")]);
const ociBinary2 = Uint8Array.from([...WASM_HEADER, ...new TextEncoder().encode("oci-v2")]);
const DIGEST = "a".repeat(64);
const DIGEST2 = "b".repeat(64);
const HOUR = 3_600_000;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function make(opts: { expiryMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "wasm-cache-"));
  dirs.push(dir);
  const clock = new FakeClock();
  const registry = newRegistry();
  const calls = { http: 0, ociManifest: 0, ociBinary: 0 };
  const oci = { digest: DIGEST, binary: ociBinary, fail: "" as string, delayMs: 0 };
  const toFile = (scratch: Scratch, b: Uint8Array) => {
    const f = scratch.file();
    writeFileSync(f, b);
    return f;
  };
  const http = {
    async fetch(url: string, _insecure: boolean, _signal: AbortSignal, scratch: Scratch) {
      calls.http++;
      const path = new URL(url).pathname;
      if (path === "/fail") throw new Error("wasm module download failed after 1 attempts, last error: status code 500");
      if (path === "/different-url") return toFile(scratch, differentData);
      if (path === "/invalid-wasm-header") return toFile(scratch, invalidData);
      if (path === "/slow") await Bun.sleep(50);
      return toFile(scratch, httpData);
    },
  };
  const ociFetcher = {
    async prepareFetch(_ref: string, o: { signal: AbortSignal }) {
      calls.ociManifest++;
      if (oci.delayMs)
        await new Promise((r, j) => (setTimeout(r, oci.delayMs), o.signal.addEventListener("abort", () => j(new Error("context deadline exceeded")))));
      if (oci.fail) throw new Error(oci.fail);
      const binary = oci.binary;
      return { digest: oci.digest, fetchBinary: async (scratch: Scratch) => (calls.ociBinary++, toFile(scratch, binary)) };
    },
  };
  const cache = new ModuleCache(
    { dir, moduleExpiryMs: opts.expiryMs ?? 24 * HOUR, insecureRegistries: new Set(), maxConcurrentDownloads: 4 },
    { http, oci: ociFetcher, metrics: wasmMetrics(registry), log: silentLogger(), clock },
  );
  return { cache, dir, clock, calls, oci, registry };
}

const opts = (o: Partial<GetOptions> = {}): GetOptions => ({
  checksum: "",
  resourceName: "namespace.resource",
  resourceVersion: "0",
  requestTimeoutMs: 10_000,
  pullPolicy: "Unspecified" as PullPolicy,
  ...o,
});
const TS = "http://127.0.0.1:8080";
const REG = "oci://registry.test:5000/test/valid/docker";

describe("TestWasmCache", () => {
  test("cache miss", async () => {
    const { cache, dir, calls } = make();
    const p = await cache.get(TS, opts({ checksum: httpSum }));
    expect(p).toBe(join(dir, sha256(new TextEncoder().encode(TS)), `${httpSum}.wasm`));
    expect(sha256(readFileSync(p))).toBe(httpSum);
    expect(calls.http).toBe(1);
  });

  test("cache hit", async () => {
    const { cache, calls } = make();
    const a = await cache.get(TS, opts({ checksum: httpSum }));
    const b = await cache.get(TS, opts({ checksum: httpSum }));
    expect(b).toBe(a);
    expect(calls.http).toBe(1);
  });

  test("invalid scheme", async () => {
    const { cache, calls } = make();
    await expect(cache.get("xyz://abc", opts({ checksum: httpSum }))).rejects.toThrow("unsupported Wasm module downloading URL scheme: xyz");
    expect(calls.http).toBe(0);
  });

  test("download failure", async () => {
    const { cache, registry } = make();
    await expect(cache.get("https://dummyurl/fail", opts())).rejects.toThrow("wasm module download failed");
    expect(await registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="download_failure"} 1');
  });

  test("wrong checksum", async () => {
    const { cache, registry, calls } = make();
    await expect(cache.get(TS, opts({ checksum: "wrongchecksum" }))).rejects.toThrow(
      `module downloaded from ${TS} has checksum ${httpSum}, which does not match: wrongchecksum`,
    );
    expect(calls.http).toBe(1);
    expect(await registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="checksum_mismatched"} 1');
  });

  test("different url same checksum", async () => {
    const { cache, calls, dir } = make();
    await cache.get(TS, opts({ checksum: httpSum }));
    const p = await cache.get(`${TS}/different-url`, opts({ checksum: sha256(differentData) }));
    expect(p).toBe(join(dir, sha256(new TextEncoder().encode(`${TS}/different-url`)), `${sha256(differentData)}.wasm`));
    expect(calls.http).toBe(2);
  });

  test("invalid wasm header", async () => {
    const { cache, registry } = make();
    await expect(cache.get(`${TS}/invalid-wasm-header`, opts({ checksum: sha256(invalidData) }))).rejects.toThrow("is invalid");
    expect(await registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="fetch_failure"} 1');
  });

  test("purge on expiry", async () => {
    const { cache, clock, calls } = make({ expiryMs: 1000 });
    const p = await cache.get(TS, opts({ checksum: httpSum, resourceName: "" }));
    clock.advance(999);
    await cache.purge();
    expect(existsSync(p)).toBe(true);
    clock.advance(2);
    await cache.purge();
    expect(existsSync(p)).toBe(false);
    expect(cache.size).toBe(0);
    await cache.get(TS, opts({ resourceName: "" }));
    expect(calls.http).toBe(2); // the checksum entry went with the module
  });

  test("fetch oci without digest", async () => {
    const { cache, calls, dir } = make();
    const p = await cache.get(`${REG}:v0.1.0`, opts());
    expect(p).toBe(join(dir, sha256(new TextEncoder().encode(REG)), `${DIGEST}.wasm`));
    expect(calls).toMatchObject({ ociManifest: 1, ociBinary: 1 });
  });

  test("fetch oci with digest", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts({ checksum: DIGEST }));
    expect(calls).toMatchObject({ ociManifest: 1, ociBinary: 1 });
  });

  test("cache hit for tagged oci url with digest", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts({ checksum: DIGEST }));
    await cache.get(`${REG}:v0.1.0`, opts({ checksum: DIGEST }));
    expect(calls.ociManifest).toBe(1);
  });

  test("cache hit for tagged oci url without digest", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts());
    await cache.get(`${REG}:v0.1.0`, opts());
    expect(calls.ociManifest).toBe(1);
  });

  test("cache miss for tagged oci url without digest (another tag)", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts());
    await cache.get(`${REG}:v0.2.0`, opts());
    expect(calls.ociManifest).toBe(2);
    expect(calls.ociBinary).toBe(1); // same digest: the manifest check finds the module
  });

  test("cache hit for oci url suffixed by digest", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts());
    await cache.get(`${REG}@sha256:${DIGEST}`, opts());
    expect(calls.ociManifest).toBe(1);
  });

  test("pull due to pull-always policy when cache hit", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "0" }));
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "1", pullPolicy: "Always" }));
    expect(calls.ociManifest).toBe(2);
  });

  test("do not pull due to resourceVersion is the same", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "0" }));
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "0", pullPolicy: "Always" }));
    expect(calls.ociManifest).toBe(1);
  });

  test("pull due to if-not-present policy when cache hit (a new resource version changes nothing)", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "0" }));
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "1", pullPolicy: "IfNotPresent" }));
    expect(calls.ociManifest).toBe(1);
  });

  test("do not pull in spite of pull-always policy due to checksum", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "0" }));
    await cache.get(`${REG}:v0.1.0`, opts({ resourceVersion: "1", pullPolicy: "Always", checksum: DIGEST }));
    expect(calls.ociManifest).toBe(1);
  });

  test("pull due to latest tag", async () => {
    const { cache, calls, oci } = make();
    await cache.get(`${REG}:latest`, opts({ resourceVersion: "0" }));
    oci.digest = DIGEST2;
    oci.binary = ociBinary2;
    const p = await cache.get(`${REG}:latest`, opts({ resourceVersion: "1" }));
    expect(calls.ociManifest).toBe(2);
    expect(p.endsWith(`${DIGEST2}.wasm`)).toBe(true);
  });

  test("do not pull in spite of latest tag due to checksum", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:latest`, opts({ resourceVersion: "0" }));
    await cache.get(`${REG}:latest`, opts({ resourceVersion: "1", checksum: DIGEST }));
    expect(calls.ociManifest).toBe(1);
  });

  test("do not pull in spite of latest tag due to IfNotPresent policy", async () => {
    const { cache, calls } = make();
    await cache.get(`${REG}:latest`, opts({ resourceVersion: "0" }));
    await cache.get(`${REG}:latest`, opts({ resourceVersion: "1", pullPolicy: "IfNotPresent" }));
    expect(calls.ociManifest).toBe(1);
  });

  test("purge OCI image on expiry", async () => {
    const { cache, clock, calls } = make({ expiryMs: 1000 });
    const p = await cache.get(`${REG}:v0.1.0`, opts({ resourceName: "" }));
    clock.advance(1001);
    await cache.purge();
    expect(existsSync(p)).toBe(false);
    await cache.get(`${REG}:v0.1.0`, opts({ resourceName: "" }));
    expect(calls.ociManifest).toBe(2);
  });

  test("fetch oci timed out", async () => {
    const { cache, oci, registry } = make();
    oci.delayMs = 2000;
    await expect(cache.get(`${REG}:v0.1.0`, opts({ requestTimeoutMs: 20 }))).rejects.toThrow("could not fetch Wasm OCI image");
    expect(await registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count")).toContain('result="manifest_failure"} 1');
  });

  test("fetch oci with wrong digest", async () => {
    const { cache, calls } = make();
    await expect(cache.get(`${REG}:v0.1.0`, opts({ checksum: "wrongdigest" }))).rejects.toThrow(
      `module downloaded from ${REG}:v0.1.0 has checksum ${DIGEST}, which does not match: wrongdigest`,
    );
    expect(calls.ociBinary).toBe(0);
  });

  test("fetch invalid oci", async () => {
    const { cache, oci } = make();
    oci.binary = invalidData;
    await expect(cache.get(`${REG}:v0.1.0`, opts())).rejects.toThrow("is invalid");
  });
});

describe("beyond Istio's cases", () => {
  test("moduleNameFromURL: tag and digest removed, Docker Hub names expanded as go-containerregistry does", () => {
    expect(moduleNameFromUrl("oci://registry.test:5000/a/b:v1")).toBe("oci://registry.test:5000/a/b");
    expect(moduleNameFromUrl(`oci://registry.test/a@sha256:${DIGEST}`)).toBe("oci://registry.test/a");
    expect(moduleNameFromUrl("oci://istio/wasm:1.0")).toBe("oci://index.docker.io/istio/wasm");
    expect(moduleNameFromUrl("oci://docker.io/plugin")).toBe("oci://index.docker.io/library/plugin");
    expect(moduleNameFromUrl("http://x/y.wasm?z")).toBe("http://x/y.wasm?z");
  });

  test("10 pods' worth of concurrent identical requests download once and share one file", async () => {
    const { cache, calls } = make();
    const paths = await Promise.all(Array.from({ length: 10 }, (_, i) => cache.get(`${TS}/slow`, opts({ resourceName: `ns.p${i}` }))));
    expect(new Set(paths).size).toBe(1);
    expect(calls.http).toBe(1);
    const ociPaths = await Promise.all(Array.from({ length: 10 }, () => cache.get(`${REG}:v9`, opts())));
    expect(new Set(ociPaths).size).toBe(1);
    expect(calls.ociManifest).toBe(1);
  });

  test("a module a resource's latest config uses is never purged; once replaced it expires", async () => {
    const { cache, clock } = make({ expiryMs: 1000 });
    const old = await cache.get(TS, opts({ resourceName: "ns.plugin", checksum: httpSum }));
    clock.advance(5000);
    await cache.purge();
    expect(existsSync(old)).toBe(true); // Envoy still runs it
    const next = await cache.get(`${TS}/different-url`, opts({ resourceName: "ns.plugin", checksum: sha256(differentData) }));
    clock.advance(1001);
    await cache.purge();
    expect(existsSync(old)).toBe(false);
    expect(existsSync(next)).toBe(true);
  });

  test("cache metrics: lookups by hit, entries gauge", async () => {
    const { cache, registry } = make();
    await cache.get(TS, opts({ checksum: httpSum }));
    await cache.get(TS, opts({ checksum: httpSum }));
    const text = await registry.metrics();
    expect(text).toContain('istio_agent_wasm_cache_lookup_count{hit="false"} 1');
    expect(text).toContain('istio_agent_wasm_cache_lookup_count{hit="true"} 1');
    expect(text).toContain("istio_agent_wasm_cache_entries 1");
  });
});
