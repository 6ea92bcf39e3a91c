// Whether the DNS proxy runs (Istio's rule), apart from the DNS proxy's code so the composition
// root can decide without loading it: enabled for sidecars with ISTIO_META_DNS_CAPTURE, or for
// any proxy type with ISTIO_META_ENABLE_DNS_SERVER.

import type { AgentConfig } from "../config/agentconfig.ts";

export function dnsProxyEnabled(cfg: Pick<AgentConfig, "env" | "proxyType">): boolean {
  return (cfg.env.ISTIO_META_DNS_CAPTURE && cfg.proxyType === "sidecar") || cfg.env.ISTIO_META_ENABLE_DNS_SERVER;
}
