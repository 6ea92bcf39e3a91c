// Envoy's real Wasm, RBAC, extension-config and TypedStruct protos (from @grpc/grpc-js-xds's
// bundled copies, independent of the agent's wire editing) for building ECDS resources the way
// istiod does and reading back what the agent produced.

import protobuf from "protobufjs";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ENVOY_API_INCLUDES } from "../support/envoy-protos.ts";

const FILES = [
  "envoy/config/core/v3/extension.proto",
  "envoy/extensions/filters/http/wasm/v3/wasm.proto",
  "envoy/extensions/filters/network/wasm/v3/wasm.proto",
  "envoy/extensions/filters/http/rbac/v3/rbac.proto",
  "envoy/extensions/filters/network/rbac/v3/rbac.proto",
  "envoy/service/discovery/v3/discovery.proto",
  "udpa/type/v1/typed_struct.proto",
  "google/protobuf/struct.proto",
  "google/protobuf/empty.proto",
];

let cached: protobuf.Root | undefined;

export function wasmProtoRoot(): protobuf.Root {
  if (cached) return cached;
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) =>
    ENVOY_API_INCLUDES.map((inc) => join(inc, target)).find((p) => existsSync(p)) ?? protobuf.util.path.resolve(origin, target);
  root.loadSync(FILES, { keepCase: true });
  root.resolveAll();
  return (cached = root);
}

export const T = {
  ec: "envoy.config.core.v3.TypedExtensionConfig",
  httpWasm: "envoy.extensions.filters.http.wasm.v3.Wasm",
  networkWasm: "envoy.extensions.filters.network.wasm.v3.Wasm",
  httpRbac: "envoy.extensions.filters.http.rbac.v3.RBAC",
  networkRbac: "envoy.extensions.filters.network.rbac.v3.RBAC",
  typedStruct: "udpa.type.v1.TypedStruct",
  struct: "google.protobuf.Struct",
  empty: "google.protobuf.Empty",
  vmConfig: "envoy.extensions.wasm.v3.VmConfig",
  response: "envoy.service.discovery.v3.DiscoveryResponse",
  deltaResponse: "envoy.service.discovery.v3.DeltaDiscoveryResponse",
  request: "envoy.service.discovery.v3.DiscoveryRequest",
  deltaRequest: "envoy.service.discovery.v3.DeltaDiscoveryRequest",
} as const;

export const URL_OF = (name: string) => `type.googleapis.com/${name}`;

export function encode(type: string, obj: Record<string, unknown>): Uint8Array {
  const t = wasmProtoRoot().lookupType(type);
  const err = t.verify(obj);
  if (err) throw new Error(`${type}: ${err}`);
  return t.encode(t.fromObject(obj)).finish();
}

export function decode(type: string, bytes: Uint8Array): Record<string, any> {
  const t = wasmProtoRoot().lookupType(type);
  return t.toObject(t.decode(bytes), { longs: Number, defaults: false, arrays: false, objects: false, bytes: Array, oneofs: false });
}

export function any(type: string, obj: Record<string, unknown>): { type_url: string; value: Uint8Array } {
  return { type_url: URL_OF(type), value: encode(type, obj) };
}

/** google.protobuf.Any bytes of a message. */
export function anyBytes(type: string, obj: Record<string, unknown>): Uint8Array {
  return wasmProtoRoot().lookupType("google.protobuf.Any").encode(any(type, obj)).finish();
}

/** Struct from JSON (for TypedStruct values); protobufjs's bundled struct.proto names Value's fields in camelCase. */
export function struct(json: Record<string, unknown>): Record<string, unknown> {
  const v = (x: unknown): Record<string, unknown> => {
    if (x === null) return { nullValue: 0 };
    if (typeof x === "number") return { numberValue: x };
    if (typeof x === "string") return { stringValue: x };
    if (typeof x === "boolean") return { boolValue: x };
    if (Array.isArray(x)) return { listValue: { values: x.map(v) } };
    return { structValue: struct(x as Record<string, unknown>) };
  };
  return { fields: Object.fromEntries(Object.entries(json).map(([k, x]) => [k, v(x)])) };
}

/** Decode an Any(TypedExtensionConfig) into {name, typeUrl, config} with the inner filter decoded. */
export function readExtensionConfig(bytes: Uint8Array): { anyType: string; name: string; typeUrl: string; config: Record<string, any> } {
  const a = wasmProtoRoot().lookupType("google.protobuf.Any").decode(bytes) as unknown as { type_url: string; value: Uint8Array };
  const ec = wasmProtoRoot().lookupType(T.ec).decode(a.value) as unknown as { name: string; typed_config?: { type_url: string; value: Uint8Array } };
  const tc = ec.typed_config!;
  const inner = tc.type_url.replace("type.googleapis.com/", "");
  return { anyType: a.type_url, name: ec.name, typeUrl: tc.type_url, config: decode(inner, tc.value) };
}
