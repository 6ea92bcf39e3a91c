// The status port served by the native responder (native/statusresponder.c through
// src/status/nativelisten.ts), built here with gcc as build.ts builds it: readiness answered by
// the C thread while the agent's event loop is held, but only once the main thread's own check
// said ready and only until the next change; every other request reaching the main thread's
// handler with the client's address; odd requests left to the main thread; and the choice
// between the native responder and the Worker (src/status/listen.ts).
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildResponder } from "../../native/build-responder.ts";
import { loadStatusResponder, type StatusResponderLibrary } from "../../native/statusresponder.ts";
import type { LifecycleControl } from "../../src/lib/interfaces.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { statusPortListen } from "../../src/status/listen.ts";
import { nativeListen } from "../../src/status/nativelisten.ts";
import { StatusServer, type StatusListen, type StatusServerOptions } from "../../src/status/server.ts";
import { curlWhileHeld } from "../support/curl-while-held.ts";
import { describeRequiring } from "../support/requires.ts";
import { nonLoopbackIPv4 } from "../support/status-apps.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The library as build.ts builds it, loaded as the agent loads it (memfd, /proc/self/fd). */
function library(): StatusResponderLibrary {
  const built = buildResponder();
  if ("error" in built) throw new Error(built.error);
  const lib = loadStatusResponder(readFileSync(built.file));
  if (typeof lib === "string") throw new Error(lib);
  return lib;
}

/** The responder under the listener, kept by a wrapping library (for its counts). */
function counted(lib: StatusResponderLibrary) {
  const started: ReturnType<StatusResponderLibrary["start"]>[] = [];
  const wrapped: StatusResponderLibrary = {
    start: (h, p, b) => {
      const r = lib.start(h, p, b);
      started.push(r);
      return r;
    },
  };
  return { wrapped, counts: () => started[0]!.counts() };
}

async function started(lib: StatusResponderLibrary, extra: Partial<StatusServerOptions> = {}) {
  const ac = new AbortController();
  const s = new StatusServer({
    port: 0,
    hostname: "127.0.0.1",
    log: silentLogger(),
    registry: newRegistry(),
    probeDestination: "127.0.0.1",
    listen: nativeListen(() => undefined, lib),
    shutdown: ac.signal,
    ...extra,
  });
  await s.start(ac.signal);
  cleanups.push(() => {
    if (!ac.signal.aborted) ac.abort();
    return s.stopped();
  });
  return { s, ac, url: (path: string) => `http://127.0.0.1:${s.port()}${path}` };
}

/**
 * GET `url` on a connection of its own, as the kubelet probes (a connection once relayed to the
 * main thread stays relayed, and fetch may reuse one): status and body of the one answer.
 */
