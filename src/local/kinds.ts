// The five resource kinds a local xDS file holds and their type URLs: what the serving process
// needs to route, name and count them, with no schema library (schema.ts holds the schemas, for
// the conversion of the file only).

export const TYPE_URL_PREFIX = "type.googleapis.com/";

/** The five resource kinds a local xDS file holds, in the order a client needs them. */
export const RESOURCE_KINDS = [
  { key: "listeners", short: "LDS", message: "envoy.config.listener.v3.Listener", nameField: "name" },
  { key: "routes", short: "RDS", message: "envoy.config.route.v3.RouteConfiguration", nameField: "name" },
  { key: "clusters", short: "CDS", message: "envoy.config.cluster.v3.Cluster", nameField: "name" },
  { key: "endpoints", short: "EDS", message: "envoy.config.endpoint.v3.ClusterLoadAssignment", nameField: "cluster_name" },
  { key: "secrets", short: "SDS", message: "envoy.extensions.transport_sockets.tls.v3.Secret", nameField: "name" },
] as const;

export type ResourceKind = (typeof RESOURCE_KINDS)[number];

export const LISTENER_TYPE = `${TYPE_URL_PREFIX}envoy.config.listener.v3.Listener`;
export const ROUTE_TYPE = `${TYPE_URL_PREFIX}envoy.config.route.v3.RouteConfiguration`;
export const CLUSTER_TYPE = `${TYPE_URL_PREFIX}envoy.config.cluster.v3.Cluster`;
export const ENDPOINT_TYPE = `${TYPE_URL_PREFIX}envoy.config.endpoint.v3.ClusterLoadAssignment`;
export const SECRET_TYPE = `${TYPE_URL_PREFIX}envoy.extensions.transport_sockets.tls.v3.Secret`;

export function typeUrlOf(kind: ResourceKind): string {
  return TYPE_URL_PREFIX + kind.message;
}

/** Short name for logs (`LDS`, `CDS`, ...), or the type URL itself for anything else. */
export function shortType(typeUrl: string): string {
  return RESOURCE_KINDS.find((k) => typeUrlOf(k) === typeUrl)?.short ?? typeUrl;
}

/** Types whose empty subscription means "everything" (legacy wildcard), as Envoy and gRPC use them. */
export function isWildcardType(typeUrl: string): boolean {
  return typeUrl === LISTENER_TYPE || typeUrl === CLUSTER_TYPE;
}
