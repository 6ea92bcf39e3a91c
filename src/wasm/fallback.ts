// Istio's stand-ins for a Wasm filter whose module could not be fetched (pkg/wasm/convert.go):
// an RBAC filter with no rules (allow all, stat prefix wasm-default-allow) when the plugin fails
// open, or with an empty rule set (deny all, wasm-default-deny) when it fails closed, under the
// extension config's own name so the listener that references it still resolves.

import { DEFAULT_ALLOW_STAT_PREFIX, DEFAULT_DENY_STAT_PREFIX, EXTENSION_CONFIG_TYPE, F, RBAC_HTTP_FILTER_TYPE, RBAC_NETWORK_FILTER_TYPE } from "./types.ts";
import { encodeFields, lenField } from "../lib/protowire.ts";

export type FilterKind = "http" | "network";

function anyOf(typeUrl: string, value: Uint8Array): Uint8Array {
  return encodeFields([lenField(F.any.typeUrl, typeUrl), lenField(F.any.value, value)]);
}

/** The RBAC filter config: no `rules` = allow all; empty `rules` = deny all. */
export function rbacFilterConfig(kind: FilterKind, failOpen: boolean): { typeUrl: string; value: Uint8Array } {
  const prefix = failOpen ? DEFAULT_ALLOW_STAT_PREFIX : DEFAULT_DENY_STAT_PREFIX;
  const rules = failOpen ? [] : [lenField(F.httpRbac.rules, new Uint8Array())];
  if (kind === "http") return { typeUrl: RBAC_HTTP_FILTER_TYPE, value: encodeFields([...rules, lenField(F.httpRbac.rulesStatPrefix, prefix)]) };
  return { typeUrl: RBAC_NETWORK_FILTER_TYPE, value: encodeFields([...rules, lenField(F.networkRbac.statPrefix, prefix)]) };
}

/** The whole replacement resource: Any(TypedExtensionConfig{name, typed_config: Any(RBAC)}). */
export function defaultFilterResource(name: string, kind: FilterKind, failOpen: boolean): Uint8Array {
  const tc = rbacFilterConfig(kind, failOpen);
  const ec = encodeFields([lenField(F.extensionConfig.name, name), lenField(F.extensionConfig.typedConfig, anyOf(tc.typeUrl, tc.value))]);
  return anyOf(EXTENSION_CONFIG_TYPE, ec);
}
