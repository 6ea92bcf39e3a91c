// Istio's pkg/wasm/httpfetcher_test.go and ssrf_test.go cases against real loopback servers, plus
// a per-request timeout, the size cap and a redirect to a name that resolves into a blocked CIDR.

import { afterEach, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { silentLogger } from "../../src/lib/log.ts";
import { HttpFetcher } from "../../src/wasm/http-fetcher.ts";
import { Scratch } from "../../src/wasm/spool.ts";
import { validateAllRealms } from "../../src/wasm/registry-auth.ts";
import { AddressGuard, parseBlockedCidrs, type Lookup } from "../../src/wasm/ssrf.ts";
import { makeTestPki } from "../support/fake-istiod.ts";
import { testRequiring } from "../support/requires.ts";
import { ModuleServer, wasmModule } from "./support.ts";

const servers: ModuleServer[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const noLookup: Lookup = async (h) => {
  throw new Error(`unexpected lookup of ${h}`);
};

/** The fetcher, reading back the file it writes (into a scratch directory removed after each test). */
function fetcher(o: { maxAttempts?: number; timeoutMs?: number; maxBytes?: number; blocked?: string[]; lookup?: Lookup } = {}) {
  const f = new HttpFetcher({
    requestTimeoutMs: o.timeoutMs ?? 15_000,
    maxAttempts: o.maxAttempts ?? 5,
    maxBytes: o.maxBytes ?? 1 << 20,
    guard: new AddressGuard(o.blocked ?? [], o.lookup ?? noLookup),
    log: silentLogger(),
    initialBackoffMs: 0.001,
  });
  const dir = mkdtempSync(join(tmpdir(), "wasm-fetch-"));
  dirs.push(dir);
  return {
    async fetch(url: string, insecure: boolean, signal: AbortSignal): Promise<Uint8Array> {
      const scratch = new Scratch(dir, "t");
      try {
        return new Uint8Array(readFileSync(await f.fetch(url, insecure, signal, scratch)));
      } finally {
        await scratch.cleanup();
      }
    },
  };
}

function server(): ModuleServer {
  const s = new ModuleServer().start();
  servers.push(s);
  return s;
}

describe("TestWasmHTTPFetch", () => {
  test("download ok", async () => {
    const s = server().route("/", () => new Response("wasm\n"));
    expect(new TextDecoder().decode(await fetcher().fetch(s.url("/"), false, AbortSignal.timeout(5000)))).toBe("wasm\n");
    expect(s.hits.get("/")).toBe(1);
  });

  test("download retry", async () => {
    const s = server().route("/", (_r, n) => (n <= 3 ? new Response("", { status: 500 }) : new Response("wasm\n")));
    expect(new TextDecoder().decode(await fetcher().fetch(s.url("/"), false, AbortSignal.timeout(5000)))).toBe("wasm\n");
    expect(s.hits.get("/")).toBe(4);
  });

  test("download max retry", async () => {
    const s = server().route("/", () => new Response("", { status: 500 }));
    await expect(fetcher().fetch(s.url("/"), false, AbortSignal.timeout(5000))).rejects.toThrow(
      "wasm module download failed after 5 attempts, last error: wasm module download request failed: status code 500",
    );
    expect(s.hits.get("/")).toBe(5);
  });

  test("download is never tried by immediate context timeout", async () => {
    const s = server().route("/", () => new Response("", { status: 500 }));
    const ac = new AbortController();
    ac.abort();
    await expect(fetcher().fetch(s.url("/"), false, ac.signal)).rejects.toThrow(
      /wasm module download failed after 1 attempts, last error: GET "[^"]+": deadline exceeded/,
    );
    expect(s.hits.get("/")).toBeUndefined();
  });

  test("non-retryable status (404, 501): one attempt", async () => {
    const s = server()
      .route("/404", () => new Response("", { status: 404 }))
      .route("/501", () => new Response("", { status: 501 }));
    await expect(fetcher().fetch(s.url("/404"), false, AbortSignal.timeout(5000))).rejects.toThrow(
      "after 1 attempts, last error: wasm module download request failed: status code 404",
    );
    await expect(fetcher().fetch(s.url("/501"), false, AbortSignal.timeout(5000))).rejects.toThrow("after 1 attempts");
    expect(s.hits.get("/501")).toBe(1);
  });

  test("a slow server: each attempt is cut at WASM_HTTP_REQUEST_TIMEOUT and retried", async () => {
    const s = server().route("/", async (_r, n) => {
      if (n <= 2) await Bun.sleep(2000);
      return new Response("wasm\n");
    });
    const t0 = performance.now();
    expect(new TextDecoder().decode(await fetcher({ timeoutMs: 150 }).fetch(s.url("/"), false, AbortSignal.timeout(10_000)))).toBe("wasm\n");
    expect(s.hits.get("/")).toBe(3);
    expect(performance.now() - t0).toBeLessThan(1900);
  });

  test("a body over ISTIO_WASM_MAX_BINARY_SIZE_BYTES is refused, declared or streamed, without retries", async () => {
    const big = new Uint8Array(4096);
    const s = server()
      .route("/declared", () => new Response(big))
      .route(
        "/streamed",
        () =>
          new Response(
            new ReadableStream({
              start(c) {
                for (let i = 0; i < 4; i++) c.enqueue(new Uint8Array(1024));
                c.close();
              },
            }),
          ),
      );
    await expect(fetcher({ maxBytes: 1000 }).fetch(s.url("/declared"), false, AbortSignal.timeout(5000))).rejects.toThrow(
      "over the limit of 1000 bytes (ISTIO_WASM_MAX_BINARY_SIZE_BYTES)",
    );
    await expect(fetcher({ maxBytes: 1000 }).fetch(s.url("/streamed"), false, AbortSignal.timeout(5000))).rejects.toThrow("exceeds the limit of 1000 bytes");
    expect(s.hits.get("/declared")).toBe(1);
  });
});

describe("TestWasmHTTPInsecureServer", () => {
  function tlsServer() {
    const dir = mkdtempSync(join(tmpdir(), "wasm-tls-"));
    dirs.push(dir);
    const pki = makeTestPki(dir, ["127.0.0.1"]);
    let hits = 0;
    const srv = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert: readFileSync(pki.serverCert, "utf8"), key: readFileSync(pki.serverKey, "utf8") },
      fetch: () => (hits++, new Response("wasm\n")),
    });
    const stop = { stop: () => srv.stop(true) } as unknown as ModuleServer;
    servers.push(stop);
    return { url: `https://127.0.0.1:${srv.port}/`, hits: () => hits };
  }

  testRequiring({ tools: ["openssl"], apt: ["openssl"] }, "download fail", async () => {
    const s = tlsServer();
    await expect(fetcher({ maxAttempts: 1 }).fetch(s.url, false, AbortSignal.timeout(5000))).rejects.toThrow(/certificate|self.signed|unable to (get|verify)/i);
    expect(s.hits()).toBe(0);
  });

  testRequiring({ tools: ["openssl"], apt: ["openssl"] }, "download ok", async () => {
    const s = tlsServer();
    expect(new TextDecoder().decode(await fetcher().fetch(s.url, true, AbortSignal.timeout(5000)))).toBe("wasm\n");
    expect(s.hits()).toBe(1);
  });
});

