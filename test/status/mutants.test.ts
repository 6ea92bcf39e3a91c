// The readiness checks' rules and state, in process (mutation testing, npm run mutate -- status):
// Envoy's stat parsing and Istio's verdicts (pilot-agent status/ready/probe.go and util/stats.go,
// whose messages and filters are copied here as literals), the admin queries' URLs and timeouts,
// the cached successes and the one shared query, the not-ready body, and ProxyConfig.readinessProbe
// parsing and the health checker's loop.

import { afterEach, describe, expect, test } from "bun:test";
import { memoryLogger, silentLogger } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import {
  EnvoyReadinessProbe,
  fetchText,
  parseUpdateStats,
  READY_STATS_FILTER,
  serverStateError,
  UPDATE_STATS_FILTER,
  updateStatsError,
} from "../../src/status/envoyready.ts";
import { parseReadinessProbe, WorkloadHealthChecker, type HealthCheckConfig } from "../../src/status/healthcheck.ts";
import { ReadyCheck, renderNotReady } from "../../src/status/readycheck.ts";
import { startGrpcHealthApp, startHttpApp } from "../support/status-apps.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const UPDATED = "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 1";
const LIVE = "server.state: 0\nlistener_manager.workers_started: 1";
// The filters as Istio's probe.go writes them, and as they go on the wire (encodeURIComponent).
const UPDATE_URL =
  "http://127.0.0.1:15000/stats?usedonly&filter=%5E(cluster_manager%5C.cds%7Clistener_manager%5C.lds)%5C.(update_success%7Cupdate_rejected)%24";
const READY_URL = "http://127.0.0.1:15000/stats?usedonly&filter=%5E(server%5C.state%7Clistener_manager%5C.workers_started)";

/** An admin API whose answers the test scripts: each GET takes the next answer (text, or an Error to throw). */
function scriptedAdmin(...answers: (string | Error)[]) {
  const calls: string[] = [];
  const get = async (url: string, timeoutMs: number) => {
    calls.push(`${url} ${timeoutMs}`);
    const a = answers.shift();
    if (a === undefined) throw new Error("no more answers");
    if (a instanceof Error) throw a;
    return a;
  };
  return { calls, get };
}

