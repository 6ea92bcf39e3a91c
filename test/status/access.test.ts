import { afterEach, describe, expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import type { LifecycleControl } from "../../src/lib/interfaces.ts";
import { acceptsGzip } from "../../src/status/gzip.ts";
import { adminLocalhost, isLoopback, probeSourceAddress, useIPv6Loopback } from "../../src/status/loopback.ts";
import { LOCALHOST_ONLY, StatusServer, type StatusServerOptions } from "../../src/status/server.ts";
import { nonLoopbackIPv4 } from "../support/status-apps.ts";
import { testRequiring } from "../support/requires.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function fakeLifecycle() {
  const calls: string[] = [];
  const lc: LifecycleControl = {
    quit: () => void calls.push("quit"),
    drain: async () => void calls.push("drain"),
  };
  return { calls, lc };
}

async function started(extra: Partial<StatusServerOptions> = {}) {
  const s = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1", ...extra });
  const ac = new AbortController();
  await s.start(ac.signal);
  cleanups.push(() => {
    ac.abort();
    return s.stopped();
  });
  return s;
}

describe("loopback predicate", () => {
  const cases: [string | undefined, boolean][] = [
    ["127.0.0.1", true],
    ["127.0.0.6", true],
    ["127.255.1.2", true],
    ["::1", true],
    ["0:0:0:0:0:0:0:1", true],
    ["[::1]", true],
    ["::ffff:127.0.0.1", true],
    ["::ffff:127.0.0.6", true],
    ["10.0.0.1", false],
    ["128.0.0.1", false],
    ["::ffff:10.0.0.1", false],
    ["fe80::1", false],
    ["::", false],
    ["::2", false],
    ["localhost", false],
    ["", false],
    [undefined, false],
  ];
  for (const [addr, want] of cases) test(`${addr} -> ${want}`, () => expect(isLoopback(addr)).toBe(want));

  test("Istio's IPv4/IPv6 choice of localhost and probe source", () => {
    expect(useIPv6Loopback(true, "10.0.0.1")).toBe(true);
    expect(useIPv6Loopback(false, "10.0.0.1")).toBe(false);
    expect(useIPv6Loopback(false, "fd00::5")).toBe(true);
    expect(useIPv6Loopback(false, "fe80::5")).toBe(false);
    expect(useIPv6Loopback(false, "")).toBe(false);
    expect([adminLocalhost(false), adminLocalhost(true)]).toEqual(["127.0.0.1", "::1"]);
    expect([probeSourceAddress(false), probeSourceAddress(true)]).toEqual(["127.0.0.6", "::6"]);
  });

  test("Accept-Encoding", () => {
    expect(acceptsGzip("gzip, deflate, br")).toBe(true);
    expect(acceptsGzip("br;q=1, gzip;q=0.5")).toBe(true);
    expect(acceptsGzip("gzip;q=0")).toBe(false);
    expect(acceptsGzip("*")).toBe(true);
    expect(acceptsGzip("identity")).toBe(false);
    expect(acceptsGzip(null)).toBe(false);
  });
});

describe("/quitquitquit and /drain", () => {
  test("loopback POST: 200 OK and the lifecycle is called", async () => {
    const { calls, lc } = fakeLifecycle();
    const s = await started({ lifecycle: lc });
    for (const path of ["/drain", "/quitquitquit"]) {
      const r = await fetch(`http://127.0.0.1:${s.port()}${path}`, { method: "POST" });
      expect(r.status).toBe(200);
      expect(await r.text()).toBe("OK");
    }
    await Bun.sleep(10);
    expect(calls).toEqual(["drain", "quit"]);
  });

  test("other methods: 405; other clients: 403 (injected remote address)", async () => {
    const { calls, lc } = fakeLifecycle();
    const s = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1", lifecycle: lc });
    for (const path of ["/drain", "/quitquitquit"]) {
      const get = await s.handle(new Request(`http://x${path}`), "127.0.0.1");
      expect([get.status, await get.text()]).toEqual([405, "Method Not Allowed"]);
      const far = await s.handle(new Request(`http://x${path}`, { method: "POST" }), "10.4.5.6");
      expect([far.status, await far.text()]).toEqual([403, LOCALHOST_ONLY]);
      const mapped = await s.handle(new Request(`http://x${path}`, { method: "POST" }), "::ffff:10.4.5.6");
      expect(mapped.status).toBe(403);
    }
    await Bun.sleep(10);
    expect(calls).toEqual([]);
  });

  test("without a lifecycle: 503 saying so", async () => {
    const s = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1" });
    const r = await s.handle(new Request("http://x/quitquitquit", { method: "POST" }), "127.0.0.1");
    expect(r.status).toBe(503);
    expect(await r.text()).toContain("no Envoy lifecycle control");
  });

  const ip = nonLoopbackIPv4();
  testRequiring(
    { check: () => (ip === undefined ? "a non-loopback IPv4 address on this machine" : undefined) },
    "a real connection from a non-loopback local address is refused",
    async () => {
      const { calls, lc } = fakeLifecycle();
      const s = await started({ lifecycle: lc, hostname: "0.0.0.0", ndsz: () => ({ table: {} }) });
      for (const path of ["/quitquitquit", "/drain", "/debug/ndsz"]) {
        const r = await fetch(`http://${ip}:${s.port()}${path}`, { method: "POST" });
        expect(r.status).toBe(403);
      }
      expect(calls).toEqual([]);
      // readiness and probes stay open to everyone
      expect((await fetch(`http://${ip}:${s.port()}/healthz/ready`)).status).toBe(200);
    },
  );
});

