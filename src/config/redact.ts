// Secrets never reach logs. The effective ProxyConfig is logged once at start; tokens, keys and
// passwords inside it (tracing access tokens, proxyMetadata values named like secrets) are
// replaced by `<redacted>` first.

import { stringifySimpleYaml, yamlLib } from "../lib/yaml.ts";

const SECRET_KEY = /(token|secret|password|passwd|credential|apikey|api_key|privatekey|private_key)/i;

export function redact<T>(value: T): T {
  return walk(value, false) as T;
}

function walk(v: unknown, secret: boolean): unknown {
  if (secret && (typeof v === "string" || typeof v === "number")) return "<redacted>";
  if (Array.isArray(v)) return v.map((x) => walk(x, secret));
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = walk(x, secret || isSecretKey(k));
    return out;
  }
  return v;
}

function isSecretKey(key: string): boolean {
  // File paths are not secrets: ISTIO_META_TLS_CLIENT_KEY and friends name files.
  if (/_(KEY|CERT_CHAIN|ROOT_CERT)$/.test(key) && key.startsWith("ISTIO_META_TLS_")) return false;
  return SECRET_KEY.test(key);
}

/** The effective ProxyConfig as Istio logs it: YAML, secrets redacted. */
export function proxyConfigYaml(pc: unknown): string {
  const doc = redact(pc);
  const simple = doc !== null && typeof doc === "object" && !Array.isArray(doc) ? stringifySimpleYaml(doc as Record<string, unknown>) : undefined;
  return (simple ?? yamlLib().stringify(doc, { sortMapEntries: true })).trimEnd();
}