describe("Envoy's stats (util/stats.go)", () => {
  test("the filters are Istio's", () => {
    expect(UPDATE_STATS_FILTER).toBe("^(cluster_manager\\.cds|listener_manager\\.lds)\\.(update_success|update_rejected)$");
    expect(READY_STATS_FILTER).toBe("^(server\\.state|listener_manager\\.workers_started)");
  });

  test("each value is read from the first line starting with its name; absent is 0", () => {
    expect(
      parseUpdateStats(
        "cluster_manager.cds.update_success: 7\ncluster_manager.cds.update_success: 9\ncluster_manager.cds.update_rejected: 2\n" +
          "listener_manager.lds.update_rejected: 40\nlistener_manager.lds.update_success:  512 ",
      ),
    ).toEqual({ cdsSuccess: 7, cdsRejected: 2, ldsSuccess: 512, ldsRejected: 40 });
    expect(parseUpdateStats("")).toEqual({ cdsSuccess: 0, cdsRejected: 0, ldsSuccess: 0, ldsRejected: 0 });
  });

  test("a value that is not a whole number, or a line with two colons, is an error naming the line", () => {
    expect(() => parseUpdateStats("cluster_manager.cds.update_success: 1.5")).toThrow(
      'failed parsing Envoy stat cluster_manager.cds.update_success (invalid value "1.5") line: cluster_manager.cds.update_success: 1.5',
    );
    expect(() => parseUpdateStats("cluster_manager.cds.update_success: -1")).toThrow('(invalid value "-1")');
    expect(() => parseUpdateStats("cluster_manager.cds.update_success: 1x")).toThrow('(invalid value "1x")');
    expect(() => parseUpdateStats("cluster_manager.cds.update_success: x1")).toThrow('(invalid value "x1")');
    expect(() => parseUpdateStats("cluster_manager.cds.update_success: ")).toThrow('(invalid value "")');
    expect(() => parseUpdateStats("listener_manager.lds.update_success: 1: 2")).toThrow(
      "envoy stat listener_manager.lds.update_success missing separator. line:listener_manager.lds.update_success: 1: 2",
    );
  });

  test("a rejected LDS update is reported as a rejection too", () => {
    expect(updateStatsError({ cdsSuccess: 1, cdsRejected: 0, ldsSuccess: 0, ldsRejected: 1 })).toBe(
      "config received from XDS server, but was rejected: cds updates: 1 successful, 0 rejected; lds updates: 0 successful, 1 rejected",
    );
  });

  test("server state: each of Envoy's states by name, UNKNOWN past them; workers must be exactly 1", () => {
    expect(serverStateError("server.state: 3\nlistener_manager.workers_started: 1")).toBe("server is not live, current state is: INITIALIZING");
    expect(serverStateError("server.state: 4\nlistener_manager.workers_started: 1")).toBe("server is not live, current state is: UNKNOWN");
    expect(serverStateError("server.state: 0\nlistener_manager.workers_started: 2")).toBe("workers have not yet started");
  });

  test("server state: a bad value is an error naming it; the text is trimmed in 'not yet updated'", () => {
    expect(serverStateError("server.state: x\nlistener_manager.workers_started: 1")).toBe(
      'failed to get readiness stats: failed parsing Envoy stat server.state (invalid value "x") line: server.state: x',
    );
    expect(serverStateError("server.state: 0\nlistener_manager.workers_started: y")).toBe(
      'failed to get readiness stats: failed parsing Envoy stat listener_manager.workers_started (invalid value "y") line: listener_manager.workers_started: y',
    );
    expect(serverStateError("\n listener_manager.workers_started: 1 \n")).toBe(
      "failed to get readiness stats: server.state is not yet updated: listener_manager.workers_started: 1",
    );
    expect(serverStateError("\nserver.state: 0\n")).toBe("failed to get readiness stats: listener_manager.workers_started is not yet updated: server.state: 0");
  });
});

describe("fetchText", () => {
  test("a 200 answer's body; other answers (redirects too) are errors naming the URL, the status and the start of the body", async () => {
    const app = startHttpApp({
      "/ok": () => new Response("body text"),
      "/busy": () => new Response(`  ${"e".repeat(300)}  `, { status: 503 }),
      "/moved": () => new Response("go away", { status: 302, headers: { location: "/ok" } }),
    });
    cleanups.push(app.close);
    const base = `http://127.0.0.1:${app.port}`;
    expect(await fetchText(`${base}/ok`, 5000)).toBe("body text");
    expect(await fetchText(`${base}/busy`, 5000).catch((e: Error) => e.message)).toBe(`GET ${base}/busy: HTTP 503: ${"e".repeat(200)}`);
    expect(await fetchText(`${base}/moved`, 5000).catch((e: Error) => e.message)).toBe(`GET ${base}/moved: HTTP 302: go away`);
  });

  test("a refused connection is named as what it is, not as a timeout", async () => {
    const app = startHttpApp({});
    const url = `http://127.0.0.1:${app.port}/stats`;
    await app.close(); // the port is closed now
    const msg = await fetchText(url, 5000).catch((e: Error) => e.message);
    expect(msg.startsWith(`GET ${url}: `)).toBe(true);
    expect(msg).not.toContain("timed out");
  });

  test("a server that does not answer in time: 'timed out after N ms'", async () => {
    const app = startHttpApp({ "/slow": () => new Promise<Response>(() => {}) });
    cleanups.push(app.close);
    const url = `http://127.0.0.1:${app.port}/slow`;
    expect(await fetchText(url, 50).catch((e: Error) => e.message)).toBe(`GET ${url}: timed out after 50ms`);
  });
});

