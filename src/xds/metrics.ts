// The xDS proxy's metrics, Istio's names (reference §6) plus bytes relayed and rejected peers.

import { counter, type Counter, type Registry } from "../lib/metrics.ts";
import { pilotXdsMetrics } from "../lib/pilot-xds-metrics.ts";
import { Code, type GrpcStatus } from "./types.ts";

export interface XdsMetrics {
  istiodConnectionFailures: Counter;
  istiodConnectionTerminations: Counter<"type">;
  envoyConnectionTerminations: Counter<"type">;
  requests: Counter;
  responses: Counter;
  bytes: Counter<"direction">;
  /** `bytes` per direction, resolved once: they are counted on every chunk. */
  bytesUpstream: { inc(n: number): void };
  bytesDownstream: { inc(n: number): void };
  rejectedPeers: Counter;
  /** istio_agent_pilot_xds_recv_max: the largest request Envoy sent on the XDS socket. */
  recvMax: { record(bytes: number): void };
}

export function xdsMetrics(reg: Registry): XdsMetrics {
  const bytes: Counter<"direction"> = counter(reg, "istio_agent_xds_proxy_bytes", "Bytes relayed by the xDS proxy (direction=upstream: Envoy to istiod; downstream: istiod to Envoy)", ["direction"]);
  return {
    istiodConnectionFailures: counter(reg, "istio_agent_istiod_connection_failures", "The total number of connection failures to Istiod"),
    istiodConnectionTerminations: counter(reg, "istio_agent_istiod_connection_terminations", "The total number of connection errors to Istiod", ["type"]),
    envoyConnectionTerminations: counter(reg, "istio_agent_envoy_connection_terminations", "The total number of connection errors from envoy", ["type"]),
    requests: counter(reg, "istio_agent_xds_proxy_requests", "The total number of Xds Proxy Requests"),
    responses: counter(reg, "istio_agent_xds_proxy_responses", "The total number of Xds Proxy Responses"),
    bytes,
    bytesUpstream: bytes.labels({ direction: "upstream" }),
    bytesDownstream: bytes.labels({ direction: "downstream" }),
    rejectedPeers: counter(reg, "istio_agent_xds_rejected_peers", "Connections on the XDS socket refused by the SO_PEERCRED check (XDS_AUTHORIZED_UIDS)"),
    recvMax: pilotXdsMetrics(reg).recvMax,
  };
}

/** Istio counts graceful ends (EOF, cancel, deadline, GOAWAY/transport closing) as `cancelled`. */
export function terminationType(s: GrpcStatus): "cancelled" | "error" {
  if (s.code === Code.OK || s.code === Code.CANCELLED || s.code === Code.DEADLINE_EXCEEDED) return "cancelled";
  if (s.code === Code.UNAVAILABLE && /transport is closing|client disconnected|EOF|GOAWAY/i.test(s.message)) return "cancelled";
  return "error";
}
