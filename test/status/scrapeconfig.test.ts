import { describe, expect, test } from "bun:test";
import {
  FMT_OPENMETRICS_0_0_1,
  FMT_OPENMETRICS_1_0_0,
  FMT_TEXT,
  combineFormats,
  negotiateFormat,
  rewriteAccept,
  stripEof,
} from "../../src/status/negotiate.ts";
import { RESERVED_PORTS, parseScrapeConfig } from "../../src/status/scrapeconfig.ts";

describe("ISTIO_PROMETHEUS_ANNOTATIONS", () => {
  test("unset, empty or scrape=false: no application metrics", () => {
    expect(parseScrapeConfig(undefined, 15020)).toBeUndefined();
    expect(parseScrapeConfig("", 15020)).toBeUndefined();
    expect(parseScrapeConfig(`{"scrape":"false","port":"8080"}`, 15020)).toBeUndefined();
  });
  test("single target with legacy defaults", () => {
    expect(parseScrapeConfig(`{"scrape":"true"}`, 15020)).toEqual({ targets: [{ port: 80, path: "/metrics" }], problems: [] });
    expect(parseScrapeConfig(`{"scrape":"true","port":"8080","path":"stats"}`, 15020)).toEqual({ targets: [{ port: 8080, path: "/stats" }], problems: [] });
  });
  test("multiple targets; a bad one is refused, the others kept", () => {
    const c = parseScrapeConfig(
      `{"scrape":"true","path":"/m","targets":[{"port":"8080"},{"port":9090,"path":"/other"},{"port":"15090"},{"port":"abc"}]}`,
      15020,
    )!;
    expect(c.targets).toEqual([
      { port: 8080, path: "/m" },
      { port: 9090, path: "/other" },
    ]);
    expect(c.problems).toEqual([
      "ISTIO_PROMETHEUS_ANNOTATIONS targets[2]: invalid prometheus scrape configuration: port 15090 is reserved by Istio for Envoy's Prometheus listener; serve application metrics on another port",
      'ISTIO_PROMETHEUS_ANNOTATIONS targets[3]: invalid prometheus scrape configuration: port "abc" is not a number',
    ]);
  });
  test("every reserved port is refused, the status port with the recursion warning", () => {
    for (const p of RESERVED_PORTS.keys()) {
      const c = parseScrapeConfig(`{"scrape":"true","port":"${p}"}`, 15020)!;
      expect(c.targets).toEqual([]);
      expect(c.problems[0]).toContain(
        p === 15020 ? "application port is the same as agent port (15020), which may lead to a recursive loop" : `port ${p} is reserved by Istio`,
      );
    }
    const c = parseScrapeConfig(`{"scrape":"true","port":"16000"}`, 16000)!;
    expect(c.problems[0]).toContain("prometheus.io/port=16000");
    expect(parseScrapeConfig(`{"port":"70000"}`, 15020)!.problems[0]).toContain("port 70000 is not in 1-65535");
  });
  test("bad JSON is reported, nothing scraped", () => {
    const c = parseScrapeConfig(`{"scrape":`, 15020)!;
    expect(c.targets).toEqual([]);
    expect(c.problems[0]).toStartWith("ISTIO_PROMETHEUS_ANNOTATIONS: failed to unmarshal");
  });
});

describe("content negotiation", () => {
  const prometheusDefault =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
  const cases: [string | null, "envoy" | "app", string][] = [
    [null, "envoy", "text/plain;version=0.0.4"],
    ["*/*", "app", "text/plain;version=0.0.4"],
    ["*", "envoy", "text/plain;version=0.0.4"],
    ["application/*", "app", "application/openmetrics-text;version=0.0.1"],
    ["application/*", "envoy", "text/plain;version=0.0.4"],
    ["application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "app", "text/plain;version=0.0.4"],
    [prometheusDefault, "envoy", "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3"],
    [
      prometheusDefault,
      "app",
      "application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3",
    ],
  ];
  for (const [accept, part, want] of cases) test(`${part}: ${accept?.slice(0, 50)}`, () => expect(rewriteAccept(accept, part)).toBe(want));

  test("response format follows the application's", () => {
    expect(negotiateFormat("application/openmetrics-text; version=1.0.0; charset=utf-8")).toBe(FMT_OPENMETRICS_1_0_0);
    expect(negotiateFormat("application/openmetrics-text; version=0.0.1")).toBe(FMT_OPENMETRICS_0_0_1);
    expect(negotiateFormat("application/openmetrics-text")).toBe(FMT_OPENMETRICS_0_0_1);
    expect(negotiateFormat("application/openmetrics-text; version=2.0.0")).toBe(FMT_TEXT);
    expect(negotiateFormat("text/plain; version=0.0.4")).toBe(FMT_TEXT);
    expect(negotiateFormat(undefined)).toBe(FMT_TEXT);
    expect(combineFormats([FMT_OPENMETRICS_1_0_0, FMT_OPENMETRICS_1_0_0])).toBe(FMT_OPENMETRICS_1_0_0);
    expect(combineFormats([FMT_OPENMETRICS_1_0_0, FMT_OPENMETRICS_0_0_1])).toBe(FMT_OPENMETRICS_0_0_1);
    expect(combineFormats([FMT_OPENMETRICS_1_0_0, FMT_TEXT])).toBe(FMT_TEXT);
  });

  test("stripEof", () => {
    expect(stripEof("a 1\n# EOF\n")).toBe("a 1\n");
    expect(stripEof("a 1\n# EOF")).toBe("a 1\n");
    expect(stripEof("# EOFISH 1\n")).toBe("# EOFISH 1\n");
  });
});