describe("TestWasmHTTPFetchCompressedOrTarFile", () => {
  const mod = wasmModule("boxed");
  function tarOf(): Uint8Array {
    const dir = mkdtempSync(join(tmpdir(), "wasm-tar-"));
    dirs.push(dir);
    writeFileSync(join(dir, "plugin.wasm"), mod);
    return execFileSync("tar", ["--format=ustar", "-C", dir, "-cf", "-", "plugin.wasm"]);
  }
  const cases: [string, () => Uint8Array][] = [
    ["plain wasm binary", () => mod],
    ["tarball of wasm binary", tarOf],
    ["gzipped wasm binary", () => gzipSync(mod)],
    ["gzipped tarball of wasm binary", () => gzipSync(tarOf())],
  ];
  for (const [name, body] of cases) {
    testRequiring({ tools: ["tar"], apt: ["tar"] }, name, async () => {
      const b = body();
      const s = server().route("/", () => new Response(b));
      expect(Buffer.from(await fetcher().fetch(s.url("/"), false, AbortSignal.timeout(5000))).equals(Buffer.from(mod))).toBe(true);
    });
  }
});

describe("SSRF guard (ssrf_test.go)", () => {
  test("TestWasmBlockedIP", () => {
    const g = new AddressGuard([], noLookup);
    const cases: [string, boolean][] = [
      ["169.254.169.254", true],
      ["fe80::1", true],
      ["100.100.100.200", true],
      ["fd00:ec2::230", true],
      ["10.0.0.1", false],
      ["127.0.0.1", false],
      ["8.8.8.8", false],
    ];
    for (const [ip, blocked] of cases) expect([ip, g.reason(ip) !== undefined]).toEqual([ip, blocked]);
  });

  test("TestWasmBlockedIPHonorsConfiguredCIDRs", () => {
    const g = new AddressGuard(parseBlockedCidrs("10.0.0.0/8").cidrs, noLookup);
    expect(g.reason("10.1.2.3")).toBe("connection blocked: resolved IP 10.1.2.3 is in blocked CIDR range 10.0.0.0/8");
    expect(g.reason("192.168.1.1")).toBeUndefined();
  });

  test("BLOCKED_CIDRS_IN_WASM_FETCH: a bad entry is named and skipped, the others apply (as Istio)", () => {
    expect(parseBlockedCidrs("10.0.0.0/8, nonsense,10.0.0.0/33")).toEqual({
      cidrs: ["10.0.0.0/8"],
      problems: [
        'BLOCKED_CIDRS_IN_WASM_FETCH: "nonsense" is not a CIDR (want e.g. 10.0.0.0/8)',
        'BLOCKED_CIDRS_IN_WASM_FETCH: "10.0.0.0/33" is not a CIDR (want e.g. 10.0.0.0/8)',
      ],
    });
    expect(parseBlockedCidrs(" 10.0.0.0/8 ,, fd00::/8 ").cidrs).toEqual(["10.0.0.0/8", "fd00::/8"]);
  });

  test("TestWasmFetchBlocksRedirectToBlockedHost", async () => {
    const target = new ModuleServer().start("127.0.0.2").route("/", () => new Response("should never be reached"));
    servers.push(target);
    const redirector = server().route("/", () => Response.redirect(target.url("/"), 302));
    await expect(fetcher({ maxAttempts: 1, blocked: ["127.0.0.2/32"] }).fetch(redirector.url("/"), false, AbortSignal.timeout(5000))).rejects.toThrow(
      "connection blocked: resolved IP 127.0.0.2 is in blocked CIDR range 127.0.0.2/32",
    );
    expect(target.hits.get("/")).toBeUndefined();
    expect(redirector.hits.get("/")).toBe(1);
  });

  test("a redirect to a host NAME that resolves into a blocked CIDR is refused after resolution", async () => {
    const target = new ModuleServer().start("127.0.0.3").route("/m.wasm", () => new Response("never"));
    servers.push(target);
    const redirector = server().route("/", () => Response.redirect(`http://modules.internal.test:${target.port}/m.wasm`, 302));
    const lookup: Lookup = async (h) => (h === "modules.internal.test" ? [{ address: "127.0.0.3", family: 4 }] : []);
    await expect(fetcher({ blocked: ["127.0.0.3/32"], lookup }).fetch(redirector.url("/"), false, AbortSignal.timeout(5000))).rejects.toThrow(
      "resolved IP 127.0.0.3 is in blocked CIDR range 127.0.0.3/32 (host modules.internal.test)",
    );
    expect(target.hits.get("/m.wasm")).toBeUndefined();
  });

  test("a name resolving to the checked address is dialled at that address (Host header kept)", async () => {
    const mod = wasmModule("by-name");
    let host = "";
    const s = server().route("/m.wasm", (req) => ((host = req.headers.get("host") ?? ""), new Response(mod)));
    const lookup: Lookup = async () => [{ address: "127.0.0.1", family: 4 }];
    const b = await fetcher({ lookup }).fetch(`http://modules.example.test:${s.port}/m.wasm`, false, AbortSignal.timeout(5000));
    expect(Buffer.from(b).equals(Buffer.from(mod))).toBe(true);
    expect(host).toBe(`modules.example.test:${s.port}`);
  });
});

