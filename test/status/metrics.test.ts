import { afterEach, describe, expect, test } from "bun:test";
import parse, { type ParsedFamily } from "parse-prometheus-text-format";
import { gunzipSync } from "node:zlib";
import { memoryLogger } from "../../src/lib/log.ts";
import { counter, newRegistry } from "../../src/lib/metrics.ts";
import { addProcessMetrics } from "../../src/lib/runtime-metrics.ts";
import { FMT_OPENMETRICS_0_0_1, FMT_OPENMETRICS_1_0_0, FMT_TEXT } from "../../src/status/negotiate.ts";
import { StatusServer, type StatusServerOptions } from "../../src/status/server.ts";
import { closedPort, startFakeEnvoyAdmin, startHttpApp } from "../support/status-apps.ts";

const ENVOY_PAGE = `# TYPE envoy_cluster_upstream_rq_total counter
envoy_cluster_upstream_rq_total{cluster_name="outbound|80||web.default.svc.cluster.local"} 42
# TYPE envoy_server_live gauge
envoy_server_live 1
`;
const APP_TEXT = `# HELP app_requests_total Requests.
# TYPE app_requests_total counter
app_requests_total{code="200"} 7
`;
const APP_OM = (name: string) => `# HELP ${name} Things.
# TYPE ${name} gauge
${name}{kind="a"} 3
# EOF
`;
const OM_1 = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(
  opts: {
    annotations?: string;
    envoyPage?: string | (() => ReadableStream<Uint8Array>);
    envoyPort?: number;
    merge?: boolean;
    extra?: Partial<StatusServerOptions>;
  } = {},
) {
  const envoy = startFakeEnvoyAdmin({ prometheus: opts.envoyPage ?? ENVOY_PAGE });
  cleanups.push(envoy.close);
  const registry = newRegistry();
  await addProcessMetrics(registry); // awaited: the process collectors load asynchronously

  counter(registry, "istio_agent_pilot_xds_total", "test counter").inc(3);
  const logs = memoryLogger();
  const s = new StatusServer({
    port: 0,
    hostname: "127.0.0.1",
    log: logs.log,
    registry,
    envoy: {
      adminHost: "127.0.0.1",
      adminPort: envoy.port,
      prometheusHost: "127.0.0.1",
      prometheusPort: opts.envoyPort ?? envoy.port,
      mergeStats: opts.merge ?? true,
    },
    probeDestination: "127.0.0.1",
    prometheusAnnotations: opts.annotations,
    appMetricsHost: "127.0.0.1",
    ...opts.extra,
  });
  const ac = new AbortController();
  await s.start(ac.signal);
  cleanups.push(() => {
    ac.abort();
    return s.stopped();
  });
  const scrape = async (headers: Record<string, string> = {}, path = "/stats/prometheus") => {
    const r = await fetch(`http://127.0.0.1:${s.port()}${path}`, { headers: { "accept-encoding": "identity", ...headers } });
    return { status: r.status, type: r.headers.get("content-type"), body: await r.text() };
  };
  return { s, envoy, scrape, logs, registry };
}

