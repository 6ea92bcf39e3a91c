// The `pilot_xds_*` metrics Istio's agent exports through its own xDS servers (pkg/xds
// monitoring.go, shared with istiod): the SDS server records NACKs, stale nonces and send times,
// the XDS proxy's gRPC server the largest request received. With the agent's prefix they are
// istio_agent_pilot_xds_* and istio_agent_pilot_total_xds_rejects. `type` is Istio's short
// type name (pkg/model GetMetricType): sds, cds, lds, ...

import { counter, gauge, histogram, type Counter, type Histogram, type Registry } from "./metrics.ts";

export interface PilotXdsMetrics {
  expiredNonce: Counter<"type">;
  totalRejects: Counter<"type">;
  /** Seconds taken by one response send. */
  sendTime: Histogram;
  /** Keeps the largest request size seen (bytes). */
  recvMax: { record(bytes: number): void };
}

export function pilotXdsMetrics(reg: Registry): PilotXdsMetrics {
  const max = gauge(reg, "istio_agent_pilot_xds_recv_max", "The maximum size request we have received so far.");
  let largest = 0;
  return {
    expiredNonce: counter(reg, "istio_agent_pilot_xds_expired_nonce", "Total number of XDS requests with an expired nonce.", ["type"]),
    totalRejects: counter(reg, "istio_agent_pilot_total_xds_rejects", "Total number of XDS responses from pilot rejected by proxy.", ["type"]),
    sendTime: histogram(
      reg,
      "istio_agent_pilot_xds_send_time",
      "Total time in seconds Pilot takes to send generated configuration.",
      [0.01, 0.1, 1, 3, 5, 10, 20, 30],
    ),
    recvMax: {
      record(bytes) {
        if (bytes <= largest) return;
        largest = bytes;
        max.set(bytes);
      },
    },
  };
}
