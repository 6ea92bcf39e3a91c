// The ECDS Wasm conversion (Istio's pkg/wasm/convert.go): each TypedExtensionConfig whose typed
// config is an HTTP or network Wasm filter (directly or inside a udpa TypedStruct) loading its VM
// code from a remote URL gets the module fetched through the cache and its code rewritten to the
// local file; the agent-only ISTIO_META_* VM env keys are stripped. A fetch that fails replaces
// the filter with Istio's allow-all or deny-all RBAC filter per the plugin's fail policy. Only
// resources that cannot be read at all (and a fallback that cannot be built) make the whole
// response a NACK, as in Istio. Resources are converted concurrently; the output keeps order.
// Everything is done on the wire bytes, so fields this code does not touch pass unchanged.

import type { Logger } from "../lib/log.ts";
import type { Clock } from "./clock.ts";
import { defaultFilterResource, type FilterKind } from "./fallback.ts";
import type { ConversionResult, WasmMetrics } from "./metrics.ts";
import type { WasmSchema } from "./schema.ts";
import { redactUrl } from "./redact.ts";
import { structToJson } from "./struct.ts";
import {
  DEFAULT_FETCH_TIMEOUT_MS,
  EXTENSION_CONFIG_TYPE,
  F,
  FAILURE_POLICY_FAIL_OPEN,
  ISTIO_META_PREFIX,
  PULL_POLICY_VALUES,
  TYPED_STRUCT_TYPE,
  WASM_HTTP_FILTER_TYPE,
  WASM_NETWORK_FILTER_TYPE,
  WASM_POLICY_ENV,
  WASM_RESOURCE_VERSION_ENV,
  WASM_SECRET_ENV,
  type ModuleSource,
  type PullPolicy,
} from "./types.ts";
import { encodeFields, lenField, messageField, parseFields, replaceField, stringField, varintValue, withoutFields, type WireField } from "../lib/protowire.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export class WasmConversionError extends Error {
  override name = "WasmConversionError";
}

export interface ConverterDeps {
  cache: ModuleSource;
  schema: WasmSchema;
  metrics: WasmMetrics;
  log: Logger;
  clock: Clock;
}

/** A Wasm filter found in a resource: what kind, its name, and its Wasm message's fields. */
interface RemoteWasm {
  kind: FilterKind;
  name: string;
  ecFields: WireField[];
  wasmFields: WireField[];
}

/** The converted resources (same order, same count), or the error that makes Istio NACK. */
export type ConversionOutcome = { ok: true; resources: Uint8Array[] } | { ok: false; error: string };

export class WasmConverter {
  constructor(private readonly d: ConverterDeps) {}

  /** Convert every resource (each a google.protobuf.Any's bytes). */
  async convertResources(resources: readonly Uint8Array[]): Promise<ConversionOutcome> {
    const start = this.d.clock.now();
    try {
      const out = [...resources];
      const errors: string[] = [];
      await Promise.all(
        resources.map(async (r, i) => {
          try {
            out[i] = await this.convertOne(r);
          } catch (e) {
            errors.push(errorMessage(e));
          }
        }),
      );
      if (errors.length > 0) {
        const error = errors.length === 1 ? errors[0]! : `${errors.length} errors occurred:\n${errors.map((e) => `\t* ${e}`).join("\n")}`;
        this.d.log.error(`error in applying failopen rbac config: ${error}`);
        return { ok: false, error };
      }
      return { ok: true, resources: out };
    } finally {
      this.d.metrics.conversionDuration.observe(Math.max(0, this.d.clock.now() - start));
    }
  }

  private count(result: ConversionResult): void {
    this.d.metrics.conversions.inc({ result });
  }

