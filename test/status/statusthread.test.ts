// The status port served from a thread of its own (src/status/statusthread.ts): it answers
// /healthz/ready while the agent's event loop is blocked, its readiness follows every change the
// main thread makes (conditions raised, cleared, failed; Envoy restarted; shutdown), and every
// other request reaches the main thread's handler with the client's address and comes back whole.
import { afterEach, describe, expect, test } from "bun:test";
import { memoryLogger, silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import type { LifecycleControl } from "../../src/lib/interfaces.ts";
import { StatusServer, type ReadinessFeed, type StatusServerOptions } from "../../src/status/server.ts";
import { threadListen } from "../../src/status/statusthread.ts";
import { curlWhileHeld } from "../support/curl-while-held.ts";
import { testRequiring } from "../support/requires.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function started(extra: Partial<StatusServerOptions> = {}, errors: string[] = []) {
  const ac = new AbortController();
  const s = new StatusServer({
    port: 0,
    hostname: "127.0.0.1",
    log: silentLogger(),
    registry: newRegistry(),
    probeDestination: "127.0.0.1",
    listen: threadListen((m) => errors.push(m)),
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

async function get(url: string, init?: RequestInit) {
  const r = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
  return { status: r.status, body: await r.text(), headers: r.headers };
}

/** Polls until `url` answers `status` (a change made on the main thread reaches the thread as a message). */
async function untilStatus(url: string, status: number, ms = 3000) {
  const deadline = performance.now() + ms;
  let last = await get(url);
  while (last.status !== status && performance.now() < deadline) {
    await Bun.sleep(10);
    last = await get(url);
  }
  expect(last.status).toBe(status);
  return last;
}

/** A fake Envoy admin answering the two stats queries Istio's readiness check makes. */
function fakeEnvoyAdmin(state: { cds: number }) {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) => {
      const filter = new URL(req.url).searchParams.get("filter") ?? "";
      if (filter.includes("update_success"))
        return new Response(`cluster_manager.cds.update_success: ${state.cds}\nlistener_manager.lds.update_success: ${state.cds}\n`);
      return new Response("server.state: 0\nlistener_manager.workers_started: 1\n");
    },
  });
  cleanups.push(() => server.stop(true));
  return server.port!;
}

describe("status thread: readiness", () => {
  test("follows the agent's conditions: raised, failed, cleared", async () => {
    const readiness = new Readiness();
    const dns = readiness.block("dns table received");
    const { url } = await started({ readiness });
    const first = await get(url("/healthz/ready"));
    expect(first.status).toBe(503);
    expect(first.body).toMatch(/^not ready: 1 pending\ndns table received: pending for \d+\.\ds\n$/);
    dns.fail("no table from istiod yet");
    const deadline = performance.now() + 3000;
    let body = "";
    while (performance.now() < deadline && !body.includes("no table")) body = (await get(url("/healthz/ready"))).body;
    expect(body).toBe("not ready: 1 pending\ndns table received: no table from istiod yet\n");
    dns.clear();
    const ok = await untilStatus(url("/healthz/ready"), 200);
    expect(ok.body).toBe("");
    readiness.block("terminating").fail("SIGTERM");
    expect((await untilStatus(url("/healthz/ready"), 503)).body).toBe("not ready: 1 pending\nterminating: SIGTERM\n");
  });

  test("Envoy's readiness: queried from the thread, cached once ready, forgotten when Envoy restarts", async () => {
    const envoy = { cds: 0 };
    const adminPort = fakeEnvoyAdmin(envoy);
    const { s, url } = await started({
      envoy: { adminHost: "127.0.0.1", adminPort, prometheusHost: "127.0.0.1", prometheusPort: 1, mergeStats: false },
    });
    const pending = await get(url("/healthz/ready"));
    expect(pending.status).toBe(503);
    expect(pending.body).toContain("envoy: config not received from XDS server (is Istiod running?): cds updates: 0 successful");
    envoy.cds = 1;
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    envoy.cds = 0; // cached: Istio does not ask again within one Envoy
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    s.resetEnvoyReadiness();
    expect((await untilStatus(url("/healthz/ready"), 503)).body).toContain("cds updates: 0 successful");
  });

  test("shutdown: 'server is terminated' with the reason, as the in-loop server says", async () => {
    const adminPort = fakeEnvoyAdmin({ cds: 1 });
    // The agent's shutdown signal, apart from the one that stops the server: the answer in between is seen.
    const shutdown = new AbortController();
    const s2 = await started({
      envoy: { adminHost: "127.0.0.1", adminPort, prometheusHost: "127.0.0.1", prometheusPort: 1, mergeStats: false },
      shutdown: shutdown.signal,
    });
    expect((await get(s2.url("/healthz/ready"))).status).toBe(200);
    shutdown.abort(new Error("received SIGTERM"));
    expect((await untilStatus(s2.url("/healthz/ready"), 503)).body).toBe("not ready: 1 pending\nenvoy: server is terminated: received SIGTERM\n");
  });

  test("the first ready answer is logged on the main thread and sets istio_agent_startup_duration_seconds", async () => {
    const mem = memoryLogger();
    const registry = newRegistry();
    const { url } = await started({ log: mem.log, registry, processStartMs: Date.now() - 1500 });
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    // The thread's log lines arrive as messages; the metrics request after them is the sentinel.
    const metrics = await get(url("/stats/prometheus"));
    expect(metrics.body).toMatch(/^istio_agent_startup_duration_seconds 1\.\d+$/m);
    expect(mem.lines.some((l) => /\tinfo\tReadiness succeeded in 1\.\d+s$/.test(l))).toBe(true);
    expect(mem.lines.filter((l) => l.endsWith("Envoy proxy is ready")).length).toBe(1);
  });

  test("a change made while the thread is still binding is not lost", async () => {
    const readiness = new Readiness();
    const ac = new AbortController();
    const s = new StatusServer({
      port: 0,
      hostname: "127.0.0.1",
      log: silentLogger(),
      registry: newRegistry(),
      probeDestination: "127.0.0.1",
      readiness,
      listen: threadListen(() => {}),
    });
    const starting = s.start(ac.signal);
    readiness.block("dns table received").fail("raised before the thread was listening");
    await starting;
    cleanups.push(() => {
      ac.abort();
      return s.stopped();
    });
    const r = await get(`http://127.0.0.1:${s.port()}/healthz/ready`);
    expect([r.status, r.body]).toEqual([503, "not ready: 1 pending\ndns table received: raised before the thread was listening\n"]);
  });

  testRequiring({ tools: ["curl"], apt: ["curl"] }, "answered while the agent's event loop is blocked for 1.5 s", async () => {
    const { url } = await started();
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    // curl (another process) probes while this thread is busy; an in-loop server would answer after the loop frees.
    const { code, seconds } = await curlWhileHeld(url("/healthz/ready"));
    expect(code).toBe("200");
    expect(seconds).toBeLessThan(0.5);
  });
});

