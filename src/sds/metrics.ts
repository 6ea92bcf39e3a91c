// The certificate side's metrics, Istio's names with the istio_agent_ prefix (reference §7).
// cert_expiry_seconds is computed at scrape time from the cached expiry and the injected clock.

import { counter, gauge, type Registry } from "../lib/metrics.ts";
import type { Clock } from "../lib/clock.ts";

export class SecretMetrics {
  readonly outgoingLatency;
  readonly outgoingRequests;
  readonly failedOutgoingRequests;
  readonly outgoingRetries;
  readonly fileWatcherFailures;
  readonly fileSecretFailures;
  private readonly expiries = new Map<string, number>();

  constructor(reg: Registry, clock: Clock) {
    this.outgoingLatency = counter(
      reg,
      "istio_agent_outgoing_latency",
      "The latency of outgoing requests (e.g. to a token exchange server, CA, etc.) in milliseconds.",
      ["request_type"],
    );
    this.outgoingRequests = counter(reg, "istio_agent_num_outgoing_requests", "Number of total outgoing requests (e.g. to a token exchange server, CA, etc.)", [
      "request_type",
    ]);
    this.failedOutgoingRequests = counter(
      reg,
      "istio_agent_num_failed_outgoing_requests",
      "Number of failed outgoing requests (e.g. to a token exchange server, CA, etc.)",
      ["request_type"],
    );
    this.outgoingRetries = counter(reg, "istio_agent_num_outgoing_retries", "Number of outgoing retry requests (e.g. to a token exchange server, CA, etc.)", [
      "request_type",
    ]);
    this.fileWatcherFailures = counter(reg, "istio_agent_num_file_watcher_failures_total", "Number of times the agent failed to watch a certificate file.");
    this.fileSecretFailures = counter(reg, "istio_agent_num_file_secret_failures_total", "Number of times the agent failed to read a certificate file.");
    const expiries = this.expiries;
    const existing = reg.getSingleMetric("istio_agent_cert_expiry_seconds");
    if (!existing) {
      gauge(
        reg,
        "istio_agent_cert_expiry_seconds",
        "The time remaining, in seconds, before the certificate chain will expire. A negative value indicates the cert is expired.",
        ["resource_name"],
      );
    }
    const g = reg.getSingleMetric("istio_agent_cert_expiry_seconds") as unknown as {
      collect?: () => void;
      set: (l: Record<string, string>, v: number) => void;
      reset: () => void;
    };
    // Recompute on every scrape.
    (g as { collect?: () => void }).collect = () => {
      g.reset();
      for (const [name, exp] of expiries) g.set({ resource_name: name }, (exp - clock.now()) / 1000);
    };
  }

  setExpiry(resource: string, expireMs: number): void {
    this.expiries.set(resource, expireMs);
  }
}
