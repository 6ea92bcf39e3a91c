// Envoy's real API protos, from @grpc/grpc-js-xds's bundled deps (tests only: src/ never reads
// them): one include path list and one cached protobufjs root with snake_case field names, for
// tests that encode resources the way istiod does or decode what the agent sends.
//
// Parsing the .proto texts takes 300-500 ms on the 2-core machine, and every Envoy stand-in
// process pays it before its first ADS or SDS request: bench/podcost.ts's start -> ready measured
// that parse rather than either agent (a real Envoy asks within tens of milliseconds of its exec).
// So the resolved root is kept as protobufjs JSON in node_modules/.cache, keyed by the versions of
// the packages the texts come from, and later processes load that (~60 ms).

import protobuf from "protobufjs";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
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

const MODULES = join(import.meta.dir, "../../node_modules");

/** The cache file for this set of files and these package versions. */
export function envoyProtoCachePath(): string {
  const version = (pkg: string) => (JSON.parse(readFileSync(join(MODULES, pkg, "package.json"), "utf8")) as { version: string }).version;
  const key = new Bun.CryptoHasher("sha256")
    .update(JSON.stringify({ format: 1, xds: version("@grpc/grpc-js-xds"), protobufjs: version("protobufjs"), files: ENVOY_FILES }))
    .digest("hex")
    .slice(0, 16);
  return join(MODULES, ".cache", `envoy-protos-${key}.json`);
}

/** Every file in ENVOY_FILES, parsed from the .proto texts and resolved. */
export function parseEnvoyProtos(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) =>
    ENVOY_API_INCLUDES.map((inc) => join(inc, target)).find((p) => existsSync(p)) ?? protobuf.util.path.resolve(origin, target);
  root.loadSync(ENVOY_FILES, { keepCase: true });
  root.resolveAll();
  return root;
}

/** Every file in ENVOY_FILES, loaded and resolved once per test process (from the cache when there is one). */
export function envoyProtoRoot(): protobuf.Root {
  if (cached) return cached;
  const file = envoyProtoCachePath();
  try {
    return (cached = protobuf.Root.fromJSON(JSON.parse(readFileSync(file, "utf8")) as protobuf.INamespace));
  } catch {
    // no cache yet (or a torn one from another version): parse, then write it for the next process
  }
  const root = parseEnvoyProtos();
  try {
    mkdirSync(join(MODULES, ".cache"), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(root.toJSON()));
    renameSync(tmp, file);
  } catch {
    // a read-only node_modules: every process parses
  }
  return (cached = root);
}