  private async convertOne(resource: Uint8Array): Promise<Uint8Array> {
    let found: RemoteWasm | undefined;
    try {
      found = this.tryUnmarshal(resource);
    } catch (e) {
      this.count("unmarshal_failure");
      throw e;
    }
    if (!found) {
      this.count("no_remote_load");
      return resource;
    }
    const status: { result: ConversionResult } = { result: "success" };
    try {
      return await this.toLocal(found, status);
    } catch (e) {
      const failOpen = failsOpen(found.wasmFields);
      this.d.log.error(
        `error in converting the wasm config of ${found.name} to local: ${errorMessage(e)}. applying ${failOpen ? "allow" : "deny"} RBAC filter`,
      );
      return defaultFilterResource(found.name, found.kind, failOpen);
    } finally {
      this.count(status.result);
    }
  }

  /** The remote Wasm filter in `resource`; undefined when it is not one (bypass); throws when unreadable. */
  private tryUnmarshal(resource: Uint8Array): RemoteWasm | undefined {
    const any = readMessage(resource, "extension config resource");
    const typeUrl = stringField(any, F.any.typeUrl) ?? "";
    if (typeUrl !== EXTENSION_CONFIG_TYPE)
      throw new WasmConversionError(
        `failed to unmarshal extension config resource: mismatched message type: got "${typeUrl}", want "${EXTENSION_CONFIG_TYPE}"`,
      );
    const ecFields = readMessage(messageField(any, F.any.value) ?? new Uint8Array(), "extension config resource");
    const name = stringField(ecFields, F.extensionConfig.name) ?? "";
    const tcBytes = messageField(ecFields, F.extensionConfig.typedConfig);
    if (!tcBytes) throw new WasmConversionError(`typed extension config ${JSON.stringify(name)} does not contain any typed config`);
    const tc = readMessage(tcBytes, `typed config of ${name}`);
    const tcType = stringField(tc, F.any.typeUrl) ?? "";
    const tcValue = messageField(tc, F.any.value) ?? new Uint8Array();
    let kind: FilterKind;
    let wasmBytes: Uint8Array;
    if (tcType === WASM_HTTP_FILTER_TYPE || tcType === WASM_NETWORK_FILTER_TYPE) {
      kind = tcType === WASM_HTTP_FILTER_TYPE ? "http" : "network";
      wasmBytes = tcValue;
    } else if (tcType === TYPED_STRUCT_TYPE) {
      const ts = readMessage(tcValue, `typed struct of ${name}`);
      const innerType = stringField(ts, F.typedStruct.typeUrl) ?? "";
      let json: unknown;
      try {
        json = structToJson(messageField(ts, F.typedStruct.value) ?? new Uint8Array());
      } catch (e) {
        throw new WasmConversionError(`failed to unmarshal typed config for wasm filter ${name}: ${errorMessage(e)}`, { cause: e });
      }
      if (innerType !== WASM_HTTP_FILTER_TYPE && innerType !== WASM_NETWORK_FILTER_TYPE) return undefined;
      kind = innerType === WASM_HTTP_FILTER_TYPE ? "http" : "network";
      try {
        wasmBytes = this.d.schema.encodeWasm(json);
      } catch (e) {
        throw new WasmConversionError(
          `failed to convert extension config struct of ${name} to Wasm ${kind === "http" ? "HTTP" : "Network"} filter: ${errorMessage(e)}`,
          { cause: e },
        );
      }
    } else {
      return undefined;
    }
    const what = `Wasm ${kind === "http" ? "HTTP" : "Network"} filter ${name}`;
    const wasmFields = readMessage(wasmBytes, what);
    const code = codeOf(wasmFields, what);
    if (!code.remote) {
      if (!code.local) throw new WasmConversionError(`no remote and local load found in ${what}`);
      return undefined;
    }
    // The TypedStruct case leaves with the typed filter's type URL.
    return { kind, name, ecFields, wasmFields };
  }

