// The Wasm conversion's limits and failure reports (issue 34), through the cache as the agent
// builds it (createWasmConversion) against real loopback servers: a gzip bomb is cut at the
// limit; an OCI layer is held to its declared size; malformed manifests and oversized manifests
// are reported as what they are; a registry named by a public name is never downgraded to plain
// HTTP (its pull secret stays unsent); credentials in a module URL never reach a log line; a full
// or unwritable cache directory names the file and what to do, leaves no temp files behind, and
// counts no success; leftover temp files are swept.

import { afterEach, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { createWasmConversion } from "../../src/wasm/index.ts";
import type { Lookup } from "../../src/wasm/ssrf.ts";
import { testRequiring } from "../support/requires.ts";
import { getOptions, wasmModule } from "./support.ts";

const MiB = 1024 * 1024;
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "wasm-limits-"));
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function serve(fetch: (req: Request) => Response | Promise<Response>, hostname = "127.0.0.1") {
  const s = Bun.serve({ hostname, port: 0, fetch });
  cleanups.push(() => s.stop(true));
  return s;
}

function conversion(dir: string, o: { maxBinaryBytes?: number; insecure?: string; lookup?: Lookup } = {}) {
  const { sink, lines } = memoryLogger("all:debug");
  const registry = newRegistry();
  const w = createWasmConversion(
    {
      dir,
      insecureRegistries: o.insecure ?? "",
      moduleExpiryMs: 86_400_000,
      purgeIntervalMs: 3_600_000,
      httpRequestTimeoutMs: 5000,
      httpRequestMaxRetries: 1,
      blockedCidrs: "",
      maxBinaryBytes: o.maxBinaryBytes ?? MiB,
    },
    { log: sink.logger("wasm"), registry, clock: { now: () => Date.now() }, ...(o.lookup ? { lookup: o.lookup } : {}) },
  );
  return { w, lines, registry };
}

const opts = getOptions;

const digest = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** Every file under `dir` (one level of subdirectories, as the cache lays them out). */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? readdirSync(join(dir, d.name)).map((f) => `${d.name}/${f}`) : [d.name]));
}

