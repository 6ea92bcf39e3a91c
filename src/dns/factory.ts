// Building the DNS proxy from AgentConfig, with Istio's rules: enabled for sidecars with
// ISTIO_META_DNS_CAPTURE or for any proxy with ISTIO_META_ENABLE_DNS_SERVER; listen address,
// resolv.conf choice and respond-before-sync from DNS_PROXY_ADDR and the UID; upstreams and
// search list from resolv.conf (unreadable: the agent cannot start).

import { existsSync } from "node:fs";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import type { Readiness } from "../lib/readiness.ts";
import { proxyDomain } from "./althosts.ts";
import { DnsError } from "./errors.ts";
import type { UpstreamTransport } from "./forwarder.ts";
import { DnsProxy } from "./proxy.ts";
import { ALTERNATE_RESOLV_CONF, bindAddresses, parseResolvConf, planDns, upstreamServers, type HostPort } from "./resolvconf.ts";
import { FILE_LIMITS, readBoundedTextSync } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export { dnsProxyEnabled } from "./enabled.ts";

export interface DnsProxyDeps {
  log: Logger;
  registry: Registry;
  readiness: Readiness;
  /** Read this resolv.conf instead of /etc/resolv.conf (or /var/lib/istio/resolv.conf). */
  resolvConfPath?: string;
  /** Port of the upstream nameservers (53; tests point it at their own resolver). */
  upstreamPort?: number;
  transport?: UpstreamTransport;
  /** Tests only: bind these instead of the DNS_PROXY_ADDR addresses (port 0: a free port). */
  listen?: HostPort[];
}

export function createDnsProxy(cfg: AgentConfig, deps: DnsProxyDeps): DnsProxy {
  const log = deps.log.child("dns");
  const plan = planDns({
    addr: cfg.env.DNS_PROXY_ADDR,
    uid: cfg.uid,
    alternateResolvConfExists: existsSync(ALTERNATE_RESOLV_CONF),
    resolvConfPath: deps.resolvConfPath,
  });
  if (plan.warning) log.error(plan.warning);
  let text: string;
  try {
    text = readBoundedTextSync(plan.resolvConfPath, FILE_LIMITS.system);
  } catch (e) {
    throw new DnsError("resolvconf", `failed to load ${plan.resolvConfPath}: ${errorMessage(e)}`, { cause: e });
  }
  const rc = parseResolvConf(text);
  const { upstreams, ignored } = upstreamServers(rc.servers, deps.upstreamPort);
  if (ignored.length) log.warn(`${plan.resolvConfPath}: nameserver entries that are not IP addresses are ignored`, { entries: ignored });
  if (upstreams.length === 0)
    log.warn(`${plan.resolvConfPath} lists no nameserver: names outside the mesh will get SERVFAIL`, ids({ path: plan.resolvConfPath }));
  return new DnsProxy({
    listen: deps.listen ?? bindAddresses(plan.addr, rc.servers),
    upstreams,
    search: rc.search,
    proxyDomain: proxyDomain(cfg.node.podNamespace, cfg.node.domain),
    respondBeforeSync: plan.respondBeforeSync,
    forwardParallel: cfg.env.DNS_FORWARD_PARALLEL,
    forwardTimeoutMs: cfg.env.DNS_FORWARD_TIMEOUT,
    log,
    registry: deps.registry,
    readiness: deps.readiness,
    transport: deps.transport,
  });
}