async function get(url: string) {
  const u = new URL(url);
  const raw = await rawExchange(Number(u.port), `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, 5000);
  const cut = raw.indexOf("\r\n\r\n");
  const head = raw.slice(0, cut);
  let body = raw.slice(cut + 4);
  if (/^transfer-encoding:\s*chunked/im.test(head)) {
    let out = "";
    for (let rest = body; ;) {
      const eol = rest.indexOf("\r\n");
      const n = parseInt(rest.slice(0, eol), 16);
      if (!n) break;
      out += rest.slice(eol + 2, eol + 2 + n);
      rest = rest.slice(eol + 2 + n + 2);
    }
    body = out;
  }
  return { status: Number(head.split(" ")[1]), body: Buffer.from(body, "latin1").toString("utf8") };
}

/** Writes `raw` on one connection and reads until the server closes it (or `ms`). */
function rawExchange(port: number, raw: string, ms = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let out = "";
    const timer = setTimeout(() => (sock.destroy(), resolve(out)), ms);
    sock.on("data", (d) => (out += d.toString("latin1")));
    sock.on("error", (e) => (clearTimeout(timer), reject(e)));
    sock.on("close", () => (clearTimeout(timer), resolve(out)));
    sock.write(raw);
  });
}

const statusLines = (raw: string) => raw.split("\r\n").filter((l) => l.startsWith("HTTP/1.1 "));

describeRequiring({ tools: ["gcc", "curl"], apt: ["gcc", "curl"] }, "native status responder", () => {
  test("answers /healthz/ready while the event loop is held, once the main thread's check said ready", async () => {
    const { wrapped, counts } = counted(library());
    const readiness = new Readiness();
    const dns = readiness.block("dns table received");
    const { url } = await started(wrapped, { readiness });
    // Not ready: the main thread answers (503 naming the condition), nothing is answered natively.
    const first = await get(url("/healthz/ready"));
    expect(first.status).toBe(503);
    expect(first.body).toMatch(/^not ready: 1 pending\ndns table received: pending for \d+\.\ds\n$/);
    dns.clear();
    // The first 200 comes from the main thread's own check; it arms the native answer.
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect(counts().answered).toBe(0);
    const held = await curlWhileHeld(url("/healthz/ready"), 1500);
    expect(held.code).toBe("200");
    expect(held.body).toBe("");
    expect(held.seconds).toBeLessThan(1.0);
    expect(counts().answered).toBe(1);
  });

  test("a readiness change withdraws the native answer at once: the next probe is the main thread's", async () => {
    const readiness = new Readiness();
    const { wrapped, counts } = counted(library());
    const { url } = await started(wrapped, { readiness });
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect(counts().answered).toBe(1);
    readiness.block("dns table received");
    const after = await get(url("/healthz/ready"));
    expect(after.status).toBe(503);
    expect(after.body).toContain("dns table received: pending");
    expect(counts().answered).toBe(1);
  });

  test("an Envoy restart withdraws it too: Envoy's readiness is asked again", async () => {
    const envoy = { cds: 1 };
    const admin = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) =>
        new URL(req.url).searchParams.get("filter")?.includes("update_success")
          ? new Response(`cluster_manager.cds.update_success: ${envoy.cds}\nlistener_manager.lds.update_success: ${envoy.cds}\n`)
          : new Response("server.state: 0\nlistener_manager.workers_started: 1\n"),
    });
    cleanups.push(() => admin.stop(true));
    const { wrapped, counts } = counted(library());
    const envoyOpts = { adminHost: "127.0.0.1", adminPort: admin.port!, prometheusHost: "127.0.0.1", prometheusPort: 1, mergeStats: false };
    const { s, url } = await started(wrapped, { envoy: envoyOpts });
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect(counts().answered).toBe(1);
    envoy.cds = 0;
    s.resetEnvoyReadiness();
    const after = await get(url("/healthz/ready"));
    expect(after.status).toBe(503);
    expect(after.body).toContain("config not received from XDS server");
  });

  test("a probe the main thread answers ends its connection, so a keep-alive client's next probe is native", async () => {
    const readiness = new Readiness();
    const dns = readiness.block("dns table received");
    const { wrapped, counts } = counted(library());
    const { s } = await started(wrapped, { readiness });
    // Two pipelined probes while not ready: the main thread answers the first and the connection
    // ends (before rawExchange's 3 s); the second is never read (a client sends it again).
    const twice = "GET /healthz/ready HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2);
    const t0 = performance.now();
    const first = await rawExchange(s.port(), twice);
    expect(statusLines(first)).toEqual(["HTTP/1.1 503 Service Unavailable"]);
    expect(performance.now() - t0).toBeLessThan(2500);
    dns.clear();
    const armed = await rawExchange(s.port(), twice);
    expect(statusLines(armed)).toEqual(["HTTP/1.1 200 OK"]);
    expect(counts()).toMatchObject({ answered: 0, forwarded: 2 });
    const native = await rawExchange(s.port(), twice, 500);
    expect(statusLines(native)).toEqual(["HTTP/1.1 200 OK", "HTTP/1.1 200 OK"]);
    expect(counts()).toMatchObject({ answered: 2, forwarded: 2 });
  });

  test("the gRPC bootstrap's certificate files are checked on every native answer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "native-grpc-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const files = ["cert.pem", "key.pem", "root.pem"].map((f) => join(dir, f));
    for (const f of files) writeFileSync(f, "x");
    const bootstrap = {
      xds_servers: [{ server_uri: "unix:///x" }],
      certificate_providers: {
        default: { plugin_name: "file_watcher", config: { certificate_file: files[0], private_key_file: files[1], ca_certificate_file: files[2] } },
      },
    };
    writeFileSync(join(dir, "bootstrap.json"), JSON.stringify(bootstrap));
    const { wrapped, counts } = counted(library());
    const { url } = await started(wrapped, { grpcBootstrapPath: join(dir, "bootstrap.json") });
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    expect(counts().answered).toBe(1);
    rmSync(files[1]!);
    const gone = await get(url("/healthz/ready"));
    expect(gone.status).toBe(503);
    expect(gone.body).toContain(`${files[1]} does not exist`);
    expect(counts().answered).toBe(1);
  });

  test("every other request reaches the main thread with the client's address", async () => {
    const calls: string[] = [];
    const lifecycle: LifecycleControl = { quit: () => void calls.push("quit"), drain: async () => void calls.push("drain") };
    const { s } = await started(library(), { lifecycle, hostname: "0.0.0.0" });
    const loop = await fetch(`http://127.0.0.1:${s.port()}/drain`, { method: "POST", keepalive: false });
    expect([loop.status, await loop.text()]).toEqual([200, "OK"]);
    expect(calls).toEqual(["drain"]);
    const metrics = await fetch(`http://127.0.0.1:${s.port()}/stats/prometheus`, { keepalive: false });
    expect(metrics.status).toBe(200);
    const ip = nonLoopbackIPv4();
    if (ip !== undefined) {
      const far = await fetch(`http://${ip}:${s.port()}/drain`, { method: "POST", keepalive: false });
      expect([far.status, await far.text()]).toEqual([403, "Only requests from localhost are allowed"]);
      expect(calls).toEqual(["drain"]);
    }
  });

  test("only a plain GET is answered natively: a body, pipelining and HTTP/1.0 as a server must", async () => {
    const { wrapped, counts } = counted(library());
    const { s, url } = await started(wrapped);
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    const port = s.port();
    // Two pipelined probes, then one that closes: three answers on one connection, all native.
    const piped = await rawExchange(
      port,
      "GET /healthz/ready HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz/ready?x=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    expect(statusLines(piped)).toEqual(["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK"]);
    expect(counts().answered).toBe(3);
    // HTTP/1.0 without keep-alive: one answer, then the connection ends (the read returns before its 3 s).
    const t0 = performance.now();
    const old = await rawExchange(port, "GET /healthz/ready HTTP/1.0\r\n\r\n");
    expect(statusLines(old)).toEqual(["HTTP/1.1 200 OK"]);
    expect(performance.now() - t0).toBeLessThan(2500);
    expect(counts().answered).toBe(4);
    // With a body, a second Host or an obs-folded line, the main thread decides (Bun's parser).
    const forwarded0 = counts().forwarded;
    for (const odd of [
      "GET /healthz/ready HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nab",
      "GET /healthz/ready HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
      "GET /healthz/ready HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\nConnection: close\r\n\r\n",
      "GET /healthz/ready#f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]) {
      await rawExchange(port, odd);
    }
    expect(counts().answered).toBe(4);
    expect(counts().forwarded).toBe(forwarded0 + 4);
  });

  test("stop closes the port and the connections open on it", async () => {
    const { s, ac } = await started(library());
    const port = s.port();
    expect((await get(`http://127.0.0.1:${port}/healthz/ready`)).status).toBe(200);
    const idle = net.connect(port, "127.0.0.1");
    await new Promise((r) => idle.once("connect", r));
    const closed = new Promise((r) => idle.once("close", r));
    ac.abort();
    await s.stopped();
    await closed;
    await expect(fetch(`http://127.0.0.1:${port}/healthz/ready`)).rejects.toThrow();
  });
});