/** A registry API v2 stand-in serving one image: `manifest` (object or raw text) and its blobs. */
function fakeRegistry(manifest: unknown, blobs: Record<string, Uint8Array>) {
  const text = typeof manifest === "string" ? manifest : JSON.stringify(manifest);
  return serve((req) => {
    const path = new URL(req.url).pathname;
    if (path === "/v2/team/plugin/manifests/v1") return new Response(text, { headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" } });
    const m = /^\/v2\/team\/plugin\/blobs\/(sha256:[a-f0-9]{64})$/.exec(path);
    const blob = m ? blobs[m[1]!] : undefined;
    return blob ? new Response(blob) : new Response("", { status: 404 });
  });
}

describe("gzip bombs", () => {
  test("a 200 KiB gzip of 64 MiB is cut at ISTIO_WASM_MAX_BINARY_SIZE_BYTES: the error names the URL and the setting; no file is left", async () => {
    const big = Buffer.alloc(64 * MiB);
    Buffer.from(wasmModule("bomb")).copy(big);
    const gz = gzipSync(big, { level: 9 });
    const s = serve(() => new Response(gz));
    const dir = tempDir();
    const { w } = conversion(dir, { maxBinaryBytes: MiB });
    const url = `http://127.0.0.1:${s.port}/bomb.wasm`;
    const err = await w.cache.get(url, opts()).catch((e: Error) => e.message);
    expect(err).toBe(`Wasm module ${url} (gunzipped) exceeds the limit of ${MiB} bytes (ISTIO_WASM_MAX_BINARY_SIZE_BYTES)`);
    expect(filesUnder(dir)).toEqual([]);
  });
});

describe("OCI", () => {
  test("a layer longer than its descriptor's size is refused after that many bytes", async () => {
    const mod = wasmModule("oci-size", 4000);
    const manifest = {
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.module.wasm.config.v1+json", digest: digest(new Uint8Array()), size: 0 },
      layers: [
        { mediaType: "application/vnd.module.wasm.content.layer.v1+wasm", digest: digest(mod), size: 10 },
        { mediaType: "application/vnd.oci.image.config.v1+json", digest: digest(new Uint8Array()), size: 0 },
      ],
    };
    const s = fakeRegistry(manifest, { [digest(mod)]: mod });
    const { w } = conversion(tempDir());
    const err = await w.cache.get(`oci://127.0.0.1:${s.port}/team/plugin:v1`, opts()).catch((e: Error) => e.message);
    expect(err).toContain(`layer ${digest(mod)} exceeds the limit of 10 bytes (the size its manifest declares)`);
  });

  test("a manifest whose layers are not objects is reported by field, not as a JavaScript error", async () => {
    const s = fakeRegistry({ schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", layers: [null, null] }, {});
    const { w } = conversion(tempDir());
    const err = await w.cache.get(`oci://127.0.0.1:${s.port}/team/plugin:v1`, opts()).catch((e: Error) => e.message);
    expect(err).toBe(`could not fetch Wasm OCI image: image manifest 127.0.0.1:${s.port}/team/plugin:v1 is not a valid manifest: layers[0] is not an object`);
  });

  test("a manifest over 4 MiB names the manifest limit, not ISTIO_WASM_MAX_BINARY_SIZE_BYTES", async () => {
    const s = fakeRegistry(JSON.stringify({ schemaVersion: 2, pad: "x".repeat(5 * MiB) }), {});
    const { w } = conversion(tempDir(), { maxBinaryBytes: 256 * MiB });
    const err = await w.cache.get(`oci://127.0.0.1:${s.port}/team/plugin:v1`, opts()).catch((e: Error) => e.message);
    expect(err).toContain(`image manifest 127.0.0.1:${s.port}/team/plugin:v1`);
    expect(err).toContain(`limit of ${4 * MiB} bytes (the agent's fixed limit for image manifests)`);
    expect(err).not.toContain("ISTIO_WASM_MAX_BINARY_SIZE_BYTES");
  });

  // The machine's own name is a registry name that is neither localhost nor an IP literal.
  const host = hostname();
  const secret = (registry: string) => new TextEncoder().encode(JSON.stringify({ auths: { [registry]: { username: "bot", password: "pull-secret-pw" } } }));

  test("a registry with a public name that answers TLS in plain HTTP is not downgraded: its pull secret is never sent", async () => {
    const authorizations: string[] = [];
    const s = serve((req) => {
      authorizations.push(req.headers.get("authorization") ?? "");
      return new Response("", { status: 401, headers: { "www-authenticate": `Basic realm="https://${host}/"` } });
    }, "0.0.0.0");
    const { w } = conversion(tempDir(), { lookup: async () => [{ address: "127.0.0.1", family: 4 }] });
    const registry = `${host}:${s.port}`;
    const err = await w.cache.get(`oci://${registry}/team/plugin:v1`, opts({ pullSecret: secret(registry) })).catch((e: Error) => e.message);
    expect(err).toContain(
      `${registry} does not speak TLS; plain HTTP is used only for registries listed in WASM_INSECURE_REGISTRIES, localhost, or loopback and RFC 1918 IP addresses`,
    );
    expect(authorizations).toEqual([]);
  });

  test("the same registry listed in WASM_INSECURE_REGISTRIES is spoken to in plain HTTP (Istio's insecure registries)", async () => {
    const authorizations: string[] = [];
    const s = serve((req) => {
      authorizations.push(req.headers.get("authorization") ?? "");
      return new Response("", { status: 404 });
    }, "0.0.0.0");
    const registry = `${host}:${s.port}`;
    const { w } = conversion(tempDir(), { insecure: registry, lookup: async () => [{ address: "127.0.0.1", family: 4 }] });
    const err = await w.cache.get(`oci://${registry}/team/plugin:v1`, opts()).catch((e: Error) => e.message);
    expect(err).toContain("answered 404");
    expect(authorizations.length).toBe(1);
  });
});

describe("credentials in a module URL", () => {
  test("never reach a log line or an error, on success or failure", async () => {
    const mod = wasmModule("with-creds");
    const s = serve((req) => (new URL(req.url).pathname === "/ok.wasm" ? new Response(mod) : new Response("", { status: 404 })));
    const { w, lines } = conversion(tempDir());
    const { T, anyBytes, any } = await import("./protos.ts");
    const resource = (path: string) =>
      anyBytes(T.ec, {
        name: `ns.${path}`,
        typed_config: any(T.httpWasm, {
          config: { vm_config: { code: { remote: { http_uri: { uri: `http://bot:s3cr3t-pw@127.0.0.1:${s.port}/${path}`, timeout: { seconds: 5 } } } } } },
        }),
      });
    const out = await w.converter.convertResources([resource("ok.wasm"), resource("missing.wasm")]);
    expect(out.ok).toBe(true);
    const text = lines.join("\n");
    expect(text).toContain(`converted Wasm module http://REDACTED@127.0.0.1:${s.port}/ok.wasm`);
    expect(text).toContain(`cannot fetch Wasm module http://REDACTED@127.0.0.1:${s.port}/missing.wasm`);
    expect(text).not.toContain("s3cr3t-pw");
  });
});

describe("cache directory failures", () => {
  test("an unwritable cache directory: the error names the path and what to do; no success is counted", async () => {
    const root = tempDir();
    const dir = join(root, "data");
    writeFileSync(dir, "a file where the directory should be");
    const mod = wasmModule("no-dir");
    const s = serve(() => new Response(mod));
    const { w, registry } = conversion(dir);
    const err = await w.cache.get(`http://127.0.0.1:${s.port}/m.wasm`, opts()).catch((e: Error) => e.message);
    expect(err).toContain(`cannot write ${dir}`);
    expect(err).toContain("check the Wasm cache directory's volume");
    const fetches = await registry.getSingleMetricAsString("istio_agent_wasm_remote_fetch_count");
    expect(fetches).not.toContain('result="success"');
    expect(fetches).toContain('result="download_failure"} 1');
  });

  testRequiring(
    { root: true, tools: ["mount", "umount"], apt: ["mount"] },
    "a full cache volume: ENOSPC names the file and what to do; no temp file is left, so the next small module fits",
    async () => {
      const dir = tempDir();
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir]);
      cleanups.push(() => execFileSync("umount", ["-l", dir]));
      const big = wasmModule("big", 200);
      const bigBody = Buffer.concat([Buffer.from(big), Buffer.alloc(400 * 1024)]); // valid header, 600 KiB in all
      const small = wasmModule("small", 200);
      const s = serve((req) => new Response(new URL(req.url).pathname === "/big.wasm" ? bigBody : small));
      const { w } = conversion(dir, { maxBinaryBytes: 4 * MiB });
      const err = await w.cache.get(`http://127.0.0.1:${s.port}/big.wasm`, opts({ resourceName: "ns.big" })).catch((e: Error) => e.message);
      expect(err).toMatch(new RegExp(`^cannot write ${dir}/\\S+\\.wasm\\.tmp-\\d+: .*(ENOSPC|no space left).*; free space in the Wasm cache directory`, "i"));
      expect(filesUnder(dir)).toEqual([]);
      const path = await w.cache.get(`http://127.0.0.1:${s.port}/small.wasm`, opts({ resourceName: "ns.small" }));
      expect(path.startsWith(dir)).toBe(true);
      expect(filesUnder(dir).filter((f) => f.includes(".tmp-"))).toEqual([]);
    },
  );

  test("temp files a crashed run left (in the directory or a module's subdirectory) are removed; modules are kept", async () => {
    const dir = tempDir();
    mkdirSync(join(dir, "abc"), { recursive: true });
    writeFileSync(join(dir, "abc", "0123.wasm.tmp-77-xyz"), "half a module");
    writeFileSync(join(dir, "download-3-0.wasm.tmp-77"), "half a download");
    const mod = wasmModule("after-crash");
    const s = serve(() => new Response(mod));
    const { w } = conversion(dir);
    const path = await w.cache.get(`http://127.0.0.1:${s.port}/m.wasm`, opts());
    expect(filesUnder(dir).sort()).toEqual([path.slice(dir.length + 1)]);
    writeFileSync(join(dir, "abc", "later.wasm.tmp-78-q"), "left by a failed write");
    await w.cache.purge();
    expect(filesUnder(dir).sort()).toEqual([path.slice(dir.length + 1)]);
  });
});
