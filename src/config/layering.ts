// ProxyConfig layering as Istio's pilot-agent does it (pilot/cmd/pilot-agent/config/config.go,
// pkg/config/mesh/mesh.go): defaults < mesh config file's `defaultConfig` < PROXY_CONFIG env <
// pod annotation `proxy.istio.io/config`. Each layer replaces the top-level fields it sets, except
// `proxyMetadata` (maps merged key by key) and `proxyHeaders` (sub-fields kept when unset).
// Field names may be written lowerCamelCase or snake_case (protobuf JSON accepts both); they are
// normalised to lowerCamelCase. Every top-level field remembers the layer it came from, so a
// validation error can say where the bad value was written.

import { parseYamlOrJson } from "../lib/yaml.ts";
import { yamlNestingDepth } from "../lib/yamldepth.ts";
import { defaultProxyConfig, type ProxyConfig } from "./proxyconfig.ts";
import { errorMessage } from "../lib/errors.ts";

export class ConfigError extends Error {
  override name = "ConfigError";
}

export type Layer = "default" | "mesh config" | "PROXY_CONFIG" | "annotation" | "flag" | "env";

export interface LayerInput {
  layer: Layer;
  /** What to call the input in errors: a file path, `PROXY_CONFIG`, `annotation proxy.istio.io/config`. */
  origin: string;
  text: string;
  /** The mesh file is a whole MeshConfig; only its `defaultConfig` applies. */
  meshConfig?: boolean;
}

export interface Layered {
  config: ProxyConfig;
  sources: Record<string, string>;
  /** Fields no ProxyConfig has, ignored (Istio ignores them silently; we say so). */
  unknownFields: string[];
  /** The YAML parser's warnings, `<origin>: <warning>` (an unresolved tag is read as a string, as Go's yaml does). */
  parseWarnings: string[];
}

/** Keys whose values are maps with user-chosen keys: never renamed. */
const MAP_FIELDS = new Set(["proxyMetadata", "runtimeValues", "customTags", "labels", "annotations"]);

/** Every field of istio.mesh.v1alpha1.ProxyConfig, in lowerCamelCase. */
export const PROXY_CONFIG_FIELDS = new Set([
  "configPath",
  "binaryPath",
  "serviceCluster",
  "drainDuration",
  "parentShutdownDuration",
  "discoveryAddress",
  "discoveryRefreshDelay",
  "zipkinAddress",
  "statsdUdpAddress",
  "envoyMetricsServiceAddress",
  "proxyAdminPort",
  "availabilityZone",
  "controlPlaneAuthPolicy",
  "customConfigFile",
  "statNameLength",
  "concurrency",
  "proxyBootstrapTemplatePath",
  "interceptionMode",
  "tracing",
  "sds",
  "envoyAccessLogService",
  "envoyMetricsService",
  "sidecarStatsTemplate",
  "statusPort",
  "extraStatTags",
  "proxyMetadata",
  "runtimeValues",
  "terminationDrainDuration",
  "meshId",
  "readinessProbe",
  "proxyStatsMatcher",
  "holdApplicationUntilProxyStarts",
  "caCertificatesPem",
  "image",
  "privateKeyProvider",
  "proxyHeaders",
  "fileFlushInterval",
  "fileFlushMinSizeKb",
  "caCertificatePem",
  "tracingServiceName",
  "gatewayTopology",
  "startupProbe",
  "drainDurationSeconds",
]);

export function camelCase(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/**
 * How deep a layer may nest. ProxyConfig's deepest field is a few levels down; YAML can nest
 * without end (an alias inside its own anchor is a cycle), which would exhaust the stack.
 */
export const MAX_LAYER_DEPTH = 64;

const tooDeep = (origin: string) => new ConfigError(`${origin}: nested deeper than ${MAX_LAYER_DEPTH} levels (or an alias refers to itself)`);

function checkDepth(value: unknown, origin: string, depth: number): void {
  if (value && typeof value === "object" && depth >= MAX_LAYER_DEPTH) throw tooDeep(origin);
}

/** A map field's value: kept as written, only its depth checked. */
function verbatim(value: unknown, origin: string, depth: number): unknown {
  checkDepth(value, origin, depth);
  if (value && typeof value === "object") for (const v of Object.values(value)) verbatim(v, origin, depth + 1);
  return value;
}

function normalise(value: unknown, origin: string, keyIsMap = false, depth = 0): unknown {
  checkDepth(value, origin, depth);
  if (Array.isArray(value)) return value.map((v) => normalise(v, origin, false, depth + 1));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const key = keyIsMap ? k : camelCase(k);
      out[key] = keyIsMap ? verbatim(v, origin, depth + 1) : normalise(v, origin, MAP_FIELDS.has(key), depth + 1);
    }
    return out;
  }
  return value;
}