describeRequiring({ tools: ["gcc"], apt: ["gcc"] }, "loading the native library", () => {
  test("without /proc/self/fd it is loaded from a file in the temporary directory, removed at once; without either, both reasons", async () => {
    const built = buildResponder();
    if ("error" in built) throw new Error(built.error);
    const bytes = readFileSync(built.file);
    const dir = mkdtempSync(join(tmpdir(), "native-load-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const lib = loadStatusResponder(bytes, { procFd: join(dir, "no-proc"), tempDir: dir });
    if (typeof lib === "string") throw new Error(lib);
    expect(readdirSync(dir)).toEqual([]);
    const backend = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("main") });
    cleanups.push(() => backend.stop(true));
    const r = lib.start("127.0.0.1", 0, backend.port!);
    cleanups.push(() => r.stop());
    r.ready([]);
    expect(await get(`http://127.0.0.1:${r.port()}/healthz/ready`)).toEqual({ status: 200, body: "" });
    expect(r.counts().answered).toBe(1);
    const none = loadStatusResponder(bytes, { procFd: join(dir, "no-proc"), tempDir: join(dir, "no-tmp") });
    expect(none).toStartWith("cannot load the native status responder: from ");
    expect(none).toContain(join(dir, "no-proc"));
    expect(none).toContain(join(dir, "no-tmp"));
  });
});

describe("which thread serves the port (src/status/listen.ts)", () => {
  function recorder() {
    const used: string[] = [];
    const fake =
      (name: string): StatusListen =>
      async () => {
        used.push(name);
        return { port: 1, hostname: "x", stop: async () => undefined };
      };
    return { used, fake };
  }
  const feed = (apps: boolean, logs: string[]) => ({
    ...(apps ? { apps: { probers: "{}", destination: "127.0.0.1" } } : {}),
    processStartMs: 0,
    conditions: () => ({ blockers: [], warnings: [] }),
    log: (_: "info" | "warn", m: string) => void logs.push(m),
    firstReady: () => undefined,
  });
  const handle = async () => new Response("");

  test("app probes keep the Worker (it runs them off the main loop); an unloadable library or a host name too, each said once", async () => {
    const { used, fake } = recorder();
    const logs: string[] = [];
    let loads = 0;
    const listen = statusPortListen(() => undefined, {
      worker: fake("worker"),
      library: async () => (loads++, "this build carries no native status responder for linux-arm64 (statusresponder-arm64.so)"),
    });
    await listen("::", 0, handle, feed(true, logs));
    expect(loads).toBe(0);
    await listen("::", 0, handle, feed(false, logs));
    await listen("localhost", 0, handle, feed(false, logs));
    expect(used).toEqual(["worker", "worker", "worker"]);
    expect(loads).toBe(1);
    expect(logs).toEqual([
      "status port: served from a Worker thread, which answers the app probes while the agent is busy",
      "status port: served from a Worker thread: this build carries no native status responder for linux-arm64 (statusresponder-arm64.so)",
      "status port: served from a Worker thread: the native responder binds address literals only, not localhost",
    ]);
  });
});
