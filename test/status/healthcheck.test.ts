import { afterEach, describe, expect, test } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { HealthStateMachine, WorkloadHealthChecker, parseReadinessProbe, type HealthCheckConfig } from "../../src/status/healthcheck.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { StatusServer } from "../../src/status/server.ts";
import { closedPort, startFakeEnvoyAdmin, startGrpcHealthApp, startHttpApp, startTcpApp } from "../support/status-apps.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("ProxyConfig.readinessProbe", () => {
  test("defaults as Istio's", () => {
    expect(parseReadinessProbe({ httpGet: { port: 8080 } }, "10.0.0.5")).toEqual({
      initialDelayMs: 0,
      timeoutMs: 1000,
      periodMs: 10_000,
      successThreshold: 1,
      failureThreshold: 1,
      probe: { kind: "httpGet", host: "10.0.0.5", port: 8080, path: "/", scheme: "http", headers: [] },
    });
    expect(parseReadinessProbe(undefined, "x")).toBeUndefined();
  });
  test("every method and field", () => {
    const c = parseReadinessProbe(
      {
        initialDelaySeconds: 2,
        timeoutSeconds: 3,
        periodSeconds: 4,
        successThreshold: 2,
        failureThreshold: 3,
        httpGet: { path: "ready", port: "8080", host: "app.local", scheme: "HTTPS", httpHeaders: [{ name: "X-A", value: "b" }] },
      },
      "h",
    )!;
    expect(c).toMatchObject({ initialDelayMs: 2000, timeoutMs: 3000, periodMs: 4000, successThreshold: 2, failureThreshold: 3 });
    expect(c.probe).toEqual({ kind: "httpGet", host: "app.local", port: 8080, path: "/ready", scheme: "https", headers: [["X-A", "b"]] });
    expect(parseReadinessProbe({ tcpSocket: { port: 9000 } }, "h")!.probe).toEqual({ kind: "tcpSocket", host: "h", port: 9000 });
    expect(parseReadinessProbe({ exec: { command: ["cat", "/tmp/healthy"] } }, "h")!.probe).toEqual({ kind: "exec", command: ["cat", "/tmp/healthy"] });
    expect(parseReadinessProbe({ grpc: { port: 9000, service: "s" } }, "h")!.probe).toEqual({ kind: "grpc", host: "h", port: 9000, service: "s" });
  });
  const bad: [unknown, RegExp][] = [
    [{}, /exactly one of httpGet, tcpSocket, exec or grpc \(found none\)/],
    [{ httpGet: { port: 1 }, tcpSocket: { port: 1 } }, /found httpGet, tcpSocket/],
    [{ httpGet: {} }, /httpGet.port must be a port/],
    [{ tcpSocket: { port: 70000 } }, /tcpSocket.port must be a port/],
    [{ exec: { command: [] } }, /exec.command must be a non-empty list/],
    [{ httpGet: { port: 80, scheme: "ftp" } }, /scheme must be HTTP or HTTPS/],
    [{ httpGet: { port: 80 }, periodSeconds: -1 }, /periodSeconds must be an integer >= 1/],
    ["yes", /must be an object/],
  ];
  for (const [raw, want] of bad) {
    test(`refuses ${JSON.stringify(raw)}`, () => {
      expect(() => parseReadinessProbe(raw, "h")).toThrow(want);
      expect(() => parseReadinessProbe(raw, "h")).toThrow(/^ProxyConfig.readinessProbe: /);
    });
  }
});

describe("health state machine", () => {
  const F = "boom";
  const cases: { name: string; s: number; f: number; results: (string | undefined)[]; events: (string | undefined | null)[] }[] = [
    // null = no event
    { name: "first success reported at once", s: 1, f: 1, results: [undefined, undefined], events: [undefined, null] },
    { name: "first failure reported at once", s: 1, f: 1, results: [F, F, undefined], events: [F, null, undefined] },
    {
      name: "success threshold",
      s: 3,
      f: 1,
      results: [undefined, undefined, F, undefined, undefined, undefined],
      events: [null, null, F, null, null, undefined],
    },
    {
      name: "failure threshold needs consecutive failures",
      s: 1,
      f: 2,
      results: [undefined, F, undefined, F, F, F],
      events: [undefined, null, null, null, F, null],
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const m = new HealthStateMachine(c.s, c.f);
      expect(
        c.results.map((r) => {
          const e = m.observe(r);
          return e ? e.error : null;
        }),
      ).toEqual(c.events);
    });
  }
});

function config(over: Partial<HealthCheckConfig> = {}): HealthCheckConfig {
  return {
    initialDelayMs: 0,
    timeoutMs: 1000,
    periodMs: 10_000,
    successThreshold: 1,
    failureThreshold: 1,
    probe: { kind: "exec", command: ["true"] },
    ...over,
  };
}

/** A sleep that never waits: records each delay and aborts after `limit` calls. */
function fakeSleep(limit: number, ac: AbortController) {
  const delays: number[] = [];
  return {
    delays,
    sleep: async (ms: number) => {
      delays.push(ms);
      if (delays.length >= limit) {
        ac.abort();
        return false;
      }
      return true;
    },
  };
}