  /** Fetch the module and rewrite the VM's code to the local file; throws on any failure. */
  private async toLocal(w: RemoteWasm, status: { result: ConversionResult }): Promise<Uint8Array> {
    const plugin = readMessage(messageField(w.wasmFields, F.wasm.config) ?? new Uint8Array(), "plugin config");
    const pluginName = stringField(plugin, F.pluginConfig.name) ?? "";
    const vm = readMessage(messageField(plugin, F.pluginConfig.vmConfig) ?? new Uint8Array(), "vm config");
    const env = readEnv(vm);
    let pullSecret: Uint8Array | undefined;
    let pullPolicy: PullPolicy = "Unspecified";
    if (env.keyValues.has(WASM_SECRET_ENV)) {
      const sec = env.keyValues.get(WASM_SECRET_ENV)!;
      if (sec === "") {
        status.result = "fetch_failure";
        throw new WasmConversionError(`cannot fetch Wasm module ${pluginName}: missing image pulling secret`);
      }
      pullSecret = new TextEncoder().encode(sec);
    }
    const policy = env.keyValues.get(WASM_POLICY_ENV);
    if (policy !== undefined && PULL_POLICY_VALUES[policy]) pullPolicy = PULL_POLICY_VALUES[policy]!;
    const resourceVersion = env.keyValues.get(WASM_RESOURCE_VERSION_ENV) ?? "";

    const code = readMessage(messageField(vm, F.vmConfig.code) ?? new Uint8Array(), "vm code");
    const remote = readMessage(messageField(code, F.asyncDataSource.remote) ?? new Uint8Array(), "remote data source");
    const httpUriBytes = messageField(remote, F.remoteDataSource.httpUri);
    if (!httpUriBytes) {
      status.result = "miss_remote_fetch_hint";
      throw new WasmConversionError(`wasm remote fetch does not have httpUri specified for config ${pluginName}`);
    }
    const httpUri = readMessage(httpUriBytes, "http_uri");
    const uri = stringField(httpUri, F.httpUri.uri) ?? "";
    const shown = redactUrl(uri);
    let checksum = stringField(remote, F.remoteDataSource.sha256) ?? "";
    if (checksum === "nil") checksum = ""; // istiod's "not set" marker
    const timeoutBytes = messageField(httpUri, F.httpUri.timeout);
    const requestTimeoutMs = timeoutBytes ? durationMs(timeoutBytes) : DEFAULT_FETCH_TIMEOUT_MS;

    let path: string;
    try {
      path = await this.d.cache.get(uri, { checksum, resourceName: w.name, resourceVersion, requestTimeoutMs, pullSecret, pullPolicy });
    } catch (e) {
      status.result = "fetch_failure";
      throw new WasmConversionError(`cannot fetch Wasm module ${shown}: ${errorMessage(e)}`, { cause: e });
    }

    const localCode = encodeFields([lenField(F.asyncDataSource.local, encodeFields([lenField(F.dataSource.filename, path)]))]);
    let newVm = replaceField(vm, F.vmConfig.code, lenField(F.vmConfig.code, localCode));
    newVm = replaceField(
      newVm,
      F.vmConfig.environmentVariables,
      env.rewritten === undefined ? undefined : lenField(F.vmConfig.environmentVariables, env.rewritten),
    );
    const newPlugin = replaceField(plugin, F.pluginConfig.vmConfig, lenField(F.pluginConfig.vmConfig, encodeFields(newVm)));
    const newWasm = replaceField(w.wasmFields, F.wasm.config, lenField(F.wasm.config, encodeFields(newPlugin)));
    const typeUrl = w.kind === "http" ? WASM_HTTP_FILTER_TYPE : WASM_NETWORK_FILTER_TYPE;
    const tc = encodeFields([lenField(F.any.typeUrl, typeUrl), lenField(F.any.value, encodeFields(newWasm))]);
    const ec = replaceField(w.ecFields, F.extensionConfig.typedConfig, lenField(F.extensionConfig.typedConfig, tc));
    this.d.log.info(`converted Wasm module ${shown} of ${w.name} to local file ${path}`, ids({ path }));
    return encodeFields([lenField(F.any.typeUrl, EXTENSION_CONFIG_TYPE), lenField(F.any.value, encodeFields(ec))]);
  }
}