describe("status thread: everything else goes to the main thread", () => {
  function fakeLifecycle() {
    const calls: string[] = [];
    const lc: LifecycleControl = { quit: () => void calls.push("quit"), drain: async () => void calls.push("drain") };
    return { calls, lc };
  }

  test("routes, methods, status codes and the client's address (loopback-only endpoints)", async () => {
    const { calls, lc } = fakeLifecycle();
    const { url } = await started({ lifecycle: lc, ndsz: () => ({ "a.demo": ["10.0.0.1"] }) });
    const notFound = await get(url("/nope"));
    expect([notFound.status, notFound.body, notFound.headers.get("content-type")]).toEqual([404, "404 page not found", "text/plain; charset=utf-8"]);
    expect((await get(url("/quitquitquit"))).status).toBe(405);
    const drain = await get(url("/drain"), { method: "POST" });
    expect([drain.status, drain.body]).toEqual([200, "OK"]);
    expect(calls).toEqual(["drain"]);
    const ndsz = await get(url("/debug/ndsz"), { headers: { "accept-encoding": "identity" } });
    expect([ndsz.status, JSON.parse(ndsz.body)]).toEqual([200, { "a.demo": ["10.0.0.1"] }]);
    expect(ndsz.headers.get("content-length")).toBe(String(Buffer.byteLength(ndsz.body)));
  });

  test("a response in several chunks is streamed through whole; a one-chunk response keeps its length", async () => {
    const feed: ReadinessFeed = { processStartMs: 0, conditions: () => ({ blockers: [], warnings: [] }), log: () => {}, firstReady: () => {} };
    const chunk = (i: number) => new TextEncoder().encode(`chunk ${i} ${"x".repeat(10_000)}\n`);
    const listener = await threadListen(() => {})(
      "127.0.0.1",
      0,
      async (req) => {
        if (new URL(req.url).pathname === "/one") return new Response("one body", { headers: { "x-test": "1" } });
        let i = 0;
        const body = new ReadableStream<Uint8Array>({
          async pull(c) {
            await Bun.sleep(1);
            if (i < 50) c.enqueue(chunk(i++));
            else c.close();
          },
        });
        return new Response(body, { status: 203 });
      },
      feed,
    );
    cleanups.push(() => listener.stop());
    const streamed = await get(`http://127.0.0.1:${listener.port}/many`);
    expect(streamed.status).toBe(203);
    expect(streamed.body).toBe(Array.from({ length: 50 }, (_, i) => `chunk ${i} ${"x".repeat(10_000)}\n`).join(""));
    expect(streamed.headers.get("transfer-encoding")).toBe("chunked");
    const one = await get(`http://127.0.0.1:${listener.port}/one`);
    expect([one.status, one.body, one.headers.get("x-test"), one.headers.get("content-length")]).toEqual([200, "one body", "1", "8"]);
  });

  test("a client that goes away mid-stream costs the thread nothing: the next request is answered", async () => {
    const feed: ReadinessFeed = { processStartMs: 0, conditions: () => ({ blockers: [], warnings: [] }), log: () => {}, firstReady: () => {} };
    const errors: string[] = [];
    let sent = 0;
    let finished!: () => void;
    const allSent = new Promise<void>((r) => (finished = r));
    const listener = await threadListen((m) => errors.push(m))(
      "127.0.0.1",
      0,
      async (req) => {
        if (new URL(req.url).pathname === "/after") return new Response("still here");
        const body = new ReadableStream<Uint8Array>({
          async pull(c) {
            await Bun.sleep(2);
            if (sent++ < 100) c.enqueue(new Uint8Array(4096).fill(65));
            else {
              c.close();
              finished();
            }
          },
        });
        return new Response(body);
      },
      feed,
    );
    cleanups.push(() => listener.stop());
    const ac = new AbortController();
    const r = await fetch(`http://127.0.0.1:${listener.port}/stream`, { signal: ac.signal });
    const reader = r.body!.getReader();
    await reader.read();
    ac.abort();
    await allSent; // every chunk was sent toward the thread after the client left
    const after = await get(`http://127.0.0.1:${listener.port}/after`);
    expect([after.status, after.body]).toEqual([200, "still here"]);
    expect(errors).toEqual([]);
  });

  test("a port in use is refused naming the port, and stop() closes the port", async () => {
    const { s } = await started();
    const port = s.port();
    const clash = new StatusServer({
      port,
      hostname: "127.0.0.1",
      log: silentLogger(),
      registry: newRegistry(),
      probeDestination: "127.0.0.1",
      listen: threadListen(() => {}),
    });
    let err = "";
    await clash.start(new AbortController().signal).catch((e: Error) => (err = e.message));
    expect(err).toMatch(new RegExp(`cannot listen on \\[127\\.0\\.0\\.1\\]:${port}: .*(EADDRINUSE|in use)`, "i"));
    await cleanups.pop()!();
    let refused = "";
    await fetch(`http://127.0.0.1:${port}/healthz/ready`).catch((e: Error) => (refused = String((e as { code?: string }).code)));
    expect(refused).toBe("ECONNREFUSED");
  });

  test("a thread that ends by itself hands the port to the main thread: probes keep their answers, readiness included", async () => {
    const errors: string[] = [];
    const workers: Worker[] = [];
    const readiness = new Readiness();
    const dns = readiness.block("dns table received");
    const { url, s } = await started(
      {
        readiness,
        listen: threadListen((m) => errors.push(m), {
          newWorker: (spec) => {
            const w = new Worker(spec, { smol: true });
            workers.push(w);
            return w;
          },
        }),
      },
      errors,
    );
    const port = s.port();
    expect((await get(url("/healthz/ready"))).status).toBe(503);
    expect(workers.length).toBe(1);
    const closed = new Promise((r) => workers[0]!.addEventListener("close", r));
    workers[0]!.terminate(); // as an uncaught error would end it
    await closed;
    // The main thread binds the same port: the answer comes back, from the main thread's handler.
    let first: { status: number; body: string } | undefined;
    for (let i = 0; i < 100 && !first; i++) first = await get(url("/healthz/ready")).catch(() => Bun.sleep(20).then(() => undefined));
    expect(first?.status).toBe(503);
    expect(first?.body).toMatch(/dns table received: pending for/);
    expect(errors).toEqual([`status thread ended unexpectedly; the main thread serves port ${port} from now on`]);
    // Readiness changes made after the hand-over are seen (the main thread reads them itself).
    dns.clear();
    await untilStatus(url("/healthz/ready"), 200);
    expect((await get(url("/stats/prometheus"))).status).toBe(200);
    // stop() closes the main thread's listener.
    await cleanups.pop()!();
    let refused = "";
    await fetch(url("/healthz/ready")).catch((e: Error) => (refused = String((e as { code?: string }).code)));
    expect(refused).toBe("ECONNREFUSED");
  });

  test("stop() ending the thread is not mistaken for a crash: no hand-over, no error", async () => {
    const errors: string[] = [];
    const { url } = await started({}, errors);
    expect((await get(url("/healthz/ready"))).status).toBe(200);
    await cleanups.pop()!();
    // A later sentinel: a fresh listener on another port starts and answers, so the close event of
    // the stopped thread has been delivered by then.
    const { url: url2 } = await started({}, errors);
    expect((await get(url2("/healthz/ready"))).status).toBe(200);
    let refused = "";
    await fetch(url("/healthz/ready")).catch((e: Error) => (refused = String((e as { code?: string }).code)));
    expect(refused).toBe("ECONNREFUSED");
    expect(errors).toEqual([]);
  });
});