/** Parse one layer's YAML/JSON text into a ProxyConfig fragment (or undefined for empty text); the parser's warnings go to `warnings`, named by origin. */
export function parseLayer(input: LayerInput, warnings?: string[]): Record<string, unknown> | undefined {
  if (input.text.trim() === "") return undefined;
  // Refused before the parser sees it: parsing costs per level, and the text may be megabytes.
  // The layer's own mapping is level 1 of the text (2 in a mesh file, under defaultConfig), and
  // level 0 of what checkDepth counts, so MAX_LAYER_DEPTH levels of text pass both checks alike.
  const textLimit = MAX_LAYER_DEPTH + (input.meshConfig ? 1 : 0);
  if (yamlNestingDepth(input.text, textLimit) > textLimit) throw tooDeep(input.origin);
  let doc: unknown;
  const parserWarnings: string[] = [];
  try {
    doc = parseYamlOrJson(input.text, { prettyErrors: false }, parserWarnings);
    for (const w of parserWarnings) warnings?.push(`${input.origin}: ${w}`);
  } catch (e) {
    const msg = errorMessage(e).split("\n")[0];
    throw new ConfigError(`${input.origin}: malformed YAML/JSON${whereInText(input.text, e)}: ${msg}`);
  }
  if (doc === null || doc === undefined) return undefined;
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError(
      `${input.origin}: expected a ${input.meshConfig ? "MeshConfig" : "ProxyConfig"} mapping, got ${Array.isArray(doc) ? "a list" : typeof doc}`,
    );
  }
  let fragment = doc as Record<string, unknown>;
  if (input.meshConfig) {
    const dc = fragment.defaultConfig ?? fragment.default_config;
    if (dc === undefined || dc === null) return undefined;
    if (typeof dc !== "object" || Array.isArray(dc)) throw new ConfigError(`${input.origin}: defaultConfig must be a mapping`);
    fragment = dc as Record<string, unknown>;
  }
  return normalise(fragment, input.origin) as Record<string, unknown>;
}

/** ` at line L, column C` of a YAML error's offset (the `yaml` package's `pos`), or "" without one. */
export function whereInText(text: string, e: unknown): string {
  const pos = (e as { pos?: unknown })?.pos;
  const offset = Array.isArray(pos) && typeof pos[0] === "number" ? Math.min(Math.max(pos[0], 0), text.length) : undefined;
  if (offset === undefined) return "";
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - (before.lastIndexOf("\n") + 1) + 1;
  return ` at line ${line}, column ${column}`;
}

/** Apply the layers in order over Istio's defaults. */
export function layerProxyConfig(inputs: readonly LayerInput[]): Layered {
  const config: ProxyConfig = defaultProxyConfig();
  const sources: Record<string, string> = {};
  for (const k of Object.keys(config)) sources[k] = "default";
  const unknownFields: string[] = [];
  const parseWarnings: string[] = [];
  for (const input of inputs) {
    const fragment = parseLayer(input, parseWarnings);
    if (!fragment) continue;
    for (const [key, value] of Object.entries(fragment)) {
      if (!PROXY_CONFIG_FIELDS.has(key)) {
        unknownFields.push(`${input.origin}: ${key}`);
        continue;
      }
      if (key === "proxyMetadata") {
        if (value !== null && (typeof value !== "object" || Array.isArray(value))) {
          throw new ConfigError(`${input.origin}: proxyMetadata must be a map of strings`);
        }
        const merged: Record<string, string> = { ...(config.proxyMetadata ?? {}) };
        for (const [mk, mv] of Object.entries((value ?? {}) as Record<string, unknown>)) merged[mk] = scalarString(mv);
        config.proxyMetadata = merged;
      } else if (key === "proxyHeaders" && isPlainObject(value) && isPlainObject(config.proxyHeaders)) {
        config.proxyHeaders = { ...config.proxyHeaders, ...value };
      } else {
        config[key] = value;
      }
      sources[key] = input.origin;
    }
  }
  // serviceCluster and tracingServiceName are a oneof: setting one clears the other.
  if (sources.tracingServiceName && sources.tracingServiceName !== "default" && sources.serviceCluster === "default") {
    delete config.serviceCluster;
  }
  return { config, sources, unknownFields, parseWarnings };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === "object" && !Array.isArray(v);
}

function scalarString(v: unknown): string {
  if (v === null || v === undefined) return "";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}