function readMessage(bytes: Uint8Array, what: string): WireField[] {
  try {
    return parseFields(bytes);
  } catch (e) {
    throw new WasmConversionError(`failed to unmarshal ${what}: ${errorMessage(e)}`, { cause: e });
  }
}

/** Which code source the Wasm VM has, reading (and so validating) every level on the way. */
function codeOf(wasm: WireField[], what: string): { remote: boolean; local: boolean } {
  const plugin = readMessage(messageField(wasm, F.wasm.config) ?? new Uint8Array(), `plugin config of ${what}`);
  const vmBytes = messageField(plugin, F.pluginConfig.vmConfig);
  if (!vmBytes) return { remote: false, local: false };
  const vm = readMessage(vmBytes, `vm config of ${what}`);
  const codeBytes = messageField(vm, F.vmConfig.code);
  if (!codeBytes) return { remote: false, local: false };
  const code = readMessage(codeBytes, `vm code of ${what}`);
  const remote = messageField(code, F.asyncDataSource.remote);
  const local = messageField(code, F.asyncDataSource.local);
  // A oneof: the last member on the wire wins.
  const last = [...code].reverse().find((f) => f.no === F.asyncDataSource.remote || f.no === F.asyncDataSource.local);
  if (remote) readMessage(remote, `remote code of ${what}`);
  return { remote: last?.no === F.asyncDataSource.remote, local: last?.no === F.asyncDataSource.local && local !== undefined };
}

/** fail policy: failure_policy when set, else the deprecated fail_open (convert.go httpWasmFailOpen). */
export function failsOpen(wasm: WireField[]): boolean {
  try {
    const plugin = parseFields(messageField(wasm, F.wasm.config) ?? new Uint8Array());
    const policy = varintValue(plugin, F.pluginConfig.failurePolicy) ?? 0;
    if (policy !== 0) return policy === FAILURE_POLICY_FAIL_OPEN;
    return (varintValue(plugin, F.pluginConfig.failOpen) ?? 0) !== 0;
  } catch {
    return false;
  }
}

/**
 * The VM's environment: its key_values, and the EnvironmentVariables to write back with the
 * ISTIO_META_* keys removed (undefined = drop the field: nothing left).
 */
function readEnv(vm: WireField[]): { keyValues: Map<string, string>; rewritten: Uint8Array | undefined } {
  const bytes = messageField(vm, F.vmConfig.environmentVariables);
  const keyValues = new Map<string, string>();
  if (!bytes) return { keyValues, rewritten: undefined };
  const fields = readMessage(bytes, "vm environment variables");
  for (const f of fields) {
    if (f.no !== F.envVars.keyValues) continue;
    const entry = readMessage(f.data, "vm environment variable");
    keyValues.set(stringField(entry, 1) ?? "", stringField(entry, 2) ?? "");
  }
  const kept = withoutFields(
    fields,
    (f) => f.no === F.envVars.keyValues && (stringField(readMessage(f.data, "vm environment variable"), 1) ?? "").startsWith(ISTIO_META_PREFIX),
  );
  const anyKeyValue = kept.some((f) => f.no === F.envVars.keyValues);
  const anyHostKey = kept.some((f) => f.no === F.envVars.hostEnvKeys);
  if (!anyKeyValue && !anyHostKey) return { keyValues, rewritten: undefined };
  return { keyValues, rewritten: encodeFields(kept) };
}

function durationMs(bytes: Uint8Array): number {
  const d = readMessage(bytes, "http_uri timeout");
  const seconds = varintValue(d, F.duration.seconds) ?? 0;
  const nanos = varintValue(d, F.duration.nanos) ?? 0;
  return seconds * 1000 + Math.floor(nanos / 1e6);
}
