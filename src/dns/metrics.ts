// The DNS proxy's metrics. Names as Istio's agent exports them (pkg/dns/client/monitoring.go,
// with the agent's `istio_agent_` prefix), plus one of ours for dropped packets.

import { counter, histogram, type Counter, type Histogram, type Registry } from "../lib/metrics.ts";

export interface DnsMetrics {
  requests: Counter;
  upstreamRequests: Counter;
  upstreamFailures: Counter;
  upstreamDuration: Histogram;
  /** Ours: packets that were not a parsable DNS query (never answered). */
  dropped: Counter<"reason">;
}

export function dnsMetrics(reg: Registry): DnsMetrics {
  return {
    requests: counter(reg, "istio_agent_dns_requests_total", "Total number of DNS requests."),
    upstreamRequests: counter(reg, "istio_agent_dns_upstream_requests_total", "Total number of DNS requests forwarded to upstream."),
    upstreamFailures: counter(reg, "istio_agent_dns_upstream_failures_total", "Total number of DNS failures."),
    upstreamDuration: histogram(
      reg,
      "istio_agent_dns_upstream_request_duration_seconds",
      "Total time in seconds Istio takes to get DNS response from upstream.",
      [0.001, 0.005, 0.01, 0.1, 1, 5],
    ),
    dropped: counter(reg, "istio_agent_dns_dropped_packets_total", "DNS packets dropped without an answer because they are not a parsable query.", ["reason"]),
  };
}
