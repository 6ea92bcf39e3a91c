// Bearer-token registry auth (Docker Hub, GHCR, GCR style): a 401 with a Bearer challenge sends
// the fetcher to the realm (Basic credentials from the pull secret, service and scope) for a
// token, then the registry is asked again with it. The realm must pass Istio's realm check, so it
// names a host (resolved to loopback by the test's lookup), not a loopback literal.

import { afterEach, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { silentLogger } from "../../src/lib/log.ts";
import { OciFetcher } from "../../src/wasm/oci.ts";
import { Scratch } from "../../src/wasm/spool.ts";
import { AddressGuard } from "../../src/wasm/ssrf.ts";
import { wasmModule } from "./support.ts";

const stops: (() => void)[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
});

const digest = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** A tar holding one file, written by hand in ustar layout (header + padded data + end blocks). */
function tarOne(name: string, data: Uint8Array): Uint8Array {
  const h = new Uint8Array(512);
  const put = (s: string, at: number) => h.set(new TextEncoder().encode(s), at);
  put(name, 0);
  put("0000644\0", 100);
  put("0000000\0", 108);
  put("0000000\0", 116);
  put(data.length.toString(8).padStart(11, "0") + "\0", 124);
  put("00000000000\0", 136);
  put("0", 156);
  put("ustar\0", 257);
  put("00", 263);
  put("        ", 148);
  const sum = h.reduce((a, b) => a + b, 0);
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148);
  const padded = new Uint8Array(Math.ceil(data.length / 512) * 512);
  padded.set(data);
  return Uint8Array.from([...h, ...padded, ...new Uint8Array(1024)]);
}

test("Bearer challenge: token from the realm with the secret's Basic credentials, service and pull scope", async () => {
  const mod = wasmModule("bearer", 200);
  const layer = gzipSync(tarOne("plugin.wasm", mod));
  const config = new TextEncoder().encode("{}");
  const manifest = new TextEncoder().encode(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: digest(config), size: config.length },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: digest(layer), size: layer.length }],
    }),
  );
  const tokenRequests: URL[] = [];
  const auth = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      tokenRequests.push(new URL(req.url));
      if (req.headers.get("authorization") !== `Basic ${Buffer.from("bot:pw").toString("base64")}`) return new Response("no", { status: 401 });
      return Response.json({ token: "tok-123" });
    },
  });
  stops.push(() => auth.stop(true));
  const registry = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.headers.get("authorization") !== "Bearer tok-123") {
        return new Response("", {
          status: 401,
          headers: { "www-authenticate": `Bearer realm="http://auth.registry.test:${auth.port}/token",service="registry.test"` },
        });
      }
      if (path === "/v2/team/plugin/manifests/v1") return new Response(manifest, { headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" } });
      if (path === `/v2/team/plugin/blobs/${digest(layer)}`) return new Response(layer);
      return new Response("", { status: 404 });
    },
  });
  stops.push(() => registry.stop(true));
  const guard = new AddressGuard([], async (h) => (h === "auth.registry.test" ? [{ address: "127.0.0.1", family: 4 }] : []));
  const f = new OciFetcher({ guard, maxBytes: 1 << 20, log: silentLogger() });
  const host = `127.0.0.1:${registry.port}`;
  const secret = new TextEncoder().encode(JSON.stringify({ auths: { [host]: { username: "bot", password: "pw" } } }));
  const prepared = await f.prepareFetch(`${host}/team/plugin:v1`, { insecure: false, pullSecret: secret, signal: AbortSignal.timeout(5000) });
  expect(prepared.digest).toBe(digest(manifest).slice(7));
  const scratchDir = mkdtempSync(join(tmpdir(), "wasm-oci-"));
  stops.push(() => rmSync(scratchDir, { recursive: true, force: true }));
  expect(readFileSync(await prepared.fetchBinary(new Scratch(scratchDir, "t"))).equals(Buffer.from(mod))).toBe(true);
  expect(tokenRequests.length).toBe(1);
  expect(tokenRequests[0]!.searchParams.get("service")).toBe("registry.test");
  expect(tokenRequests[0]!.searchParams.get("scope")).toBe("repository:team/plugin:pull");
});

test("a Bearer realm on a loopback literal is refused before anything is sent to it (Istio's realm check)", async () => {
  let realmHits = 0;
  const realm = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (realmHits++, Response.json({ token: "t" })) });
  stops.push(() => realm.stop(true));
  const registry = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response("", { status: 401, headers: { "www-authenticate": `Bearer realm="http://127.0.0.1:${realm.port}/token"` } }),
  });
  stops.push(() => registry.stop(true));
  const f = new OciFetcher({ guard: new AddressGuard([], async () => []), maxBytes: 1 << 20, log: silentLogger() });
  await expect(f.prepareFetch(`127.0.0.1:${registry.port}/a/b:v1`, { insecure: false, signal: AbortSignal.timeout(5000) })).rejects.toThrow(
    "rejected unsafe bearer realm: realm targets private/loopback/link-local IP",
  );
  expect(realmHits).toBe(0);
});
