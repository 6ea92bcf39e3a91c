// Known differences in what the agents hand Envoy, shared by the differentials that compare
// Envoy's arguments, the bootstrap and the gRPC bootstrap (bootstrap-diff, injection-diff). Each
// is reported in docs/compat.md ("found by the differential suite").

import type { AgentRun } from "./agent-run.ts";

export type Doc = "start" | "argv" | "bootstrap" | "grpc";

export interface Expected<C> {
  doc: Doc;
  path: RegExp;
  applies?: (c: C) => boolean;
  reason: string;
}

export const ENVOY_EXPECTED: Expected<unknown>[] = [
  {
    doc: "argv",
    path: /^\[1\]$/,
    reason: "Envoy's -c: Istio passes the relative etc/istio/proxy/envoy-rev.json, we pass an absolute path",
  },
  {
    doc: "grpc",
    path: /^xds_servers\[0\]\.server_uri$/,
    reason:
      "grpc-bootstrap.json server_uri: Istio writes unix:///etc/istio/proxy/XDS (the relative path made absolute from /), we write the real absolute path",
  },
];

/** Envoy's argv, the bootstrap and the gRPC bootstrap of a run, parsed for jsonDiff. */
export function comparableDocs(r: AgentRun): { argv: unknown; bootstrap: unknown; grpc: unknown } {
  const parse = (s?: string) => {
    if (s === undefined) return undefined;
    try {
      return JSON.parse(s);
    } catch {
      return `unparsable: ${s.slice(0, 200)}`;
    }
  };
  return { argv: r.argv, bootstrap: parse(r.bootstrap), grpc: parse(r.grpcBootstrap) };
}
