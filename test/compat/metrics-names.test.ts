// Metrics Istio's agent exports keep their names in ours; Go's runtime metrics are absent and the
// runtime's own are named for Bun. The names below are literals read from istio/istio at 86c9f01
// (the file beside each; the agent exports pkg/monitoring metrics with the prefix istio_agent_).
// The compiled agent runs as a sidecar in a fake mesh; after readiness, one SDS fetch (as Envoy
// would) and a scrape of the status port, each name must be there.

import { afterAll, describe, expect, test } from "bun:test";
import { discoveryTypes } from "../support/fake-istiod.ts";
import { greeterTable } from "../e2e/envoy-resources.ts";
import { fetchSecret, startMesh, type Mesh } from "../e2e/mesh.ts";
import { httpGet, until } from "../e2e/pod.ts";

const ISTIO_AGENT_METRICS: [string, string][] = [
  ["pilot/cmd/pilot-agent/metrics/metrics.go", "istio_agent_startup_duration_seconds"],
  ["pilot/cmd/pilot-agent/metrics/metrics.go", "istio_agent_scrapes_total"],
  ["pilot/cmd/pilot-agent/metrics/metrics.go", "istio_agent_scrape_failures_total"],
  ["pkg/istio-agent/metrics/metrics.go", "istio_agent_istiod_connection_failures"],
  ["pkg/istio-agent/metrics/metrics.go", "istio_agent_xds_proxy_requests"],
  ["pkg/istio-agent/metrics/metrics.go", "istio_agent_xds_proxy_responses"],
  ["security/pkg/nodeagent/cache/monitoring.go", "istio_agent_outgoing_latency"],
  ["security/pkg/nodeagent/cache/monitoring.go", "istio_agent_num_outgoing_requests"],
  ["security/pkg/nodeagent/cache/monitoring.go", "istio_agent_num_file_watcher_failures_total"],
  ["security/pkg/nodeagent/cache/monitoring.go", "istio_agent_num_file_secret_failures_total"],
  ["security/pkg/nodeagent/cache/monitoring.go", "istio_agent_cert_expiry_seconds"],
  ["security/pkg/monitoring/monitoring.go", "istio_agent_num_outgoing_retries"],
  ["pkg/xds/monitoring.go", "istio_agent_pilot_xds_send_time"],
  ["pkg/xds/monitoring.go", "istio_agent_pilot_xds_recv_max"],
  ["pkg/xds/monitoring.go", "istio_agent_pilot_xds_expired_nonce"],
  ["pkg/xds/monitoring.go", "istio_agent_pilot_total_xds_rejects"],
  ["prometheus process collector", "istio_agent_process_cpu_seconds_total"],
  ["prometheus process collector", "istio_agent_process_resident_memory_bytes"],
  ["prometheus process collector", "istio_agent_process_open_fds"],
];

let mesh: Mesh | undefined;
afterAll(async () => mesh?.cleanup());

describe("metric names from the compiled agent", () => {
  test("Istio's agent metric names are exported; no Go runtime metrics; the runtime's own named for Bun", async () => {
    mesh = await startMesh(greeterTable(1), { env: { E2E_ENVOY_XDS: "1" } });
    const pod = mesh.pod;
    await until(pod, "GET /healthz/ready answers 200", async () =>
      (await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status === 200 ? true : undefined,
    );
    const { Req } = discoveryTypes();
    const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());
    await fetchSecret(pod.path("var/run/secrets/workload-spiffe-uds/socket"), "default", enc);
    const text = await until(pod, "a scrape carrying the SDS send time and the process metrics", async () => {
      const r = await httpGet(`http://127.0.0.1:${pod.statusPort}/stats/prometheus`);
      return /^istio_agent_pilot_xds_send_time_count [1-9]/m.test(r.body) && r.body.includes("istio_agent_process_cpu_seconds_total") ? r.body : undefined;
    });
    const declared = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    expect(ISTIO_AGENT_METRICS.filter(([, name]) => !declared.has(name)).map(([file, name]) => `${file}: ${name}`)).toEqual([]);
    expect(text).toMatch(/^istio_agent_num_outgoing_requests\{request_type="csr"\} [1-9]/m);
    expect(text).toMatch(/^istio_agent_pilot_xds_recv_max [1-9]/m);
    expect([...declared].filter((n) => n.startsWith("istio_agent_go_") || n.includes("nodejs"))).toEqual([]);
    expect(declared.has("istio_agent_bun_heap_size_bytes")).toBe(true);
    expect(text).toMatch(/^istio_agent_bun_info\{version="\d+\.\d+\.\d+[^"]*"\} 1$/m);
  }, 40_000);
});
