// Go struct views of the ProxyConfig and the node metadata, for templates that read them the Go
// way (`.config.ProxyAdminPort`, `.metadata.Namespace`): protobuf-JSON names become Go field
// names, nested messages become structs, and unset scalar fields read as their zero values.

import { PROXY_CONFIG_SCALAR_ZERO, type ProxyConfig } from "../config/proxyconfig.ts";
import { TYPED_FIELDS, type TypedMetadata } from "../config/metadata.ts";
import { GoStruct, isPlainObject } from "./gotemplate/values.ts";

const goName = (jsonName: string) => jsonName.charAt(0).toUpperCase() + jsonName.slice(1);

/** ProxyConfig fields and their Go zero values: the scalars' from the proto, messages, lists, maps and wrappers nil. */
const PROXY_CONFIG_ZERO: Record<string, unknown> = {
  ...Object.fromEntries(Object.entries(PROXY_CONFIG_SCALAR_ZERO).map(([k, v]) => [goName(k), v])),
  DrainDuration: null,
  Concurrency: null,
  Tracing: null,
  EnvoyAccessLogService: null,
  EnvoyMetricsService: null,
  ExtraStatTags: null,
  TerminationDrainDuration: null,
  ReadinessProbe: null,
  ProxyStatsMatcher: null,
  HoldApplicationUntilProxyStarts: null,
  CaCertificatesPem: null,
  Image: null,
  PrivateKeyProvider: null,
  ProxyHeaders: null,
  FileFlushInterval: null,
  StatsCompression: null,
  ConnectionSettings: null,
  ProxyMetadata: null,
  RuntimeValues: null,
  GatewayTopology: null,
};

/** JSON fields that are Go maps (keys are data, not field names). */
const MAP_FIELDS = new Set(["proxyMetadata", "runtimeValues"]);

function toGo(jsonName: string, v: unknown): unknown {
  if (MAP_FIELDS.has(jsonName)) return v;
  if (Array.isArray(v)) return v.map((x) => toGo("", x));
  if (isPlainObject(v)) return messageStruct("message", v, {}, true);
  return v;
}

function messageStruct(typeName: string, json: Record<string, unknown>, zero: Record<string, unknown>, pointer: boolean): GoStruct {
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(json)) if (v !== undefined) fields[goName(k)] = toGo(k, v);
  return new GoStruct(typeName, fields, zero, pointer, json);
}

/** The `config` template parameter (Istio passes *meshconfig.ProxyConfig). */
export function proxyConfigStruct(pc: ProxyConfig): GoStruct {
  return messageStruct("*v1alpha1.ProxyConfig", pc, PROXY_CONFIG_ZERO, true);
}

/** The `metadata` template parameter (Istio passes *model.BootstrapNodeMetadata). */
export function metadataStruct(typed: TypedMetadata, xdsRootCert: string, raw: Record<string, unknown>): GoStruct {
  const fields: Record<string, unknown> = {};
  const zero: Record<string, unknown> = { XDSRootCert: xdsRootCert, Raw: raw };
  for (const [key, [type, go]] of Object.entries(TYPED_FIELDS)) {
    const v = typed[key];
    if (v !== undefined) fields[go] = key === "PROXY_CONFIG" ? proxyConfigStruct(v as ProxyConfig) : v;
    else zero[go] = type === "string" ? "" : type === "int" ? 0 : type === "stringbool" ? false : null;
  }
  return new GoStruct("*model.BootstrapNodeMetadata", fields, zero, true);
}