describe("TestValidateAllRealms", () => {
  const cases: [string, string, boolean][] = [
    ["valid https realm", `Bearer realm="https://auth.example.com/token",service="registry.example.com"`, false],
    ["valid http realm", `Bearer realm="http://auth.example.com/token",service="registry.example.com"`, false],
    ["cloud metadata SSRF", `Bearer realm="http://169.254.169.254/latest/meta-data/",service="evil.com"`, true],
    ["link-local IP", `Bearer realm="http://169.254.1.1/foo",service="evil.com"`, true],
    ["gcp metadata SSRF", `Bearer realm="http://metadata.google.internal/computeMetadata/v1/",service="evil.com"`, true],
    ["localhost SSRF", `Bearer realm="http://localhost:8080/admin",service="evil.com"`, true],
    ["loopback SSRF", `Bearer realm="http://127.0.0.1/api",service="evil.com"`, true],
    ["loopback range", `Bearer realm="http://127.0.0.5/api",service="evil.com"`, true],
    ["file scheme", `Bearer realm="file:///etc/passwd",service="evil.com"`, true],
    ["gopher scheme", `Bearer realm="gopher://internal:9000/_GET",service="evil.com"`, true],
    ["dict scheme", `Bearer realm="dict://redis:6379/INFO",service="evil.com"`, true],
    ["private IP 10.x", `Bearer realm="http://10.0.0.1/token",service="evil.com"`, true],
    ["private IP 192.168", `Bearer realm="http://192.168.1.1/token",service="evil.com"`, true],
    ["private IP 172.16-31", `Bearer realm="http://172.16.0.1/token",service="evil.com"`, true],
    ["ipv6 loopback", `Bearer realm="http://[::1]/token",service="evil.com"`, true],
    ["ipv6 link-local", `Bearer realm="http://[fe80::1]/token",service="evil.com"`, true],
    ["aws ipv6 metadata", `Bearer realm="http://[fd00:ec2::254]/latest/meta-data/",service="evil.com"`, true],
    ["ipv6 unique local", `Bearer realm="http://[fc00::1]/token",service="evil.com"`, true],
    ["no realm param", `Bearer service="registry.example.com"`, false],
    ["basic auth no realm", `Basic charset="UTF-8"`, false],
    ["multiple challenges safe then malicious", `Bearer realm="https://safe.com/token", Basic realm="http://169.254.169.254/"`, true],
    ["multiple challenges malicious first", `Basic realm="http://localhost/", Bearer realm="https://safe.com/token"`, true],
    ["multiple challenges both safe", `Bearer realm="https://auth.example.com/", Basic realm="https://other.example.com/"`, false],
    // Spellings the URL parser normalises (issue 34): [::ffff:127.0.0.1] becomes [::ffff:7f00:1].
    ["ipv4-mapped ipv6 loopback", `Bearer realm="http://[::ffff:127.0.0.1]:5000/token"`, true],
    ["ipv4-mapped ipv6 private, hex", `Bearer realm="http://[::ffff:a00:1]/token"`, true],
    ["ipv4-mapped ipv6 link-local", `Bearer realm="http://[::ffff:169.254.169.254]/latest"`, true],
    ["unspecified ipv4", `Bearer realm="http://0.0.0.0:5000/token"`, true],
    ["unspecified ipv6", `Bearer realm="http://[::]:5000/token"`, true],
    ["decimal loopback", `Bearer realm="http://2130706433/token"`, true],
    ["localhost with a trailing dot", `Bearer realm="http://localhost.:5000/token"`, true],
    ["a name under localhost", `Bearer realm="http://auth.localhost/token"`, true],
    ["ipv4-mapped ipv6 public", `Bearer realm="https://[::ffff:8.8.8.8]/token"`, false],
  ];
  for (const [name, header, wantErr] of cases) {
    test(name, () => {
      if (wantErr) expect(() => validateAllRealms(header)).toThrow();
      else expect(() => validateAllRealms(header)).not.toThrow();
    });
  }
});