describe("EnvoyReadinessProbe", () => {
  test("the update query (1 s) until it passes, then only the ready query (3 s); both cached once passed", async () => {
    const a = scriptedAdmin(UPDATED, "server.state: 2\nlistener_manager.workers_started: 0", LIVE);
    const p = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get });
    expect(await p.check()).toBe("server is not live, current state is: PRE_INITIALIZING");
    expect(await p.check()).toBeUndefined();
    expect(await p.check()).toBeUndefined();
    expect(a.calls).toEqual([`${UPDATE_URL} 1000`, `${READY_URL} 3000`, `${READY_URL} 3000`]);
  });

  test("timeouts as configured; an IPv6 admin host is bracketed", async () => {
    const a = scriptedAdmin(UPDATED, LIVE);
    const p = new EnvoyReadinessProbe({ adminHost: "::1", adminPort: 15000, get: a.get, updateTimeoutMs: 7, readyTimeoutMs: 9 });
    expect(await p.check()).toBeUndefined();
    expect(a.calls).toEqual([`${UPDATE_URL.replace("127.0.0.1", "[::1]")} 7`, `${READY_URL.replace("127.0.0.1", "[::1]")} 9`]);
  });

  test("a failed query is the check's error; the update query is repeated until it passes", async () => {
    const a = scriptedAdmin(new Error("GET x: connection refused"), "", UPDATED, LIVE);
    const p = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get });
    expect(await p.check()).toBe("GET x: connection refused");
    expect(await p.check()).toBe(
      "config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected",
    );
    expect(await p.check()).toBeUndefined();
    expect(a.calls.map((c) => c.split(" ")[1])).toEqual(["1000", "1000", "1000", "3000"]);
  });

  test("concurrent checks share one query; the next check after it queries again", async () => {
    const a = scriptedAdmin("", "");
    const p = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get });
    const [x, y] = await Promise.all([p.check(), p.check()]);
    expect(x).toBe(y);
    expect(a.calls).toHaveLength(1);
    await p.check();
    expect(a.calls).toHaveLength(2);
  });

  test("onFirstReady is called once, not again after a reset and a second readiness", async () => {
    const a = scriptedAdmin(UPDATED, LIVE, UPDATED, LIVE);
    let first = 0;
    const p = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get, onFirstReady: () => first++ });
    expect(await p.check()).toBeUndefined();
    p.reset();
    expect(await p.check()).toBeUndefined();
    expect(a.calls).toHaveLength(4);
    expect(first).toBe(1);
  });

  test("a reset forgets both cached successes", async () => {
    const a = scriptedAdmin(UPDATED, LIVE, UPDATED, "server.state: 1\nlistener_manager.workers_started: 1");
    const p = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get });
    expect(await p.check()).toBeUndefined();
    p.reset();
    expect(await p.check()).toBe("server is not live, current state is: DRAINING");
  });

  test("after shutdown: the reason given, or 'shutting down'; no query", async () => {
    const a = scriptedAdmin();
    const reasons: [unknown, string][] = [
      [new Error("SIGTERM received"), "server is terminated: SIGTERM received"],
      ["quitquitquit", "server is terminated: quitquitquit"],
      [undefined, "server is terminated: shutting down"],
    ];
    for (const [reason, want] of reasons) {
      const shutdown = { aborted: true, reason } as AbortSignal;
      expect(await new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get, shutdown }).check()).toBe(want);
    }
    const live = { aborted: false, reason: undefined } as AbortSignal;
    expect(await new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 15000, get: a.get, shutdown: live }).check()).toBe("no more answers");
    expect(a.calls).toHaveLength(1);
  });
});

