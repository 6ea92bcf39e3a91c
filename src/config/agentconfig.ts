// The one validated configuration the composition root (src/agent.ts) builds components from.
// Produced by config/load.ts from argv + env + files; nothing below agent.ts reads process.env,
// process.argv or the clock directly. Each component takes its own narrow options object, mapped
// from this by a small `from AgentConfig` function living beside the component.

import type { EnvMap, EnvValueOf } from "./envdecl.ts";
import type { ProxyEnvDecls } from "./env.ts";
import type { ProxyConfig } from "./proxyconfig.ts";

export type ProxyType = "sidecar" | "router" | "waypoint" | "ztunnel" | "agentgateway";
export type IpMode = "ipv4" | "ipv6" | "dual";

export type ProxyEnv = { [K in keyof ProxyEnvDecls]: EnvValueOf<ProxyEnvDecls[K]["type"]> };

/** The `proxy` command's flags (reference §1), after parsing. */
export interface ProxyFlags {
  domain: string;
  meshConfig: string;
  stsPort: number;
  tokenManagerPlugin: string;
  serviceCluster: string;
  proxyLogLevel: string;
  proxyComponentLogLevel: string;
  concurrency: number;
  templateFile: string;
  outlierLogPath: string;
  profiling: boolean;
  /** Beyond Istio: LOCAL_XDS_PATH as a flag. */
  localXdsPath: string;
}

export interface NodeIdentity {
  type: ProxyType;
  /** Instance IPs, deduplicated, INSTANCE_IP first; never empty (127.0.0.1/::1 fallback). */
  ips: string[];
  ipMode: IpMode;
  /** POD_NAME.POD_NAMESPACE */
  id: string;
  /** DNS domain (`--domain`, default `<ns>.svc.cluster.local`). */
  domain: string;
  /** `<type>~<first ip>~<id>~<domain>` */
  nodeId: string;
  podName: string;
  podNamespace: string;
  serviceAccount: string;
}

export interface AgentConfig {
  proxyType: ProxyType;
  /** Effective ProxyConfig after layering, validation and annotation overrides. */
  proxyConfig: ProxyConfig;
  /** Where each top-level ProxyConfig field came from (`default`, `mesh config`, `PROXY_CONFIG`, `annotation`). */
  proxyConfigSources: Record<string, string>;
  env: ProxyEnv;
  /** The raw environment, for prefix families (ISTIO_META_*, ISTIO_METAJSON_*, XDS_HEADER_*, CA_HEADER_*). */
  rawEnv: EnvMap;
  flags: ProxyFlags;
  node: NodeIdentity;
  /** Pod labels and annotations from ./etc/istio/pod/{labels,annotations} (empty when absent). */
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Directory the agent's relative paths (./etc/istio/proxy, ./var/run/...) resolve against: its cwd. */
  root: string;
  /** The agent's own UID (0 when root). */
  uid: number;
  /** The Istio release reported to istiod as ISTIO_VERSION metadata (unless ISTIO_META_ISTIO_VERSION is set). */
  version: string;
}