/** Parse with a real Prometheus text parser; OpenMetrics pages must end in exactly one `# EOF`. */
function families(body: string, openMetrics = false): Map<string, ParsedFamily> {
  const eofs = body.match(/^# EOF$/gm)?.length ?? 0;
  if (openMetrics) {
    expect(eofs).toBe(1);
    expect(body.endsWith("# EOF\n")).toBe(true);
    body = body.slice(0, -"# EOF\n".length);
  } else {
    expect(eofs).toBe(0);
  }
  const parsed = parse(body);
  const out = new Map<string, ParsedFamily>();
  for (const f of parsed) {
    expect(out.has(f.name)).toBe(false); // no family split across parts
    out.set(f.name, f);
  }
  return out;
}
const value = (f: Map<string, ParsedFamily>, name: string, labels: Record<string, string> = {}) =>
  f.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value;

describe("merged scrape", () => {
  test("agent then Envoy, Prometheus text; Accept towards Envoy stays text; query passed on", async () => {
    const { scrape, envoy } = await setup();
    const r = await scrape({ accept: "application/openmetrics-text;version=1.0.0,*/*;q=0.1" }, "/stats/prometheus?usedonly&filter=envoy_server");
    expect(r.status).toBe(200);
    expect(r.type).toBe(FMT_TEXT);
    const f = families(r.body);
    expect(value(f, "istio_agent_pilot_xds_total")).toBe("3");
    expect(value(f, "istio_agent_scrapes_total")).toBe("1");
    expect(f.has("istio_agent_process_cpu_seconds_total")).toBe(true);
    expect(value(f, "envoy_cluster_upstream_rq_total")).toBe("42");
    expect(r.body.indexOf("istio_agent_scrapes_total")).toBeLessThan(r.body.indexOf("envoy_server_live"));
    expect(envoy.state.queries.at(-1)).toBe("prometheus?usedonly&filter=envoy_server|accept=text/plain;version=0.0.4;q=0.1");
  });

  test("/metrics is the same merge; PILOT_AGENT_MERGE_ENVOY_STATS=false leaves Envoy out", async () => {
    const { scrape } = await setup({ merge: false });
    const f = families((await scrape({}, "/metrics")).body);
    expect(f.has("istio_agent_scrapes_total")).toBe(true);
    expect(f.has("envoy_server_live")).toBe(false);
  });

  test("single text application target comes last", async () => {
    const app = startHttpApp({ "/metrics": () => new Response(APP_TEXT, { headers: { "content-type": "text/plain; version=0.0.4" } }) });
    cleanups.push(app.close);
    const { scrape } = await setup({ annotations: JSON.stringify({ scrape: "true", port: String(app.port), path: "/metrics" }) });
    const r = await scrape({ "user-agent": "Prometheus/3.0", accept: "*/*" });
    expect(r.type).toBe(FMT_TEXT);
    const f = families(r.body);
    expect(value(f, "app_requests_total", { code: "200" })).toBe("7");
    expect(value(f, "envoy_server_live")).toBe("1");
    expect(r.body.indexOf("envoy_server_live")).toBeLessThan(r.body.indexOf("app_requests_total"));
    expect(app.seen[0]!.headers["user-agent"]).toBe("Prometheus/3.0");
    expect(app.seen[0]!.headers.accept).toBe("text/plain;version=0.0.4");
  });

  test("single OpenMetrics target: OpenMetrics content type, one # EOF at the end", async () => {
    const app = startHttpApp({ "/m": () => new Response(APP_OM("app_things"), { headers: { "content-type": OM_1 } }) });
    cleanups.push(app.close);
    const { scrape } = await setup({ annotations: JSON.stringify({ scrape: "true", port: String(app.port), path: "/m" }) });
    const r = await scrape({ accept: "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.5" });
    expect(r.type).toBe(FMT_OPENMETRICS_1_0_0);
    const f = families(r.body, true);
    expect(value(f, "app_things", { kind: "a" })).toBe("3");
    expect(value(f, "envoy_server_live")).toBe("1");
    expect(app.seen[0]!.headers.accept).toBe("application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.5");
  });

  test("multiple targets: concatenated in order; all OpenMetrics keeps one # EOF; mixed falls back to text", async () => {
    const a = startHttpApp({ "/metrics": () => new Response(APP_OM("first_thing"), { headers: { "content-type": OM_1 } }) });
    const b = startHttpApp({
      "/stats": () => new Response(APP_OM("second_thing"), { headers: { "content-type": "application/openmetrics-text; version=0.0.1" } }),
    });
    const c = startHttpApp({ "/metrics": () => new Response(APP_TEXT, { headers: { "content-type": "text/plain" } }) });
    cleanups.push(a.close, b.close, c.close);
    const om = await setup({ annotations: JSON.stringify({ scrape: "true", targets: [{ port: String(a.port) }, { port: String(b.port), path: "/stats" }] }) });
    let r = await om.scrape({ accept: "application/openmetrics-text" });
    expect(r.type).toBe(FMT_OPENMETRICS_0_0_1);
    let f = families(r.body, true);
    expect(value(f, "first_thing", { kind: "a" })).toBe("3");
    expect(value(f, "second_thing", { kind: "a" })).toBe("3");
    expect(r.body.indexOf("first_thing")).toBeLessThan(r.body.indexOf("second_thing"));

    const mixed = await setup({ annotations: JSON.stringify({ scrape: "true", targets: [{ port: String(a.port) }, { port: String(c.port) }] }) });
    r = await mixed.scrape();
    expect(r.type).toBe(FMT_TEXT);
    f = families(r.body);
    expect(value(f, "first_thing", { kind: "a" })).toBe("3");
    expect(value(f, "app_requests_total", { code: "200" })).toBe("7");
  });

  test("a failing application never fails the scrape; failures are counted by type", async () => {
    const app = startHttpApp({ "/metrics": () => new Response("boom", { status: 500 }) });
    cleanups.push(app.close);
    const down = await closedPort();
    const { scrape, logs, registry } = await setup({
      annotations: JSON.stringify({ scrape: "true", targets: [{ port: String(app.port) }, { port: String(down) }] }),
    });
    for (let i = 0; i < 2; i++) {
      const r = await scrape();
      expect(r.status).toBe(200);
      expect(value(families(r.body), "envoy_server_live")).toBe("1");
    }
    const f = families(await registry.metrics());
    expect(value(f, "istio_agent_scrape_failures_total", { type: "application" })).toBe("4");
    expect(value(f, "istio_agent_scrapes_total")).toBe("2");
    expect(logs.lines.some((l) => l.includes(`error scraping http://127.0.0.1:${app.port}/metrics, status code: 500`))).toBe(true);
  });

  test("Envoy unreachable: agent and application metrics still served, envoy failure counted", async () => {
    const app = startHttpApp({ "/metrics": () => new Response(APP_TEXT) });
    cleanups.push(app.close);
    const { scrape, registry } = await setup({ envoyPort: await closedPort(), annotations: JSON.stringify({ port: String(app.port) }) });
    await scrape();
    const f = families((await scrape()).body);
    expect(value(f, "app_requests_total", { code: "200" })).toBe("7");
    expect(f.has("istio_agent_scrapes_total")).toBe(true);
    expect(value(families(await registry.metrics()), "istio_agent_scrape_failures_total", { type: "envoy" })).toBe("2");
  });

  test("X-Prometheus-Scrape-Timeout-Seconds bounds the application scrape and is passed on", async () => {
    const app = startHttpApp({
      "/metrics": async () => {
        await Bun.sleep(3000);
        return new Response(APP_TEXT);
      },
    });
    cleanups.push(app.close);
    const { scrape } = await setup({ annotations: JSON.stringify({ port: String(app.port) }) });
    const t0 = performance.now();
    const r = await scrape({ "x-prometheus-scrape-timeout-seconds": "0.5" });
    expect(performance.now() - t0).toBeLessThan(2500);
    expect(r.status).toBe(200);
    expect(families(r.body).has("envoy_server_live")).toBe(true);
    expect(app.seen[0]!.headers["x-prometheus-scrape-timeout-seconds"]).toBe("0.5");
    const f = families((await scrape({ "x-prometheus-scrape-timeout-seconds": "0.5" })).body);
    expect(Number(value(f, "istio_agent_scrape_failures_total", { type: "application" }))).toBeGreaterThanOrEqual(1);
  });

  test("Envoy's page is streamed, not buffered (Istio #32386)", async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const page = () =>
      new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode("# TYPE envoy_first gauge\nenvoy_first 1\n"));
          await released;
          c.enqueue(new TextEncoder().encode("# TYPE envoy_second gauge\nenvoy_second 2\n"));
          c.close();
        },
      });
    const { s } = await setup({ envoyPage: page });
    const res = await fetch(`http://127.0.0.1:${s.port()}/stats/prometheus`, { headers: { "accept-encoding": "identity" } });
    const reader = res.body!.getReader();
    let seen = "";
    const deadline = Date.now() + 5000;
    while (!seen.includes("envoy_first 1") && Date.now() < deadline) {
      const { value: chunk, done } = await reader.read();
      if (done) break;
      seen += new TextDecoder().decode(chunk);
    }
    // The first part reached the client while Envoy was still holding the rest back.
    expect(seen).toContain("envoy_first 1");
    expect(seen).not.toContain("envoy_second");
    release();
    for (;;) {
      const { value: chunk, done } = await reader.read();
      if (done) break;
      seen += new TextDecoder().decode(chunk);
    }
    expect(families(seen).get("envoy_second")?.metrics[0]?.value).toBe("2");
  });

  test("gzip when asked", async () => {
    const { s } = await setup();
    const res = await fetch(`http://127.0.0.1:${s.port()}/stats/prometheus`, { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit);
    expect(res.headers.get("content-encoding")).toBe("gzip");
    const body = gunzipSync(Buffer.from(await res.arrayBuffer())).toString();
    expect(families(body).has("envoy_server_live")).toBe(true);
  });

  test("METRICS_LOCALHOST_ACCESS_ONLY: 403 for other clients", async () => {
    const { s } = await setup({ extra: { metricsLocalhostOnly: true } });
    const far = await s.handle(new Request("http://x/stats/prometheus"), "10.1.2.3");
    expect(far.status).toBe(403);
    expect(await far.text()).toBe("Only requests from localhost are allowed");
    expect((await s.handle(new Request("http://x/metrics"), "::ffff:127.0.0.1")).status).toBe(200);
  });
});

describe("concatStreams", () => {
  const { concatStreams } = require("../../src/status/merge.ts") as typeof import("../../src/status/merge.ts");
  const enc = (s: string) => new TextEncoder().encode(s);
  test("ends each part's last line; a part failing mid-way is cut at its last whole line and reported, the next follows", async () => {
    let pulls = 0;
    const failing = new ReadableStream<Uint8Array>(
      {
        pull(c) {
          if (pulls++ === 0) c.enqueue(enc("envoy_a 1\nenvoy_b"));
          else c.error(new Error("connection reset"));
        },
      },
      { highWaterMark: 0 },
    );
    const errors: [number, string][] = [];
    const out = concatStreams([async () => enc("agent 1"), async () => failing, async () => undefined, async () => enc("app 2\n")], (i, e) =>
      errors.push([i, (e as Error).message]),
    );
    expect(await new Response(out).text()).toBe("agent 1\nenvoy_a 1\napp 2\n");
    expect(errors).toEqual([[1, "connection reset"]]);
  });
});
