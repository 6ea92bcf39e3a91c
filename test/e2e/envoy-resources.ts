// Encodes the four xDS resources that route `xds:///greeter.demo:50051` to one endpoint, with
// Envoy's own protos from @grpc/grpc-js-xds/deps (tests only), as the fake istiod serves them.

import type { AnyResource } from "../support/fake-istiod.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const envoyRoot = envoyProtoRoot;

export const typeUrl = (name: string) => `type.googleapis.com/${name}`;
export const LISTENER = typeUrl("envoy.config.listener.v3.Listener");
export const ROUTE = typeUrl("envoy.config.route.v3.RouteConfiguration");
export const CLUSTER = typeUrl("envoy.config.cluster.v3.Cluster");
export const ENDPOINT = typeUrl("envoy.config.endpoint.v3.ClusterLoadAssignment");

/** Encode `obj` (Envoy's snake_case field names) as message `name`. */
export function encode(name: string, obj: Record<string, unknown>): Uint8Array {
  const t = envoyRoot().lookupType(name);
  return t.encode(t.fromObject(obj)).finish();
}

/** Type URL -> resources: listener `greeter.demo:50051` -> route -> cluster -> 127.0.0.1:`port`. */
export function greeterTable(port: number): Map<string, AnyResource[]> {
  const router = encode("envoy.extensions.filters.http.router.v3.Router", {});
  const hcm = encode("envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", {
    rds: { config_source: { ads: {} }, route_config_name: "greeter-route" },
    http_filters: [{ name: "router", typed_config: { type_url: typeUrl("envoy.extensions.filters.http.router.v3.Router"), value: router } }],
  });
  const one = (url: string, type: string, obj: Record<string, unknown>): [string, AnyResource[]] => [url, [{ typeUrl: url, value: encode(type, obj) }]];
  return new Map([
    one(LISTENER, "envoy.config.listener.v3.Listener", {
      name: "greeter.demo:50051",
      api_listener: { api_listener: { type_url: typeUrl("envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"), value: hcm } },
    }),
    one(ROUTE, "envoy.config.route.v3.RouteConfiguration", {
      name: "greeter-route",
      virtual_hosts: [{ name: "vh", domains: ["*"], routes: [{ match: { prefix: "" }, route: { cluster: "greeter-cluster" } }] }],
    }),
    one(CLUSTER, "envoy.config.cluster.v3.Cluster", {
      name: "greeter-cluster",
      type: "EDS",
      eds_cluster_config: { eds_config: { ads: {} } },
      lb_policy: "ROUND_ROBIN",
    }),
    one(ENDPOINT, "envoy.config.endpoint.v3.ClusterLoadAssignment", {
      cluster_name: "greeter-cluster",
      endpoints: [
        {
          locality: { region: "r1" },
          load_balancing_weight: { value: 1 },
          lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port } } } }],
        },
      ],
    }),
  ]);
}

/** A SotW DiscoveryResponse decoded with Envoy's own protos. */
export function decodeDiscoveryResponse(bytes: Uint8Array): {
  typeUrl: string;
  versionInfo: string;
  nonce: string;
  resources: { typeUrl: string; value: Uint8Array }[];
} {
  const t = envoyRoot().lookupType("envoy.service.discovery.v3.DiscoveryResponse");
  const o = t.toObject(t.decode(bytes), { defaults: true }) as {
    type_url: string;
    version_info: string;
    nonce: string;
    resources: { type_url: string; value: Uint8Array }[];
  };
  return { typeUrl: o.type_url, versionInfo: o.version_info, nonce: o.nonce, resources: o.resources.map((r) => ({ typeUrl: r.type_url, value: r.value })) };
}

/** A SotW DiscoveryRequest (snake_case fields) encoded with Envoy's own protos. */
export function encodeDiscoveryRequest(obj: Record<string, unknown>): Uint8Array {
  return encode("envoy.service.discovery.v3.DiscoveryRequest", obj);
}

/** A resource's bytes decoded as its type URL's message (snake_case plain object). */
export function decodeResource(typeUrl: string, bytes: Uint8Array): Record<string, unknown> {
  const t = envoyRoot().lookupType(typeUrl.replace(/^type\.googleapis\.com\//, ""));
  return t.toObject(t.decode(bytes), { defaults: false, longs: Number }) as Record<string, unknown>;
}

/** An envoy.extensions.transport_sockets.tls.v3.Secret: name and inline certificate chain. */
export function decodeSecret(bytes: Uint8Array): { name: string; certificateChain: string; privateKey: string } {
  const t = envoyRoot().lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");
  const o = t.toObject(t.decode(bytes), { defaults: true }) as {
    name: string;
    tls_certificate?: { certificate_chain?: { inline_bytes?: Uint8Array }; private_key?: { inline_bytes?: Uint8Array } };
  };
  const text = (b?: Uint8Array) => Buffer.from(b ?? []).toString("utf8");
  return {
    name: o.name,
    certificateChain: text(o.tls_certificate?.certificate_chain?.inline_bytes),
    privateKey: text(o.tls_certificate?.private_key?.inline_bytes),
  };
}