describe("/debug endpoints", () => {
  test("/debug/ndsz: 404 {} without a table, the table as JSON with one, gzip when asked", async () => {
    let table: unknown;
    const s = await started({ ndsz: () => table });
    const url = `http://127.0.0.1:${s.port()}/debug/ndsz`;
    let r = await fetch(url);
    expect([r.status, await r.text()]).toEqual([404, "{}"]);
    table = { table: { "web.default.svc.cluster.local": { ips: ["10.0.0.1"], registry: "Kubernetes" } } };
    r = await fetch(url, { headers: { "accept-encoding": "gzip" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/json");
    expect(await r.json()).toEqual(table);
    expect((await s.handle(new Request("http://x/debug/ndsz"), "10.0.0.9")).status).toBe(403);
  });

  test("/debug/ndsz without a DNS proxy: 404 {}", async () => {
    const s = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1" });
    const r = await s.handle(new Request("http://x/debug/ndsz"), "::1");
    expect([r.status, await r.text()]).toEqual([404, "{}"]);
  });

  test("--profiling: /debug/memz (loopback only) reports memory; off: 404", async () => {
    const on = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1", profiling: true });
    const r = await on.handle(new Request("http://x/debug/memz"), "127.0.0.1");
    expect(r.status).toBe(200);
    const body = (await r.json()) as { memory: { rss: number }; heap: { heapSize: number } };
    expect(body.memory.rss).toBeGreaterThan(0);
    expect(body.heap.heapSize).toBeGreaterThan(0);
    expect((await on.handle(new Request("http://x/debug/memz"), "10.0.0.1")).status).toBe(403);
    const off = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1", profiling: false });
    expect((await off.handle(new Request("http://x/debug/memz"), "127.0.0.1")).status).toBe(404);
  });

  test("/debug/pprof/* answers not available in this build; use /debug/memz (not a bare 404)", async () => {
    const on = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1", profiling: true });
    for (const p of ["/debug/pprof", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile"]) {
      const r = await on.handle(new Request(`http://x${p}?seconds=1`), "127.0.0.1");
      expect([p, r.status]).toEqual([p, 501]);
      const body = await r.text();
      expect(body).toContain("not available in this build");
      expect(body).toContain("use /debug/memz");
    }
    expect((await on.handle(new Request("http://x/debug/pprof/heap"), "10.0.0.1")).status).toBe(403);
    // --profiling=false: Istio registers no pprof handler at all, so a plain 404.
    const off = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1", profiling: false });
    expect((await off.handle(new Request("http://x/debug/pprof/heap"), "127.0.0.1")).status).toBe(404);
  });

  test("unknown path: 404", async () => {
    const s = new StatusServer({ port: 0, log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1" });
    const r = await s.handle(new Request("http://x/nope"), "127.0.0.1");
    expect([r.status, await r.text()]).toEqual([404, "404 page not found"]);
  });
});

describe("listening", () => {
  test("all interfaces by default, IPv4 and IPv6; port 0 gives a bound port", async () => {
    const s = await started();
    expect(s.port()).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${s.port()}/healthz/ready`)).status).toBe(200);
    expect((await fetch(`http://[::1]:${s.port()}/healthz/ready`)).status).toBe(200);
  });

  test("a port in use is a clear start error", async () => {
    const s = await started({ hostname: "127.0.0.1" });
    const t = new StatusServer({ port: s.port(), hostname: "127.0.0.1", log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1" });
    await expect(t.start(new AbortController().signal)).rejects.toThrow(/status server: cannot listen on \[127\.0\.0\.1\]:\d+/);
  });

  test("stops when the signal aborts", async () => {
    const s = new StatusServer({ port: 0, hostname: "127.0.0.1", log: silentLogger(), registry: newRegistry(), probeDestination: "127.0.0.1" });
    const ac = new AbortController();
    await s.start(ac.signal);
    const port = s.port();
    ac.abort();
    await s.stopped();
    await expect(fetch(`http://127.0.0.1:${port}/healthz/ready`)).rejects.toThrow();
  });
});
