// Seeded generators of hostile configuration for the config fuzzer (fuzz-config.test.ts): ProxyConfig
// documents as YAML or JSON (PROXY_CONFIG, the mesh file's defaultConfig, the proxy.istio.io/config
// annotation), downward-API files, ISTIO_KUBE_APP_PROBERS, command lines and environments. Inputs
// are mostly well-formed with hostile values (the loader's deeper paths), some mangled as text.

import YAML from "yaml";
import { PROXY_CONFIG_FIELDS } from "../../src/config/layering.ts";
import { PROXY_ENV } from "../../src/config/env.ts";

export type Rand = () => number;

/** mulberry32: the same seed gives the same inputs on every machine. */
export function rng(seed: number): Rand {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const int = (r: Rand, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

const STRINGS = [
  "",
  " ",
  "0",
  "-1",
  "1",
  "65535",
  "65536",
  "99999999999999999999",
  "1e400",
  "-0",
  "0x10",
  "NaN",
  "Infinity",
  "null",
  "~",
  "true",
  "no",
  "45s",
  "-5s",
  "0s",
  "1ms",
  "1.5s",
  "1h2m3s",
  "9999999999h",
  "1m0s",
  "5",
  "1.500s",
  "10.5ns",
  "P1D",
  "s",
  "localhost:15012",
  "istiod.istio-system.svc:15012",
  "[::1]:15012",
  "::1",
  ":",
  ":15012",
  "host:",
  "host:0",
  "a b:1",
  "127.0.0.1:99999",
  "NONE",
  "MUTUAL_TLS",
  "REDIRECT",
  "TPROXY",
  "x".repeat(300),
  "é\u0000\u202e\uffff",
  "$(HOST_IP):9411",
  "${HOST_IP}",
  "{{ .x }}",
  "\n",
  "\t",
  "/dev/zero",
  "../../etc/passwd",
  "./etc/istio/proxy",
  "/usr/local/bin/envoy",
  "a=b",
  '"',
  "'",
  "\\",
  "%s%n",
  "🙂",
];
const NUMBERS = [0, -1, 1, 0.5, -0.5, 15020, 65535, 65536, 2 ** 31, 2 ** 53, 2 ** 64, 1e308, -1e308, 1e-300];

function scalar(r: Rand): unknown {
  switch (int(r, 5)) {
    case 0:
    case 1:
      return pick(r, STRINGS);
    case 2:
      return pick(r, NUMBERS);
    case 3:
      return r() < 0.5;
    default:
      return null;
  }
}

/** Any JSON value, nested up to `depth`. */
export function anyValue(r: Rand, depth = 3): unknown {
  const k = depth > 0 ? int(r, 8) : 0;
  if (k === 6) return Array.from({ length: int(r, 4) }, () => anyValue(r, depth - 1));
  if (k === 7) {
    const o: Record<string, unknown> = {};
    for (let i = int(r, 4); i > 0; i--)
      o[r() < 0.5 ? pick(r, ["address", "value", "pollDelay", "cryptomb", "qat", "zipkin", "datadog", "name", "port", "path"]) : pick(r, STRINGS)] = anyValue(
        r,
        depth - 1,
      );
    return o;
  }
  return scalar(r);
}

/** A value shaped like what the field holds, often hostile. */
function fieldValue(r: Rand, field: string): unknown {
  if (r() < 0.3) return anyValue(r);
  switch (field) {
    case "drainDuration":
    case "terminationDrainDuration":
    case "parentShutdownDuration":
    case "discoveryRefreshDelay":
    case "fileFlushInterval":
      return r() < 0.7 ? pick(r, ["45s", "-5s", "0s", "1ms", "1.5s", "1h2m3s", "9999999999h", "10.5ns", "1e400s", "5"]) : pick(r, NUMBERS);
    case "statusPort":
    case "proxyAdminPort":
    case "statNameLength":
    case "concurrency":
    case "fileFlushMinSizeKb":
      return r() < 0.5 ? pick(r, NUMBERS) : pick(r, ["0", "-1", "65536", "15020", "abc", ""]);
    case "discoveryAddress":
    case "statsdUdpAddress":
    case "zipkinAddress":
      return pick(r, ["localhost:15012", "[::1]:15012", "::1", ":", "host:0", "a b:1", "127.0.0.1:99999", "$(HOST_IP):9411", "", "x".repeat(300) + ":1"]);
    case "proxyMetadata":
    case "runtimeValues":
      return Object.fromEntries(
        Array.from({ length: int(r, 4) }, () => [
          pick(r, ["ISTIO_META_DNS_CAPTURE", "ISTIO_META_DNS_AUTO_ALLOCATE", "ISTIO_META_CLUSTER_ID", "DNS_PROXY_ADDR", "X", ""]),
          anyValue(r, 1),
        ]),
      );
    case "tracing":
      return {
        [pick(r, ["zipkin", "lightstep", "datadog", "stackdriver", "openCensusAgent", "tlsSettings"])]: r() < 0.7 ? { address: pick(r, STRINGS) } : anyValue(r),
      };
    case "privateKeyProvider":
      return { [pick(r, ["cryptomb", "qat", "other"])]: r() < 0.7 ? { pollDelay: pick(r, ["0s", "1ms", "x", "-1s"]) } : anyValue(r) };
    case "envoyMetricsService":
    case "envoyAccessLogService":
      return { address: pick(r, STRINGS), tlsSettings: anyValue(r, 1) };
    case "proxyHeaders":
      return { [pick(r, ["server", "requestId", "attemptHeader", "forwardedClientCert"])]: anyValue(r, 1) };
    case "readinessProbe":
    case "startupProbe":
      return { [pick(r, ["httpGet", "tcpSocket", "exec", "grpc"])]: anyValue(r, 2), timeoutSeconds: pick(r, NUMBERS), failureThreshold: pick(r, NUMBERS) };
    case "extraStatTags":
      return Array.from({ length: int(r, 4) }, () => (r() < 0.8 ? pick(r, STRINGS) : anyValue(r, 1)));
    case "controlPlaneAuthPolicy":
      return pick(r, ["NONE", "MUTUAL_TLS", 0, 1, 2, "0", "mutual_tls", ""]);
    case "interceptionMode":
      return pick(r, ["REDIRECT", "TPROXY", "NONE", 0, "redirect"]);
    default:
      return r() < 0.5 ? pick(r, STRINGS) : anyValue(r);
  }
}

export const FIELDS: readonly string[] = [...PROXY_CONFIG_FIELDS];
const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A ProxyConfig-shaped object: a few fields (camelCase or snake_case), sometimes an unknown one. */
export function proxyConfigDoc(r: Rand, fields: readonly string[] = FIELDS): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  for (let i = 1 + int(r, 5); i > 0; i--) {
    const f = r() < 0.9 ? pick(r, fields) : pick(r, ["noSuchField", "__proto__", "constructor", "toString", "hasOwnProperty", ""]);
    doc[r() < 0.15 ? snake(f) : f] = fieldValue(r, f);
  }
  return doc;
}

/** YAML constructs that JSON has not: anchors and aliases (a bomb, a cycle), tags, merge keys, deep nesting, documents. */
function yamlSpecial(r: Rand, fields: readonly string[]): string {
  const f = pick(r, fields);
  switch (int(r, 9)) {
    case 0: // an alias bomb
      return `a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n${f}: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n`;
    case 1: // a cycle through an alias
      return `${f}: &a\n  x: *a\n`;
    case 2:
      return `${f}: &a [1, *a]\n`;
    case 3: // tags
      return `${f}: ${pick(r, ["!!binary aGVsbG8=", "!!timestamp 2001-12-14", "!!set {a, b}", "!!omap [a: 1]", "!!int 0x10", "!!float .inf", "!foo bar", "!!str 15020", "!!null ''", "!!map {}"])}\n`;
    case 4: // merge keys
      return `base: &b {drainDuration: 5s, statusPort: 1}\n<<: *b\n${f}: 1\n`;
    case 5: // deep nesting, past the loader's limit (the YAML parser's own, ~5,000, is a fixed case)
      return `${f}: ${"[".repeat(60 + int(r, 200))}${r() < 0.5 ? "]".repeat(60 + int(r, 200)) : ""}`;
    case 6:
      return `${f}: ${"{a: ".repeat(60 + int(r, 200))}1${r() < 0.5 ? "}".repeat(60 + int(r, 200)) : ""}`;
    case 7: // several documents
      return `${f}: 1\n---\n${f}: 2\n`;
    default: // repeated keys
      return `${f}: 1\n${f}: 2\n`;
  }
}

/** Mangle text: flip, truncate, splice, repeat. */
export function mutateText(r: Rand, text: string): string {
  const b = Buffer.from(text);
  if (b.length === 0) return String.fromCharCode(int(r, 256));
  switch (int(r, 4)) {
    case 0:
      for (let i = 1 + int(r, 4); i > 0; i--) b[int(r, b.length)] = int(r, 256);
      return b.toString("latin1");
    case 1:
      return text.slice(0, int(r, text.length));
    case 2: {
      const at = int(r, text.length);
      return (
        text.slice(0, at) + pick(r, ["\u0000", "{", "}", "[", "]", ":", "- ", "\n  ", "&a ", "*a", "!!", '"', "'", "#", "%YAML 1.1\n", "\t"]) + text.slice(at)
      );
    }
    default:
      return text.repeat(1 + int(r, 5));
  }
}

/** ProxyConfig text as an operator or attacker might write it. */
export function proxyConfigText(r: Rand, fields: readonly string[] = FIELDS): string {
  const k = int(r, 10);
  if (k === 0) return yamlSpecial(r, fields);
  if (k === 1) return pick(r, ["", " ", "null", "[]", "- a", "3", '"x"', "{", "}", "{}", "~", "\u0000", "---", "...", '{"a":1,"a":2}']);
  const doc = proxyConfigDoc(r, fields);
  const text = r() < 0.5 ? JSON.stringify(doc) : YAML.stringify(doc);
  return r() < 0.25 ? mutateText(r, text) : text;
}

/** The mesh file: a MeshConfig with defaultConfig, or something else. */
export function meshConfigText(r: Rand, fields: readonly string[] = FIELDS): string {
  const k = int(r, 6);
  if (k === 0) return proxyConfigText(r, fields);
  const mesh: Record<string, unknown> = { [r() < 0.9 ? "defaultConfig" : "default_config"]: r() < 0.9 ? proxyConfigDoc(r, fields) : anyValue(r) };
  if (r() < 0.3) mesh[pick(r, ["enableTracing", "accessLogFile", "trustDomain", "rootNamespace"])] = anyValue(r, 1);
  const text = r() < 0.3 ? JSON.stringify(mesh) : YAML.stringify(mesh);
  return r() < 0.25 ? mutateText(r, text) : text;
}

/** A Go-quoted string, sometimes invalid (bad escapes, unterminated, raw newlines). */
function goQuoted(r: Rand, value: string): string {
  const q = JSON.stringify(value);
  switch (int(r, 24)) {
    case 0:
      return q.slice(0, -1);
    case 1:
      return (
        q.slice(0, 1 + int(r, q.length)) +
        pick(r, ["\\x", "\\xZZ", "\\u12", "\\U0011FFFF", "\\400", "\\q", "\\", "\\777", "\\ud800", "\n"]) +
        q.slice(1 + int(r, q.length))
      );
    case 2:
      return "`" + value + "`";
    case 3:
      return value;
    default:
      return q;
  }
}

/** A downward-API file (`key="value"` lines), with the annotations the agent reads. */
export function downwardText(r: Rand, fields: readonly string[] = FIELDS): string {
  const lines: string[] = [];
  for (let i = int(r, 6); i >= 0; i--) {
    const key = pick(r, [
      "proxy.istio.io/config",
      "sidecar.istio.io/discoveryAddress",
      "status.sidecar.istio.io/port",
      "traffic.sidecar.istio.io/excludeInterfaces",
      "app",
      "version",
      "",
      "=",
      "a b",
      "x".repeat(300),
    ]);
    let value: string;
    if (key === "proxy.istio.io/config") value = proxyConfigText(r, fields);
    else if (key === "status.sidecar.istio.io/port") value = pick(r, ["15020", "0", "-1", "65536", "abc", " 15021 ", "", "1e3", "99999999999999999999"]);
    else if (key === "sidecar.istio.io/discoveryAddress") value = pick(r, ["istiod:15012", "not an address", "istiod", "[::1]:15012", ":", "", "a:99999"]);
    else if (key === "traffic.sidecar.istio.io/excludeInterfaces") value = pick(r, ["eth0", "eth0,lo", ",", "", "*", "x".repeat(500)]);
    else value = pick(r, STRINGS);
    lines.push(`${key}=${goQuoted(r, value)}`);
  }
  if (r() < 0.1) lines.push(pick(r, ["no equals sign", "", "\r", '=""', 'k="a""b"']));
  const text = lines.join(r() < 0.9 ? "\n" : "\r\n");
  return r() < 0.15 ? mutateText(r, text) : text;
}

/** ISTIO_KUBE_APP_PROBERS: the injector's JSON map, hostile. */
export function probersText(r: Rand): string {
  if (r() < 0.1) return pick(r, ["", "{", "[]", "null", "1", '"x"', "{}", '{"/app-health/a/livez":null}', "\u0000"]);
  const doc: Record<string, unknown> = {};
  for (let i = 1 + int(r, 4); i > 0; i--) {
    const path =
      r() < 0.7
        ? `/${pick(r, ["app-health", "app-lifecycle", "x"])}/${pick(r, ["web", "a/b", "", "é"])}/${pick(r, ["livez", "readyz", "startupz", "prestopz", "poststartz", "x"])}`
        : pick(r, STRINGS);
    const handler = pick(r, ["httpGet", "tcpSocket", "grpc", "exec"]);
    const spec: Record<string, unknown> =
      r() < 0.6 ? { port: pick(r, [8080, 0, -1, 65536, "8080", "http", 1.5, null]) } : (anyValue(r, 2) as Record<string, unknown>);
    if (handler === "httpGet" && spec && typeof spec === "object") {
      spec.path = pick(r, ["/healthz", "healthz", "", "/a?b#c", 1, null]);
      if (r() < 0.5) spec.scheme = pick(r, ["HTTP", "HTTPS", "https", "ftp", 1]);
      if (r() < 0.3) spec.httpHeaders = r() < 0.7 ? [{ name: pick(r, ["Host", "", "X:Y", "a\nb"]), value: pick(r, STRINGS) }] : anyValue(r, 1);
    }
    if (handler === "grpc" && spec && typeof spec === "object" && r() < 0.5) spec.service = anyValue(r, 0);
    const prober: Record<string, unknown> = { [handler]: spec };
    if (r() < 0.2) prober[pick(r, ["httpGet", "tcpSocket", "grpc"])] = { port: 1 };
    if (r() < 0.4) prober.timeoutSeconds = pick(r, [0, 1, -1, 1.5, "1", 2 ** 40, null]);
    doc[path] = r() < 0.9 ? prober : anyValue(r, 2);
  }
  const text = JSON.stringify(doc);
  return r() < 0.2 ? mutateText(r, text) : text;
}

/** Values an environment variable of `type` might be set to. */
function envValue(r: Rand, type: string): string {
  if (r() < 0.3) return pick(r, STRINGS);
  switch (type) {
    case "bool":
    case "optbool":
      return pick(r, ["true", "false", "1", "0", "TRUE", "t", "yes", "", " true", "2"]);
    case "int":
      return pick(r, ["0", "-1", "1", "65535", "65536", "2147483648", "9007199254740993", "1e3", "0x10", " 5", "", "abc", "-0"]);
    case "float":
      return pick(r, ["0", "0.5", "1", "1.01", "5", "-0.1", "NaN", "Infinity", "1e-400", "", "abc"]);
    case "duration":
      return pick(r, ["0s", "1ms", "-1s", "-5s", "5s", "1h", "9999999999h", "1.5s", "10", "", "abc", "1m30s", "2562047h47m16.854775807s", "2562048h"]);
    default:
      return pick(r, [
        "",
        "x",
        "localhost:15053",
        ":0",
        "[::1]:53",
        "none",
        "local",
        "Citadel",
        "GoogleComputeEngine",
        "fips-140-3",
        "fips140=only",
        "10MiB",
        "off",
        "1",
        "-1",
        "1TiB",
        "a,b,*",
      ]);
  }
}

export const ENV_NAMES = Object.keys(PROXY_ENV) as (keyof typeof PROXY_ENV)[];

/** An environment: a few declared variables (from `names`) set to hostile values. */
export function envFor(r: Rand, names: readonly string[] = ENV_NAMES): Record<string, string> {
  const env: Record<string, string> = {};
  for (let i = 1 + int(r, 6); i > 0; i--) {
    const name = pick(r, names);
    const d = (PROXY_ENV as Record<string, { type: string }>)[name];
    env[name] = envValue(r, d?.type ?? "string");
  }
  return env;
}

/** The proxy command's flags; names and values hostile, syntax pflag's. */
export function argvFor(r: Rand, flagNames: readonly string[]): string[] {
  const argv: string[] = [];
  if (r() < 0.8) argv.push(pick(r, ["sidecar", "router", "waypoint", "ztunnel", "gateway", "", "-", "--"]));
  for (let i = int(r, 5); i > 0; i--) {
    const name = r() < 0.85 ? pick(r, flagNames) : pick(r, ["unknown", "", "=", "-", "h", "x".repeat(100)]);
    const value = r() < 0.5 ? pick(r, STRINGS) : pick(r, ["0", "-1", "65536", "true", "maybe", "info", "debug,misc:error", "default:bogus", "x:y:z", "1s", ""]);
    switch (int(r, 4)) {
      case 0:
        argv.push(`--${name}=${value}`);
        break;
      case 1:
        argv.push(`--${name}`, value);
        break;
      case 2:
        argv.push(`--${name}`);
        break;
      default:
        argv.push(`-${name.slice(0, 1 + int(r, 2))}${value}`);
    }
  }
  return argv;
}
