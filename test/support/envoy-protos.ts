// Envoy's real API protos, from @grpc/grpc-js-xds's bundled deps (tests only: src/ never reads
// them): one include path list and one cached protobufjs root with snake_case field names, for
// tests that encode resources the way istiod does or decode what the agent sends.

import protobuf from "protobufjs";
import { existsSync } from "node:fs";
import { join } from "node:path";

const DEPS = join(import.meta.dir, "../../node_modules/@grpc/grpc-js-xds/deps");

/** Include directories for Envoy's protos and their imports. */
export const ENVOY_API_INCLUDES = [
  ...["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((d) => join(DEPS, d)),
  join(import.meta.dir, "../../node_modules/protobufjs"),
];

export const ENVOY_FILES = [
  "envoy/config/listener/v3/listener.proto",
  "envoy/config/route/v3/route.proto",
  "envoy/config/cluster/v3/cluster.proto",
  "envoy/config/endpoint/v3/endpoint.proto",
  "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
  "envoy/extensions/filters/http/router/v3/router.proto",
  "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
  "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
  "envoy/extensions/transport_sockets/tls/v3/tls.proto",
  "envoy/extensions/transport_sockets/tls/v3/secret.proto",
  "envoy/service/discovery/v3/discovery.proto",
];

let cached: protobuf.Root | undefined;

/** Every file in ENVOY_FILES, loaded and resolved once per test process. */
export function envoyProtoRoot(): protobuf.Root {
  if (cached) return cached;
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) =>
    ENVOY_API_INCLUDES.map((inc) => join(inc, target)).find((p) => existsSync(p)) ?? protobuf.util.path.resolve(origin, target);
  root.loadSync(ENVOY_FILES, { keepCase: true });
  root.resolveAll();
  return (cached = root);
}
