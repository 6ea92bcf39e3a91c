// `agent proxy`'s own flags (pilot-agent's), shared with `agent doctor`, which reads the same
// command line to check the configuration `agent proxy` would load.

import type { FlagSpec } from "../lib/flags.ts";

export const PROXY_FLAGS: FlagSpec[] = [
  { name: "domain", type: "string", default: "", usage: "DNS domain suffix. If not provided uses ${POD_NAMESPACE}.svc.cluster.local" },
  {
    name: "meshConfig",
    type: "string",
    default: "./etc/istio/config/mesh",
    usage:
      "File name for Istio mesh configuration. If not specified, a default mesh will be used. This may be overridden by PROXY_CONFIG environment variable or proxy.istio.io/config annotation.",
  },
  { name: "stsPort", type: "int", default: 0, usage: "HTTP Port on which to serve Security Token Service (STS). If zero, STS service will not be provided." },
  {
    name: "tokenManagerPlugin",
    type: "string",
    default: "",
    usage: "Token provider specific plugin name (empty: GoogleTokenExchange, for the --stsPort service).",
  },
  { name: "serviceCluster", type: "string", default: "istio-proxy", usage: "Service cluster (deprecated; ProxyConfig.serviceCluster wins)" },
  {
    name: "proxyLogLevel",
    type: "string",
    default: "warning",
    usage:
      "The log level used to start the Envoy proxy (choose from {trace, debug, info, warning, error, critical, off}). Level may also include one or more scopes, such as 'info,misc:error,upstream:debug'",
  },
  {
    name: "proxyComponentLogLevel",
    type: "string",
    default: "",
    usage: "The component log level used to start the Envoy proxy. Deprecated, use proxyLogLevel instead",
  },
  { name: "concurrency", type: "int", default: 0, usage: "number of worker threads to run (legacy; prefer ProxyConfig.concurrency)" },
  { name: "templateFile", type: "string", default: "", usage: "Go template bootstrap config" },
  { name: "outlierLogPath", type: "string", default: "", usage: "The log path for outlier detection" },
  { name: "profiling", type: "bool", default: true, usage: "Enable profiling via web interface host:port/debug/pprof/." },
  {
    name: "localXdsPath",
    type: "string",
    default: "",
    usage: "Beyond Istio: serve xDS from this YAML/JSON file instead of dialing istiod (local mode)",
    env: "LOCAL_XDS_PATH",
  },
];
