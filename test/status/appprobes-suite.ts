// The app probes' behaviour (/app-health/, /app-lifecycle/), run once with the status port on the
// agent's event loop (appprobes.test.ts) and once on its own thread (appprobes-thread.test.ts),
// where the thread answers them itself: the same answers, sources, headers and log lines.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { StatusServer, type StatusListen } from "../../src/status/server.ts";
import { closedPort, startGrpcHealthApp, startHttpApp, startTcpApp } from "../support/status-apps.ts";
import { selfSignedCert } from "../support/self-signed.ts";
import { testRequiring, unmet } from "../support/requires.ts";
import { OPENSSL } from "../ca/openssl.ts";

/** Registers the suite; `listen` picks the status port's listener (the in-loop one when absent). */
export function appProbeSuite(listen?: (onError: (message: string) => void) => StatusListen): void {
  const cleanups: (() => unknown)[] = [];
  const logs = memoryLogger();
  let base = "";
  let statusPort = 0;
  let http: ReturnType<typeof startHttpApp>;
  let https: ReturnType<typeof startHttpApp>;
  let tcp: Awaited<ReturnType<typeof startTcpApp>>;
  let grpcApp: Awaited<ReturnType<typeof startGrpcHealthApp>>;
  let grpcSlow: Awaited<ReturnType<typeof startGrpcHealthApp>>;
  let grpcNoHealth: Awaited<ReturnType<typeof startGrpcHealthApp>>;

  beforeAll(async () => {
    let redirects = 0;
    http = startHttpApp(
      {
        "/ok": () => new Response("all good", { headers: { "content-type": "text/plain" } }),
        "/fail": () => new Response("database down", { status: 503 }),
        "/slow": async () => {
          await Bun.sleep(3000);
          return new Response("late");
        },
        "/big": () => new Response("x".repeat(50_000)),
        "/redirect-same": () => new Response(null, { status: 302, headers: { location: "/ok" } }),
        "/redirect-other": () => new Response(null, { status: 301, headers: { location: "http://other.example:9/elsewhere" } }),
        "/redirect-fail": () => new Response(null, { status: 307, headers: { location: "/fail" } }),
        "/redirect-loop": () => {
          redirects++;
          return new Response(null, { status: 302, headers: { location: "/redirect-loop" } });
        },
        "/not-modified": () => new Response(null, { status: 304 }),
      },
      { hostname: "0.0.0.0" },
    );
    // Without openssl (no certificate) the app is plain HTTP and the HTTPS test is a recorded skip.
    https = startHttpApp({ "/secure": () => new Response("tls ok") }, unmet(OPENSSL) ? {} : { tls: selfSignedCert() });
    tcp = await startTcpApp();
    grpcApp = await startGrpcHealthApp({ "": 1, down: 2 });
    grpcSlow = await startGrpcHealthApp({ "": 1 }, { delayMs: 3000 });
    grpcNoHealth = await startGrpcHealthApp();
    const refused = await closedPort();
    const probers = {
      "/app-health/web/livez": { httpGet: { path: "/ok", port: http.port, httpHeaders: [{ name: "X-From-Spec", value: "spec" }] }, timeoutSeconds: 2 },
      "/app-health/web/readyz": { httpGet: { path: "/fail", port: http.port } },
      "/app-health/slow/livez": { httpGet: { path: "/slow", port: http.port }, timeoutSeconds: 1 },
      "/app-health/big/livez": { httpGet: { path: "/big", port: http.port } },
      "/app-health/rs/livez": { httpGet: { path: "/redirect-same", port: http.port }, timeoutSeconds: 2 },
      "/app-health/ro/livez": { httpGet: { path: "/redirect-other", port: http.port } },
      "/app-health/rf/livez": { httpGet: { path: "/redirect-fail", port: http.port } },
      "/app-health/rl/livez": { httpGet: { path: "/redirect-loop", port: http.port }, timeoutSeconds: 5 },
      "/app-health/nm/livez": { httpGet: { path: "/not-modified", port: http.port } },
      "/app-health/tls/livez": { httpGet: { path: "/secure", port: https.port, scheme: "HTTPS" }, timeoutSeconds: 2 },
      "/app-health/down/livez": { httpGet: { path: "/ok", port: refused } },
      "/app-health/tcp/livez": { tcpSocket: { port: tcp.port } },
      "/app-health/tcpdown/livez": { tcpSocket: { port: refused } },
      "/app-health/grpc/livez": { grpc: { port: grpcApp.port }, timeoutSeconds: 2 },
      "/app-health/grpc/readyz": { grpc: { port: grpcApp.port, service: "down" }, timeoutSeconds: 2 },
      "/app-health/grpc/startupz": { grpc: { port: grpcApp.port, service: "nosuch" }, timeoutSeconds: 2 },
      "/app-health/grpcslow/livez": { grpc: { port: grpcSlow.port }, timeoutSeconds: 1 },
      "/app-health/grpcnone/livez": { grpc: { port: grpcNoHealth.port }, timeoutSeconds: 2 },
      "/app-health/grpcdown/livez": { grpc: { port: refused } },
      "/app-lifecycle/web/prestopz": { httpGet: { path: "/ok", port: http.port } },
      "/app-health/bad/livez": { httpGet: { port: 70000 } },
    };
    const s = new StatusServer({
      port: 0,
      hostname: "127.0.0.1",
      log: logs.log,
      registry: newRegistry(),
      probeDestination: "127.0.0.1",
      probeSourceAddress: "127.0.0.6",
      appProbers: JSON.stringify(probers),
      ...(listen ? { listen: listen((m) => logs.log.error(m)) } : {}),
    });
    const ac = new AbortController();
    await s.start(ac.signal);
    statusPort = s.port();
    base = `http://127.0.0.1:${statusPort}`;
    cleanups.push(
      () => {
        ac.abort();
        return s.stopped();
      },
      http.close,
      https.close,
      tcp.close,
      grpcApp.close,
      grpcSlow.close,
      grpcNoHealth.close,
    );
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  /** A log line came (the status thread's lines reach the logger as messages, shortly after the answer). */
  async function logged(match: (line: string) => boolean): Promise<void> {
    for (let i = 0; i < 200 && !logs.lines.some(match); i++) await Bun.sleep(10);
    expect(logs.lines.some(match)).toBe(true);
  }

  async function probe(path: string, headers: Record<string, string> = {}) {
    const r = await fetch(base + path, { headers });
    return { status: r.status, body: await r.text() };
  }
  const lastSeen = (path: string) => http.seen.filter((s) => s.path === path).at(-1)!;

  describe("httpGet app probes", () => {
    test("success: status and body come back; sent from 127.0.0.6 with keep-alive off", async () => {
      expect(await probe("/app-health/web/livez")).toEqual({ status: 200, body: "all good" });
      const seen = lastSeen("/ok");
      expect(seen.remote).toMatch(/^(::ffff:)?127\.0\.0\.6$/);
      expect(seen.headers.connection).toBe("close");
    });

    test("failure: the app's status and body are returned", async () => {
      expect(await probe("/app-health/web/readyz")).toEqual({ status: 503, body: "database down" });
    });

    test("headers are forwarded; a Host naming the status port is rewritten to the app port", async () => {
      await probe("/app-health/web/livez", { "X-Probe-Header": "abc", "User-Agent": "kube-probe/1.31", Host: `10.0.0.5:${statusPort}` });
      const h = lastSeen("/ok").headers;
      expect(h["x-probe-header"]).toBe("abc");
      expect(h["user-agent"]).toBe("kube-probe/1.31");
      expect(h["x-from-spec"]).toBe("spec");
      expect(h.host).toBe(`10.0.0.5:${http.port}`);
    });

    test("a custom Host is kept as is; the incoming header wins over the spec's", async () => {
      await probe("/app-health/web/livez", { Host: "app.example.com", "X-From-Spec": "incoming" });
      const h = lastSeen("/ok").headers;
      expect(h.host).toBe("app.example.com");
      expect(h["x-from-spec"]).toBe("incoming");
    });

    test("timeout: 500 after timeoutSeconds", async () => {
      const t0 = performance.now();
      expect((await probe("/app-health/slow/livez")).status).toBe(500);
      expect(performance.now() - t0).toBeLessThan(2900);
      await logged(
        (l) => l.includes("Request to probe app failed") && l.includes("timed out after 1000ms") && l.includes("original URL path = /app-health/slow/livez"),
      );
    });

    test("body is cut at 10 KiB", async () => {
      const r = await probe("/app-health/big/livez");
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(10 * 1024);
    });

    test("redirects: same host followed, other host is success, final 3xx is success, loops fail", async () => {
      expect(await probe("/app-health/rs/livez")).toEqual({ status: 200, body: "all good" });
      expect(await probe("/app-health/rf/livez")).toEqual({ status: 503, body: "database down" });
      const before = http.seen.length;
      expect(await probe("/app-health/ro/livez")).toEqual({ status: 200, body: "" });
      expect(http.seen.length).toBe(before + 1); // other.example never contacted
      expect(await probe("/app-health/nm/livez")).toEqual({ status: 200, body: "" });
      const loops = http.seen.filter((s) => s.path === "/redirect-loop").length;
      expect((await probe("/app-health/rl/livez")).status).toBe(500);
      expect(http.seen.filter((s) => s.path === "/redirect-loop").length - loops).toBe(11);
      await logged((l) => l.includes("stopped after 10 redirects"));
    });

    testRequiring(OPENSSL, "HTTPS without certificate verification", async () => {
      expect(await probe("/app-health/tls/livez")).toEqual({ status: 200, body: "tls ok" });
      expect(https.seen.at(-1)!.remote).toMatch(/127\.0\.0\.6$/);
    });

    test("connection refused is 500", async () => {
      expect((await probe("/app-health/down/livez")).status).toBe(500);
    });

    test("lifecycle paths work like health paths", async () => {
      expect(await probe("/app-lifecycle/web/prestopz")).toEqual({ status: 200, body: "all good" });
    });
  });

  describe("tcpSocket and grpc app probes", () => {
    test("tcp: open is 200 from 127.0.0.6, refused is 500", async () => {
      const before = tcp.remotes.length;
      expect((await probe("/app-health/tcp/livez")).status).toBe(200);
      await tcp.accepted(before + 1);
      expect(tcp.remotes[before]).toBe("127.0.0.6");
      expect((await probe("/app-health/tcpdown/livez")).status).toBe(500);
    });

    test("grpc: SERVING is 200; User-Agent forwarded; source 127.0.0.6", async () => {
      expect((await probe("/app-health/grpc/livez", { "User-Agent": "kube-probe/1.31" })).status).toBe(200);
      const call = grpcApp.calls.at(-1)!;
      expect(call.service).toBe("");
      expect(call.peer).toMatch(/^127\.0\.0\.6:/);
      expect(call.userAgent.join(" ")).toContain("kube-probe/1.31");
    });

    test("grpc: NOT_SERVING, unknown service, unimplemented, timeout, refused are 500", async () => {
      expect((await probe("/app-health/grpc/readyz")).status).toBe(500);
      expect(grpcApp.calls.at(-1)!.service).toBe("down");
      await logged((l) => l.includes('service "down" is NOT_SERVING'));
      expect((await probe("/app-health/grpc/startupz")).status).toBe(500);
      expect((await probe("/app-health/grpcnone/livez")).status).toBe(500);
      await logged((l) => l.includes("server does not implement the grpc health protocol"));
      expect((await probe("/app-health/grpcslow/livez")).status).toBe(500);
      await logged((l) => l.includes("grpc request not finished within timeout"));
      expect((await probe("/app-health/grpcdown/livez")).status).toBe(500);
    });
  });

  describe("unknown and invalid probe paths", () => {
    test("unknown path: 400 as Istio", async () => {
      expect(await probe("/app-health/nobody/livez")).toEqual({ status: 400, body: "app prober config does not exists for /app-health/nobody/livez" });
    });
    test("an invalid entry answers 500 with its reason", async () => {
      const r = await probe("/app-health/bad/livez");
      expect(r.status).toBe(500);
      expect(r.body).toContain("invalid prober config for /app-health/bad/livez, port 70000 is out of range 1-65535");
    });
  });
}
