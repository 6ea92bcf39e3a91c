import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import {
  EnvoyReadinessProbe,
  READY_STATS_FILTER,
  UPDATE_STATS_FILTER,
  parseUpdateStats,
  serverStateError,
  updateStatsError,
} from "../../src/status/envoyready.ts";
import { GrpcBootstrapProbe } from "../../src/status/grpcbootstrap.ts";
import { StatusServer } from "../../src/status/server.ts";
import { startFakeEnvoyAdmin } from "../support/status-apps.ts";

const LIVE = "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 1\nserver.state: 0\nlistener_manager.workers_started: 1";
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("Envoy update stats (Istio's messages)", () => {
  const cases: [string, string, string | undefined][] = [
    [
      "only lds",
      "listener_manager.lds.update_success: 1",
      "config not fully received from XDS server: cds updates: 0 successful, 0 rejected; lds updates: 1 successful, 0 rejected",
    ],
    [
      "only cds",
      "cluster_manager.cds.update_success: 1",
      "config not fully received from XDS server: cds updates: 1 successful, 0 rejected; lds updates: 0 successful, 0 rejected",
    ],
    [
      "reject cds",
      "cluster_manager.cds.update_rejected: 1\nlistener_manager.lds.update_success: 1",
      "config received from XDS server, but was rejected: cds updates: 0 successful, 1 rejected; lds updates: 1 successful, 0 rejected",
    ],
    ["no config", "", "config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected"],
    ["both", "cluster_manager.cds.update_success: 3\nlistener_manager.lds.update_success: 2\nlistener_manager.lds.update_rejected: 1", undefined],
  ];
  for (const [name, stats, want] of cases) test(name, () => expect(updateStatsError(parseUpdateStats(stats))).toBe(want));

  test("a malformed line is an error naming the stat", () => {
    expect(() => parseUpdateStats("cluster_manager.cds.update_success: x")).toThrow(/cluster_manager.cds.update_success/);
    expect(() => parseUpdateStats("cluster_manager.cds.update_success 1")).toThrow(/missing separator/);
  });
});

describe("Envoy server state", () => {
  const cases: [string, string, string | undefined][] = [
    ["live", "server.state: 0\nlistener_manager.workers_started: 1", undefined],
    ["workers not started", "server.state: 0\nlistener_manager.workers_started: 0", "workers have not yet started"],
    ["pre-initializing", "server.state: 2\nlistener_manager.workers_started: 0", "server is not live, current state is: PRE_INITIALIZING"],
    ["draining", "server.state: 1\nlistener_manager.workers_started: 1", "server is not live, current state is: DRAINING"],
    [
      "no server.state",
      "listener_manager.workers_started: 1",
      "failed to get readiness stats: server.state is not yet updated: listener_manager.workers_started: 1",
    ],
    ["no workers stat", "server.state: 0", "failed to get readiness stats: listener_manager.workers_started is not yet updated: server.state: 0"],
  ];
  for (const [name, stats, want] of cases) test(name, () => expect(serverStateError(stats)).toBe(want));
});

describe("EnvoyReadinessProbe against an admin API", () => {
  test("queries Istio's filters, caches success, forgets it on reset", async () => {
    const admin = startFakeEnvoyAdmin({ stats: "" });
    cleanups.push(admin.close);
    let firstReady = 0;
    const probe = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: admin.port, onFirstReady: () => firstReady++ });
    expect(await probe.check()).toMatch(/^config not received from XDS server/);
    const q = new URLSearchParams(admin.state.queries[0]!.slice(1));
    expect(q.has("usedonly")).toBe(true);
    expect(q.get("filter")).toBe(UPDATE_STATS_FILTER);

    admin.state.stats = "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 1\nserver.state: 2\nlistener_manager.workers_started: 0";
    expect(await probe.check()).toBe("server is not live, current state is: PRE_INITIALIZING");
    expect(new URLSearchParams(admin.state.queries.at(-1)!.slice(1)).get("filter")).toBe(READY_STATS_FILTER);

    admin.state.stats = LIVE;
    expect(await probe.check()).toBeUndefined();
    expect(firstReady).toBe(1);
    const n = admin.state.queries.length;
    admin.state.stats = ""; // cached: no further queries, still ready
    expect(await probe.check()).toBeUndefined();
    expect(admin.state.queries.length).toBe(n);

    probe.reset();
    expect(await probe.check()).toMatch(/^config not received/);
  });

  test("an unreachable admin API is an error naming the URL", async () => {
    const probe = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: 1 });
    expect(await probe.check()).toMatch(/GET http:\/\/127\.0\.0\.1:1\/stats\?usedonly/);
  });

  test("after shutdown: server is terminated", async () => {
    const admin = startFakeEnvoyAdmin({ stats: LIVE });
    cleanups.push(admin.close);
    const ac = new AbortController();
    const probe = new EnvoyReadinessProbe({ adminHost: "127.0.0.1", adminPort: admin.port, shutdown: ac.signal });
    expect(await probe.check()).toBeUndefined();
    ac.abort(new Error("SIGTERM received"));
    expect(await probe.check()).toBe("server is terminated: SIGTERM received");
  });
});