describe("ReadyCheck and the not-ready body", () => {
  test("blockers, then Envoy, then the gRPC bootstrap; warnings apart; ready only with nothing pending", async () => {
    let t = 1000;
    const readiness = new Readiness(() => t);
    readiness.block("b1").fail("first");
    readiness.warn("w1");
    t = 3500;
    const c = new ReadyCheck({ readiness, envoy: { check: async () => "envoy says no" }, grpcBootstrap: { check: () => "no bootstrap" } });
    expect(await c.check()).toEqual({
      ready: false,
      pending: [
        { name: "b1", error: "first" },
        { name: "envoy", error: "envoy says no" },
        { name: "grpc bootstrap", error: "no bootstrap" },
      ],
      warnings: [{ name: "w1", error: "pending for 2.5s" }],
    });
    readiness.clear("b1");
    const ok = new ReadyCheck({ readiness, envoy: { check: async () => undefined }, grpcBootstrap: { check: () => undefined } });
    expect(await ok.check()).toEqual({ ready: true, pending: [], warnings: [{ name: "w1", error: "pending for 2.5s" }] });
    expect(await new ReadyCheck({}).check()).toEqual({ ready: true, pending: [], warnings: [] });
  });

  test("the body: a count, one line per check (line breaks folded), then warnings", () => {
    expect(renderNotReady([{ name: "envoy", error: "a\n  b \n\nc" }], [{ name: "certificate renewal", error: "late" }])).toBe(
      "not ready: 1 pending\nenvoy: a b c\nwarning: certificate renewal: late\n",
    );
    expect(renderNotReady([])).toBe("not ready: 0 pending\n\n");
  });
});

describe("ProxyConfig.readinessProbe, field by field", () => {
  const http = { httpGet: { port: 8080 } };
  test("zero, empty and null mean the default; numbers may be strings of digits", () => {
    const c = parseReadinessProbe(
      { ...http, initialDelaySeconds: "3", timeoutSeconds: 0, periodSeconds: "", successThreshold: null, failureThreshold: "2" },
      "h",
    )!;
    expect([c.initialDelayMs, c.timeoutMs, c.periodMs, c.successThreshold, c.failureThreshold]).toEqual([3000, 1000, 10_000, 1, 2]);
    const min = parseReadinessProbe({ ...http, timeoutSeconds: 1, periodSeconds: 1, successThreshold: 1, failureThreshold: 1 }, "h")!;
    expect([min.timeoutMs, min.periodMs, min.successThreshold, min.failureThreshold]).toEqual([1000, 1000, 1, 1]);
  });

  test("bad numbers name the field and the value", () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ timeoutSeconds: -1 }, "ProxyConfig.readinessProbe: timeoutSeconds must be an integer >= 1, got -1"],
      [{ initialDelaySeconds: -1 }, "ProxyConfig.readinessProbe: initialDelaySeconds must be an integer >= 0, got -1"],
      [{ successThreshold: 1.5 }, "ProxyConfig.readinessProbe: successThreshold must be an integer >= 1, got 1.5"],
      [{ failureThreshold: "1.5" }, 'ProxyConfig.readinessProbe: failureThreshold must be an integer >= 1, got "1.5"'],
      [{ periodSeconds: true }, "ProxyConfig.readinessProbe: periodSeconds must be an integer >= 1, got true"],
      [{ periodSeconds: "+5" }, 'ProxyConfig.readinessProbe: periodSeconds must be an integer >= 1, got "+5"'],
      [{ periodSeconds: " 5" }, 'ProxyConfig.readinessProbe: periodSeconds must be an integer >= 1, got " 5"'],
      [{ periodSeconds: "5e1" }, 'ProxyConfig.readinessProbe: periodSeconds must be an integer >= 1, got "5e1"'],
      [{ periodSeconds: "5 " }, 'ProxyConfig.readinessProbe: periodSeconds must be an integer >= 1, got "5 "'],
    ];
    for (const [over, want] of bad) expect(() => parseReadinessProbe({ ...http, ...over }, "h")).toThrow(want);
  });

  test("ports: 1 and 65535 pass; 0, 65536 and non-numbers are refused", () => {
    expect(parseReadinessProbe({ tcpSocket: { port: 1 } }, "h")!.probe).toEqual({ kind: "tcpSocket", host: "h", port: 1 });
    expect(parseReadinessProbe({ tcpSocket: { port: "65535" } }, "h")!.probe).toEqual({ kind: "tcpSocket", host: "h", port: 65535 });
    expect(() => parseReadinessProbe({ tcpSocket: { port: 0 } }, "h")).toThrow("ProxyConfig.readinessProbe: tcpSocket.port must be a port in 1-65535, got 0");
    expect(() => parseReadinessProbe({ grpc: { port: 65536 } }, "h")).toThrow("ProxyConfig.readinessProbe: grpc.port must be a port in 1-65535, got 65536");
    expect(() => parseReadinessProbe({ httpGet: { port: "http" } }, "h")).toThrow(
      'ProxyConfig.readinessProbe: httpGet.port must be an integer >= 0, got "http"',
    );
  });

  test("methods: null ones are not set; the message lists those found", () => {
    expect(parseReadinessProbe({ httpGet: null, tcpSocket: { port: 9 } }, "h")!.probe.kind).toBe("tcpSocket");
    expect(() => parseReadinessProbe({ exec: { command: ["x"] }, grpc: { port: 1 } }, "h")).toThrow(
      "ProxyConfig.readinessProbe: needs exactly one of httpGet, tcpSocket, exec or grpc (found exec, grpc)",
    );
    expect(() => parseReadinessProbe([], "h")).toThrow("ProxyConfig.readinessProbe: must be an object");
    expect(parseReadinessProbe(null, "h")).toBeUndefined();
  });

  test("httpGet: scheme, path and headers as Istio reads them; tcpSocket's host", () => {
    const p = (h: Record<string, unknown>) => parseReadinessProbe({ httpGet: { port: 80, ...h } }, "10.0.0.1")!.probe;
    expect(p({ scheme: "https", path: "" })).toEqual({ kind: "httpGet", host: "10.0.0.1", port: 80, path: "/", scheme: "https", headers: [] });
    expect(p({ path: "/x", httpHeaders: [{ name: "A", value: 1 }, { value: "v" }, { name: "B" }, null] })).toMatchObject({
      path: "/x",
      scheme: "http",
      headers: [
        ["A", "1"],
        ["B", ""],
      ],
    });
    expect(p({ path: 5, httpHeaders: "A: b" })).toMatchObject({ path: "/", headers: [] });
    expect(() => p({ scheme: "" })).not.toThrow();
    expect(() => p({ scheme: "FTP" })).toThrow('ProxyConfig.readinessProbe: httpGet.scheme must be HTTP or HTTPS, got "FTP"');
    expect(parseReadinessProbe({ tcpSocket: { port: 9, host: "db" } }, "h")!.probe).toEqual({ kind: "tcpSocket", host: "db", port: 9 });
  });

  test("exec needs a list of strings; grpc's service defaults to the empty name", () => {
    for (const command of [undefined, "true", [], ["ok", 1]])
      expect(() => parseReadinessProbe({ exec: { command } }, "h")).toThrow("ProxyConfig.readinessProbe: exec.command must be a non-empty list of strings");
    expect(parseReadinessProbe({ grpc: { port: 5, service: 7 } }, "h")!.probe).toEqual({ kind: "grpc", host: "h", port: 5, service: "" });
  });
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

