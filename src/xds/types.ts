// Type URLs the relay routes on, and the forward filter: only Envoy's own types and ztunnel's
// Workload reach the downstream client; the agent's internal types are consumed here.

export const TYPE_PREFIX = "type.googleapis.com/";
export const LISTENER_TYPE = "type.googleapis.com/envoy.config.listener.v3.Listener";
export const NAME_TABLE_TYPE = "type.googleapis.com/istio.networking.nds.v1.NameTable";
export const PROXY_CONFIG_TYPE = "type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig";
export const HEALTH_INFO_TYPE = "type.googleapis.com/istio.v1.HealthInformation";
export const WORKLOAD_TYPE = "type.googleapis.com/istio.workload.Workload";

export const ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService";
export const SOTW_PATH = `/${ADS_SERVICE}/StreamAggregatedResources`;
export const DELTA_PATH = `/${ADS_SERVICE}/DeltaAggregatedResources`;

/** gRPC server reflection, served on the XDS socket as Istio's agent does. */
export const REFLECTION_SERVICES = ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"] as const;
export const REFLECTION_PATHS: ReadonlySet<string> = new Set(REFLECTION_SERVICES.map((s) => `/${s}/ServerReflectionInfo`));

/** Where a response goes, decided from its type. */
export type Route = "forward" | "internal" | "drop";

export function routeOf(typeUrl: string, internalTypes: { has(t: string): boolean }): Route {
  if (internalTypes.has(typeUrl)) return "internal";
  if (typeUrl.startsWith("type.googleapis.com/envoy.") || typeUrl === WORKLOAD_TYPE) return "forward";
  return "drop";
}

/** gRPC status codes the relay uses (google.rpc.Code). */
export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

export interface GrpcStatus {
  code: number;
  message: string;
}
