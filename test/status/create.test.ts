import { expect, test } from "bun:test";
import { loadAgentConfig } from "../../src/config/load.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createStatusServer, statusOptionsFrom } from "../../src/status/create.ts";
import { inputs } from "../config/support.ts";

const deps = () => ({ log: silentLogger(), registry: newRegistry(), readiness: new Readiness(), envoyEnabled: true, health: { reportHealth: () => {} } });

test("AgentConfig maps onto Istio's status server settings", () => {
  const cfg = loadAgentConfig(
    inputs({
      env: {
        INSTANCE_IP: "10.1.2.3",
        ISTIO_KUBE_APP_PROBERS: `{"/app-health/a/livez":{"tcpSocket":{"port":8080}}}`,
        ISTIO_PROMETHEUS_ANNOTATIONS: `{"scrape":"true","port":"9090"}`,
        METRICS_LOCALHOST_ACCESS_ONLY: "true",
        PROXY_CONFIG: JSON.stringify({ statusPort: 15999, proxyAdminPort: 15555, readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 5 } }),
      },
    }),
  ).config;
  const o = statusOptionsFrom(cfg, deps());
  expect(o.port).toBe(15999);
  expect(o.envoy).toEqual({ adminHost: "127.0.0.1", adminPort: 15555, prometheusHost: "127.0.0.1", prometheusPort: 15090, mergeStats: true });
  expect(o.probeDestination).toBe("10.1.2.3");
  expect(o.probeSourceAddress).toBe("127.0.0.6");
  expect(o.prometheusAnnotations).toBe(`{"scrape":"true","port":"9090"}`);
  expect(o.metricsLocalhostOnly).toBe(true);
  expect(o.grpcBootstrapPath).toBe("./etc/istio/proxy/grpc-bootstrap.json");
  expect(o.profiling).toBe(true);
  expect(o.workloadHealth?.config).toMatchObject({ periodMs: 5000, probe: { kind: "tcpSocket", host: "10.1.2.3", port: 8080 } });
});

test("no Envoy, legacy localhost destination, gateways get no app metrics, IPv6 pod", () => {
  const cfg = loadAgentConfig(
    inputs({
      type: "router",
      env: {
        INSTANCE_IP: "fd00::7",
        REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION: "true",
        ISTIO_PROMETHEUS_ANNOTATIONS: `{"port":"9090"}`,
        PILOT_AGENT_MERGE_ENVOY_STATS: "false",
      },
    }),
  ).config;
  const o = statusOptionsFrom(cfg, { ...deps(), envoyEnabled: false, grpcBootstrapCheck: false });
  expect(o.envoy).toBeUndefined();
  expect(o.probeDestination).toBe("localhost");
  expect(o.probeSourceAddress).toBe("::6");
  expect(o.prometheusAnnotations).toBeUndefined();
  expect(o.grpcBootstrapPath).toBeUndefined();
  expect(statusOptionsFrom(cfg, deps()).envoy).toMatchObject({ adminHost: "::1", mergeStats: false });
});

test("createStatusServer starts on the configured port and stops", async () => {
  const cfg = loadAgentConfig(inputs()).config;
  cfg.proxyConfig = { ...cfg.proxyConfig, statusPort: 0 }; // config validation wants 1..65535; tests use an ephemeral port
  const s = createStatusServer(cfg, { ...deps(), envoyEnabled: false, grpcBootstrapCheck: false });
  const ac = new AbortController();
  await s.start(ac.signal);
  expect(s.name).toBe("status");
  expect((await fetch(`http://127.0.0.1:${s.port()}/healthz/ready`)).status).toBe(200);
  ac.abort();
  await s.stopped?.();
});
