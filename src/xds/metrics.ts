// The xDS proxy's metrics, Istio's names (reference §6) plus bytes relayed and rejected peers.

import { counter, type Counter, type Registry } from "../lib/metrics.ts";
import { pilotXdsMetrics } from "../lib/pilot-xds-metrics.ts";
import { Code, type GrpcStatus } from "./types.ts";

/** A count kept as a plain number on the hot path and moved into its metric when it is scraped. */
export interface Tally {
  inc(n?: number): void;
}

export interface XdsMetrics {
  istiodConnectionFailures: Counter;
  istiodConnectionTerminations: Counter<"type">;
  envoyConnectionTerminations: Counter<"type">;
  /** istio_agent_xds_proxy_requests / _responses: counted per message, so tallies. */
  requests: Tally;
  responses: Tally;
  bytes: Counter<"direction">;
  /** `bytes` per direction: counted on every chunk, so tallies. */
  bytesUpstream: Tally;
  bytesDownstream: Tally;
  rejectedPeers: Counter;
  /** istio_agent_pilot_xds_recv_max: the largest request Envoy sent on the XDS socket. */
  recvMax: { record(bytes: number): void };
}

export function xdsMetrics(reg: Registry): XdsMetrics {
  const bytes: Counter<"direction"> = counter(
    reg,
    "istio_agent_xds_proxy_bytes",
    "Bytes relayed by the xDS proxy (direction=upstream: Envoy to istiod; downstream: istiod to Envoy)",
    ["direction"],
  );
  return {
    istiodConnectionFailures: counter(reg, "istio_agent_istiod_connection_failures", "The total number of connection failures to Istiod"),
    istiodConnectionTerminations: counter(reg, "istio_agent_istiod_connection_terminations", "The total number of connection errors to Istiod", ["type"]),
    envoyConnectionTerminations: counter(reg, "istio_agent_envoy_connection_terminations", "The total number of connection errors from envoy", ["type"]),
    requests: tally(counter(reg, "istio_agent_xds_proxy_requests", "The total number of Xds Proxy Requests")),
    responses: tally(counter(reg, "istio_agent_xds_proxy_responses", "The total number of Xds Proxy Responses")),
    bytes,
    bytesUpstream: tally(bytes, { direction: "upstream" }),
    bytesDownstream: tally(bytes, { direction: "downstream" }),
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

/**
 * A Tally feeding `c` (with `labels`): increments add to a number, and the metric's collect hook,
 * which the registry runs on every scrape before reading the values, moves it into the counter.
 * A prom-client inc() hashes its labels and validates its argument on every call; per chunk of a
 * relayed push that was measurable. Several tallies may feed one counter (the hooks chain).
 */
export function tally<L extends string>(c: Counter<L>, labels?: Partial<Record<L, string | number>>): Tally {
  let pending = 0;
  const hooked = c as unknown as { collect?: () => unknown };
  const previous = hooked.collect;
  hooked.collect = function (this: unknown) {
    if (pending > 0) {
      if (labels) c.inc(labels, pending);
      else c.inc(pending);
      pending = 0;
    }
    return previous?.call(this);
  };
  return {
    inc(n = 1) {
      pending += n;
    },
  };
}