describe("gRPC bootstrap probe", () => {
  test("missing, broken, then certificates appear", () => {
    const dir = mkdtempSync(join(tmpdir(), "status-grpc-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const probe = new GrpcBootstrapProbe("./grpc-bootstrap.json", dir);
    expect(probe.check()).toMatch(/^failed loading \.\/grpc-bootstrap\.json: .*ENOENT/);
    writeFileSync(join(dir, "grpc-bootstrap.json"), "{not json");
    expect(probe.check()).toMatch(/^failed loading .*not valid JSON/);
    const certs = join(dir, "certs");
    writeFileSync(
      join(dir, "grpc-bootstrap.json"),
      JSON.stringify({
        xds_servers: [{ server_uri: "unix:///./etc/istio/proxy/XDS" }],
        certificate_providers: {
          default: {
            plugin_name: "file_watcher",
            config: { certificate_file: `${certs}/cert-chain.pem`, private_key_file: `${certs}/key.pem`, ca_certificate_file: `${certs}/root-cert.pem` },
          },
        },
      }),
    );
    expect(probe.check()).toBe(`${certs}/cert-chain.pem does not exist`);
    mkdirSync(certs);
    for (const f of ["cert-chain.pem", "key.pem", "root-cert.pem"]) writeFileSync(join(certs, f), "x");
    expect(probe.check()).toBeUndefined();
  });
});

describe("/healthz/ready", () => {
  async function server(opts: { stats?: string; readiness?: Readiness; envoy?: boolean; grpc?: string; now?: () => number }) {
    const admin = startFakeEnvoyAdmin({ stats: opts.stats ?? "" });
    cleanups.push(admin.close);
    const s = new StatusServer({
      port: 0,
      hostname: "127.0.0.1",
      log: silentLogger(),
      registry: newRegistry(),
      readiness: opts.readiness,
      envoy:
        opts.envoy === false
          ? undefined
          : { adminHost: "127.0.0.1", adminPort: admin.port, prometheusHost: "127.0.0.1", prometheusPort: admin.port, mergeStats: true },
      grpcBootstrapPath: opts.grpc,
      probeDestination: "127.0.0.1",
      now: opts.now,
      processStartMs: 0,
    });
    const ac = new AbortController();
    await s.start(ac.signal);
    cleanups.push(() => {
      ac.abort();
      return s.stopped();
    });
    const get = async () => {
      const r = await fetch(`http://127.0.0.1:${s.port()}/healthz/ready`);
      return { status: r.status, body: await r.text() };
    };
    return { admin, s, get };
  }

  test("503 names every pending check with its error, then 200", async () => {
    let t = 10_000;
    const readiness = new Readiness(() => t);
    const dns = readiness.block("dns table received");
    dns.fail("istio DNS capture is turned ON and DNS lookup table is not ready yet");
    const cert = readiness.block("local xDS file loaded");
    t = 12_500;
    const { admin, get } = await server({ readiness, now: () => t });
    let r = await get();
    expect(r.status).toBe(503);
    expect(r.body).toBe(
      "not ready: 3 pending\n" +
        "dns table received: istio DNS capture is turned ON and DNS lookup table is not ready yet\n" +
        "local xDS file loaded: pending for 2.5s\n" +
        "envoy: config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected\n",
    );
    dns.clear();
    cert.clear();
    admin.state.stats = "cluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 1";
    r = await get();
    expect(r).toEqual({ status: 503, body: "not ready: 1 pending\nenvoy: failed to get readiness stats: server.state is not yet updated: \n" });
    admin.state.stats = LIVE;
    r = await get();
    expect(r).toEqual({ status: 200, body: "" });
    // "terminating" is one more named blocker
    readiness.block("terminating").fail("SIGTERM received, draining");
    r = await get();
    expect(r).toEqual({ status: 503, body: "not ready: 1 pending\nterminating: SIGTERM received, draining\n" });
  });

  test("readiness fails for exactly Istio's reasons: renewal trouble, a missing upstream stream and unwarmed certificates are warnings, not blockers", async () => {
    let t = 10_000;
    const readiness = new Readiness(() => t);
    readiness.warn("certificate renewal").fail("certificate expires in 3000s and renewing the workload certificate failed (attempt 4): UNAVAILABLE");
    readiness.warn("xds connected").fail("upstream istiod.istio-system.svc:15012: connection refused");
    readiness.warn("certificate warmed");
    t = 11_000;
    const { admin, get } = await server({ readiness, now: () => t });
    // Envoy itself is not ready: the body names Envoy as the one pending check, and adds the warnings.
    let r = await get();
    expect(r.status).toBe(503);
    expect(r.body).toBe(
      "not ready: 1 pending\n" +
        "envoy: config not received from XDS server (is Istiod running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected\n" +
        "warning: certificate renewal: certificate expires in 3000s and renewing the workload certificate failed (attempt 4): UNAVAILABLE\n" +
        "warning: xds connected: upstream istiod.istio-system.svc:15012: connection refused\n" +
        "warning: certificate warmed: pending for 1.0s\n",
    );
    // Envoy ready: the pod is ready although the warnings remain (Istio checks none of them).
    admin.state.stats = LIVE;
    r = await get();
    expect(r).toEqual({ status: 200, body: "" });
    expect(readiness.warnings().map((w) => w.name)).toEqual(["certificate renewal", "xds connected", "certificate warmed"]);
  });

  test("rejected config is named as such", async () => {
    const { get } = await server({ stats: "cluster_manager.cds.update_rejected: 2\nlistener_manager.lds.update_success: 1" });
    const r = await get();
    expect(r.status).toBe(503);
    expect(r.body).toContain("envoy: config received from XDS server, but was rejected: cds updates: 0 successful, 2 rejected");
  });

  test("admin API errors are reported, not thrown", async () => {
    const { admin, get } = await server({});
    admin.state.statsStatus = 500;
    const r = await get();
    expect(r.status).toBe(503);
    expect(r.body).toMatch(/^envoy: GET http:\/\/127\.0\.0\.1:\d+\/stats\?usedonly&filter=.*: HTTP 500: admin error$/m);
  });

  test("without Envoy (DISABLE_ENVOY) only the agent's checks count", async () => {
    const readiness = new Readiness();
    const { admin, get } = await server({ envoy: false, readiness });
    expect(await get()).toEqual({ status: 200, body: "" });
    expect(admin.state.queries.length).toBe(0);
    const b = readiness.block("dns table received");
    b.fail("istio DNS capture is turned ON and DNS lookup table is not ready yet");
    expect(await get()).toEqual({
      status: 503,
      body: "not ready: 1 pending\ndns table received: istio DNS capture is turned ON and DNS lookup table is not ready yet\n",
    });
  });

  test("a missing gRPC bootstrap is a pending check", async () => {
    const { get } = await server({ stats: LIVE, grpc: "/nonexistent/grpc-bootstrap.json" });
    const r = await get();
    expect(r.status).toBe(503);
    expect(r.body).toMatch(/^grpc bootstrap: failed loading \/nonexistent\/grpc-bootstrap\.json: /m);
  });

  test("startup duration is recorded once, at first readiness", async () => {
    const registry = newRegistry();
    const admin = startFakeEnvoyAdmin({ stats: LIVE });
    cleanups.push(admin.close);
    let t = 4_000;
    const s = new StatusServer({
      port: 0,
      hostname: "127.0.0.1",
      log: silentLogger(),
      registry,
      envoy: { adminHost: "127.0.0.1", adminPort: admin.port, prometheusHost: "127.0.0.1", prometheusPort: admin.port, mergeStats: false },
      probeDestination: "127.0.0.1",
      now: () => t,
      processStartMs: 1_500,
    });
    expect((await s.handle(new Request("http://x/healthz/ready"), "127.0.0.1")).status).toBe(200);
    t = 9_000;
    await s.handle(new Request("http://x/healthz/ready"), "127.0.0.1");
    expect(await registry.metrics()).toContain("istio_agent_startup_duration_seconds 2.5");
  });
});
