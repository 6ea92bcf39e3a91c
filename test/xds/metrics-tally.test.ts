// The xDS proxy's per-message and per-chunk counts are plain numbers moved into their Prometheus
// counters at scrape time: what a scrape shows must equal what was counted, once, under Istio's
// names, with every direction label kept apart.

import { expect, test } from "bun:test";
import { counter, newRegistry } from "../../src/lib/metrics.ts";
import { tally, xdsMetrics } from "../../src/xds/metrics.ts";

const line = (text: string, series: string) => text.split("\n").find((l) => l.startsWith(series + " "));

test("relay tallies appear in the scrape under Istio's names, counted once across scrapes", async () => {
  const reg = newRegistry();
  const m = xdsMetrics(reg);
  m.responses.inc();
  m.responses.inc();
  m.requests.inc();
  m.bytesDownstream.inc(1000);
  m.bytesDownstream.inc(24);
  m.bytesUpstream.inc(7);
  const first = await reg.metrics();
  expect(line(first, "istio_agent_xds_proxy_responses")).toBe("istio_agent_xds_proxy_responses 2");
  expect(line(first, "istio_agent_xds_proxy_requests")).toBe("istio_agent_xds_proxy_requests 1");
  expect(line(first, 'istio_agent_xds_proxy_bytes{direction="downstream"}')).toBe('istio_agent_xds_proxy_bytes{direction="downstream"} 1024');
  expect(line(first, 'istio_agent_xds_proxy_bytes{direction="upstream"}')).toBe('istio_agent_xds_proxy_bytes{direction="upstream"} 7');
  // A second scrape with nothing new shows the same totals (moved, not added again).
  const second = await reg.metrics();
  expect(line(second, "istio_agent_xds_proxy_responses")).toBe("istio_agent_xds_proxy_responses 2");
  m.responses.inc();
  m.bytesUpstream.inc(3);
  const third = await reg.metrics();
  expect(line(third, "istio_agent_xds_proxy_responses")).toBe("istio_agent_xds_proxy_responses 3");
  expect(line(third, 'istio_agent_xds_proxy_bytes{direction="upstream"}')).toBe('istio_agent_xds_proxy_bytes{direction="upstream"} 10');
  expect(line(third, 'istio_agent_xds_proxy_bytes{direction="downstream"}')).toBe('istio_agent_xds_proxy_bytes{direction="downstream"} 1024');
});

test("two tallies on one counter and an earlier collect hook all run", async () => {
  const reg = newRegistry();
  const c = counter(reg, "t_total", "t", ["k"]);
  const a = tally(c, { k: "a" });
  const b = tally(c, { k: "b" });
  a.inc(2);
  b.inc(5);
  a.inc();
  const text = await reg.metrics();
  expect(line(text, 't_total{k="a"}')).toBe('t_total{k="a"} 3');
  expect(line(text, 't_total{k="b"}')).toBe('t_total{k="b"} 5');
});