describe("WorkloadHealthChecker", () => {
  test("initial delay, then a check every period; only transitions are reported", async () => {
    const ac = new AbortController();
    const { delays, sleep } = fakeSleep(7, ac);
    const script = [undefined, undefined, "HTTP 500", "HTTP 500", undefined, undefined];
    const reports: (string | undefined)[] = [];
    const hc = new WorkloadHealthChecker({
      config: config({ initialDelayMs: 5000, periodMs: 2000 }),
      reporter: { reportHealth: (e) => reports.push(e) },
      log: silentLogger(),
      sleep,
      probe: async () => script.shift(),
    });
    await hc.run(ac.signal);
    expect(delays).toEqual([5000, 2000, 2000, 2000, 2000, 2000, 2000]);
    expect(reports).toEqual([undefined, "HTTP 500", undefined]);
  });

  test("Envoy readiness is part of workload health", async () => {
    const admin = startFakeEnvoyAdmin({ stats: "" });
    cleanups.push(admin.close);
    const { EnvoyReadinessProbe } = await import("../../src/status/envoyready.ts");
    const envoy = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: admin.port });
    const hc = new WorkloadHealthChecker({ config: config(), reporter: { reportHealth: () => {} }, log: silentLogger(), envoy, probe: async () => undefined });
    expect(await hc.checkOnce()).toMatch(/^envoy not ready: config not received from XDS server/);
    admin.state.stats = "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 1\nserver.state: 0\nlistener_manager.workers_started: 1";
    expect(await hc.checkOnce()).toBeUndefined();
  });

  test("real probes: http, tcp, grpc, exec", async () => {
    let healthy = true;
    const app = startHttpApp({
      "/ready": () => new Response(healthy ? "ok" : "no", { status: healthy ? 200 : 500 }),
      "/moved": () => new Response(null, { status: 302, headers: { location: "http://elsewhere.invalid/" } }),
    });
    const tcp = await startTcpApp();
    const grpc = await startGrpcHealthApp({ "": 1, sick: 2 });
    cleanups.push(app.close, tcp.close, grpc.close);
    const down = await closedPort();
    const check = (probe: HealthCheckConfig["probe"], timeoutMs = 1000) =>
      new WorkloadHealthChecker({
        config: config({ probe, timeoutMs }),
        reporter: { reportHealth: () => {} },
        log: silentLogger(),
        sourceAddress: "127.0.0.6",
      }).checkOnce();

    expect(await check({ kind: "httpGet", host: "127.0.0.1", port: app.port, path: "/ready", scheme: "http", headers: [["X-Check", "1"]] })).toBeUndefined();
    const seen = app.seen.at(-1)!;
    expect(seen.headers["user-agent"]).toBe("istio-probe/1.0");
    expect(seen.headers["x-check"]).toBe("1");
    expect(seen.remote).toMatch(/127\.0\.0\.6$/);
    expect(await check({ kind: "httpGet", host: "127.0.0.1", port: app.port, path: "/moved", scheme: "http", headers: [] })).toBeUndefined();
    healthy = false;
    expect(await check({ kind: "httpGet", host: "127.0.0.1", port: app.port, path: "/ready", scheme: "http", headers: [] })).toMatch(/answered 500$/);

    const before = tcp.remotes.length;
    expect(await check({ kind: "tcpSocket", host: "127.0.0.1", port: tcp.port })).toBeUndefined();
    await tcp.accepted(before + 1);
    expect(tcp.remotes[before]).toBe("127.0.0.6");
    expect(await check({ kind: "tcpSocket", host: "127.0.0.1", port: down })).toMatch(/ECONNREFUSED/);

    expect(await check({ kind: "grpc", host: "127.0.0.1", port: grpc.port, service: "" })).toBeUndefined();
    expect(await check({ kind: "grpc", host: "127.0.0.1", port: grpc.port, service: "sick" })).toBe('service "sick" is NOT_SERVING');

    expect(await check({ kind: "exec", command: ["true"] })).toBeUndefined();
    expect(await check({ kind: "exec", command: ["sh", "-c", "echo not yet; exit 3"] })).toBe('command "sh -c echo not yet; exit 3" exited with 3: not yet');
    expect(await check({ kind: "exec", command: ["sleep", "5"] }, 300)).toBe('command "sleep 5" timed out after 300ms');
    expect(await check({ kind: "exec", command: ["/nonexistent/probe"] })).toMatch(/^exec \/nonexistent\/probe: /);
  });

  test("through the status server: transitions reach the reporter", async () => {
    let healthy = false;
    const app = startHttpApp({ "/ready": () => new Response("", { status: healthy ? 204 : 503 }) });
    cleanups.push(app.close);
    const reports: (string | undefined)[] = [];
    let ticks = 0;
    const s = new StatusServer({
      port: 0,
      hostname: "127.0.0.1",
      log: silentLogger(),
      registry: newRegistry(),
      probeDestination: "127.0.0.1",
      workloadHealth: {
        config: config({ periodMs: 1, probe: { kind: "httpGet", host: "127.0.0.1", port: app.port, path: "/ready", scheme: "http", headers: [] } }),
        reporter: { reportHealth: (e) => reports.push(e) },
        sleep: async (_ms, signal) => {
          ticks++;
          if (ticks === 3) healthy = true;
          await Bun.sleep(5);
          return !signal.aborted;
        },
      },
    });
    const ac = new AbortController();
    await s.start(ac.signal);
    const deadline = Date.now() + 5000;
    while (reports.length < 2 && Date.now() < deadline) await Bun.sleep(10);
    ac.abort();
    await s.stopped();
    expect(reports[0]).toBe(`HTTP probe http://127.0.0.1:${app.port}/ready answered 503`);
    expect(reports[1]).toBeUndefined();
    expect(reports.length).toBe(2);
  });
});