describe("WorkloadHealthChecker's loop", () => {
  test("no initial delay: the first check at once; each transition logged and reported", async () => {
    const ac = new AbortController();
    const mem = memoryLogger();
    const script = ["HTTP 500", undefined];
    const delays: number[] = [];
    const reports: (string | undefined)[] = [];
    await new WorkloadHealthChecker({
      config: config({ periodMs: 2500, probe: { kind: "tcpSocket", host: "h", port: 1 } }),
      reporter: { reportHealth: (e) => reports.push(e) },
      log: mem.log,
      sleep: async (ms) => (delays.push(ms), delays.length < 2),
      probe: async () => script.shift(),
    }).run(ac.signal);
    expect(delays).toEqual([2500, 2500]);
    expect(reports).toEqual(["HTTP 500", undefined]);
    expect(mem.lines.map((l) => l.split("\t").slice(1).join(" "))).toEqual([
      "info starting health check for tcpSocket in 0s (period 2.5s)",
      "info failure threshold hit, marking as unhealthy: HTTP 500",
      "info success threshold hit, marking as healthy",
    ]);
  });

  test("an initial delay cut short by the abort runs no check", async () => {
    let probes = 0;
    const mem = memoryLogger();
    await new WorkloadHealthChecker({
      config: config({ initialDelayMs: 1500 }),
      reporter: { reportHealth: () => {} },
      log: mem.log,
      sleep: async () => false,
      probe: async () => (probes++, undefined),
    }).run(new AbortController().signal);
    expect(probes).toBe(0);
    expect(mem.lines.map((l) => l.split("\t").slice(1).join(" "))).toEqual(["info starting health check for exec in 1.5s (period 10s)"]);
  });

  test("aborted during a check: its result is not reported", async () => {
    const ac = new AbortController();
    const reports: (string | undefined)[] = [];
    await new WorkloadHealthChecker({
      config: config(),
      reporter: { reportHealth: (e) => reports.push(e) },
      log: silentLogger(),
      sleep: async () => true,
      probe: async () => (ac.abort(), "HTTP 500"),
    }).run(ac.signal);
    expect(reports).toEqual([]);
  });

  test("checkOnce: Envoy not ready first; a probe that throws gives its message", async () => {
    const hc = (envoy: string | undefined, probe: () => Promise<string | undefined>) =>
      new WorkloadHealthChecker({ config: config(), reporter: { reportHealth: () => {} }, log: silentLogger(), envoy: { check: async () => envoy }, probe });
    expect(await hc("cds not ready", async () => undefined).checkOnce()).toBe("envoy not ready: cds not ready");
    expect(
      await hc(undefined, async () => {
        throw new Error("probe exploded");
      }).checkOnce(),
    ).toBe("probe exploded");
    expect(await hc(undefined, async () => "HTTP 404").checkOnce()).toBe("HTTP 404");
  });

  test("HTTP probes: healthy below 400, from 200; the User-Agent can be overridden, header names lowercased", async () => {
    let status = 399;
    const app = startHttpApp({ "/r": () => new Response("", { status }) });
    cleanups.push(app.close);
    const check = (headers: [string, string][] = []) =>
      new WorkloadHealthChecker({
        config: config({ probe: { kind: "httpGet", host: "localhost", port: app.port, path: "/r", scheme: "http", headers } }),
        reporter: { reportHealth: () => {} },
        log: silentLogger(),
        sourceAddress: "127.0.0.6",
      }).checkOnce();
    expect(await check([["User-Agent", "kube-probe/1.30"]])).toBeUndefined();
    expect(app.seen.at(-1)!.headers["user-agent"]).toBe("kube-probe/1.30");
    expect(app.seen.at(-1)!.remote).toMatch(/127\.0\.0\.6$/); // "localhost" is local: from the source address
    status = 400;
    expect(await check()).toBe(`HTTP probe http://localhost:${app.port}/r answered 400`);
    status = 200;
    expect(await check()).toBeUndefined();
  });

  test("a host neither loopback nor listed as local is probed without a source address (no local-hosts list given)", async () => {
    const hc = new WorkloadHealthChecker({
      config: config({ timeoutMs: 2000, probe: { kind: "tcpSocket", host: "probe-target.invalid", port: 80 } }),
      reporter: { reportHealth: () => {} },
      log: silentLogger(),
      sourceAddress: "127.0.0.6",
    });
    expect(await hc.checkOnce()).toStartWith("dial tcp probe-target.invalid:80: ");
  });

  test("gRPC probes say who they are: istio-probe/1.0", async () => {
    const grpc = await startGrpcHealthApp({ "": 1 });
    cleanups.push(grpc.close);
    const hc = new WorkloadHealthChecker({
      config: config({ probe: { kind: "grpc", host: "127.0.0.1", port: grpc.port, service: "" } }),
      reporter: { reportHealth: () => {} },
      log: silentLogger(),
    });
    expect(await hc.checkOnce()).toBeUndefined();
    expect(grpc.calls.at(-1)!.userAgent[0]!.startsWith("istio-probe/1.0 istio-agent-probe")).toBe(true);
  });
});
