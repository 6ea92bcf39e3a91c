// Type URLs, field numbers and Istio's constants for the Wasm conversion (pkg/model/wasm.go,
// pkg/wasm/convert.go, Envoy's wasm/v3, core/v3 and rbac/v3 protos).

export const TYPE_PREFIX = "type.googleapis.com/";
export const EXTENSION_CONFIG_TYPE = `${TYPE_PREFIX}envoy.config.core.v3.TypedExtensionConfig`;
export const WASM_HTTP_FILTER_TYPE = `${TYPE_PREFIX}envoy.extensions.filters.http.wasm.v3.Wasm`;
export const WASM_NETWORK_FILTER_TYPE = `${TYPE_PREFIX}envoy.extensions.filters.network.wasm.v3.Wasm`;
export const TYPED_STRUCT_TYPE = `${TYPE_PREFIX}udpa.type.v1.TypedStruct`;
export const RBAC_HTTP_FILTER_TYPE = `${TYPE_PREFIX}envoy.extensions.filters.http.rbac.v3.RBAC`;
export const RBAC_NETWORK_FILTER_TYPE = `${TYPE_PREFIX}envoy.extensions.filters.network.rbac.v3.RBAC`;

/** VM env keys istiod adds for the agent (pkg/model/wasm.go); every ISTIO_META_* key is stripped. */
export const WASM_SECRET_ENV = "ISTIO_META_WASM_IMAGE_PULL_SECRET";
export const WASM_POLICY_ENV = "ISTIO_META_WASM_IMAGE_PULL_POLICY";
export const WASM_RESOURCE_VERSION_ENV = "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION";
export const ISTIO_META_PREFIX = "ISTIO_META_";

export const DEFAULT_ALLOW_STAT_PREFIX = "wasm-default-allow";
export const DEFAULT_DENY_STAT_PREFIX = "wasm-default-deny";

/** Download timeout when the config's http_uri has none (convert.go). */
export const DEFAULT_FETCH_TIMEOUT_MS = 5000;

export type PullPolicy = "Unspecified" | "IfNotPresent" | "Always";
/** pkg/wasm/options.go PullPolicyValues: unknown names leave the policy unspecified. */
export const PULL_POLICY_VALUES: Readonly<Record<string, PullPolicy>> = { UNSPECIFIED_POLICY: "Unspecified", IfNotPresent: "IfNotPresent", Always: "Always" };

/** Field numbers. */
export const F = {
  any: { typeUrl: 1, value: 2 },
  extensionConfig: { name: 1, typedConfig: 2 },
  typedStruct: { typeUrl: 1, value: 2 },
  wasm: { config: 1 },
  pluginConfig: { name: 1, vmConfig: 3, failOpen: 5, failurePolicy: 7 },
  vmConfig: { code: 3, environmentVariables: 7 },
  envVars: { hostEnvKeys: 1, keyValues: 2 },
  asyncDataSource: { local: 1, remote: 2 },
  remoteDataSource: { httpUri: 1, sha256: 2 },
  httpUri: { uri: 1, timeout: 3 },
  dataSource: { filename: 1 },
  duration: { seconds: 1, nanos: 2 },
  httpRbac: { rules: 1, rulesStatPrefix: 6 },
  networkRbac: { rules: 1, statPrefix: 3 },
} as const;

/** envoy.extensions.wasm.v3.FailurePolicy.FAIL_OPEN */
export const FAILURE_POLICY_FAIL_OPEN = 3;

/** What the conversion asks the cache for (pkg/wasm/options.go GetOptions). */
export interface GetOptions {
  checksum: string;
  resourceName: string;
  resourceVersion: string;
  requestTimeoutMs: number;
  pullSecret?: Uint8Array;
  pullPolicy: PullPolicy;
}

/** The module cache as the conversion sees it: a local file path for a remote module. */
export interface ModuleSource {
  get(url: string, opts: GetOptions): Promise<string>;
}
