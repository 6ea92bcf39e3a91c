// Are the ports the agent and Envoy will listen on free: a quick bind and close on the address each
// listener uses. A port in use is named with its owner's setting (another agent, or another service).

import { createServer } from "node:net";
import { createSocket } from "node:dgram";
import type { AgentConfig } from "../config/agentconfig.ts";
import { dnsProxyEnabled } from "../dns/enabled.ts";
import { errorMessage } from "../lib/errors.ts";
import { fail, ok, type Finding } from "./finding.ts";

export interface PortUse {
  port: number;
  host: string;
  what: string;
  udp?: boolean;
}

/** The listeners of this configuration: the agent's, and Envoy's fixed ones unless DISABLE_ENVOY. */
export function portsInUse(cfg: AgentConfig): PortUse[] {
  const pc = cfg.proxyConfig;
  const out: PortUse[] = [];
  if (pc.statusPort) out.push({ port: pc.statusPort, host: "0.0.0.0", what: "status server (ProxyConfig statusPort)" });
  if (!cfg.env.DISABLE_ENVOY) {
    out.push({ port: pc.proxyAdminPort ?? 15000, host: "127.0.0.1", what: "Envoy admin (ProxyConfig proxyAdminPort)" });
    if (cfg.env.ENVOY_STATUS_PORT) out.push({ port: cfg.env.ENVOY_STATUS_PORT, host: "0.0.0.0", what: "Envoy health listener (ENVOY_STATUS_PORT)" });
    if (cfg.env.ENVOY_PROMETHEUS_PORT)
      out.push({ port: cfg.env.ENVOY_PROMETHEUS_PORT, host: "0.0.0.0", what: "Envoy Prometheus listener (ENVOY_PROMETHEUS_PORT)" });
    if (cfg.proxyType === "sidecar") {
      out.push(
        { port: 15001, host: "0.0.0.0", what: "Envoy outbound capture listener" },
        { port: 15006, host: "0.0.0.0", what: "Envoy inbound capture listener" },
      );
    }
  }
  if (dnsProxyEnabled(cfg)) {
    const m = /^(.*):(\d+)$/.exec(cfg.env.DNS_PROXY_ADDR);
    const host = !m || m[1] === "localhost" || m[1] === "" ? "127.0.0.1" : m[1]!.replace(/^\[|\]$/g, "");
    const port = m ? Number(m[2]) : 15053;
    out.push({ port, host, what: "DNS proxy (DNS_PROXY_ADDR)" }, { port, host, what: "DNS proxy (DNS_PROXY_ADDR)", udp: true });
  }
  return out;
}

function tryBind(u: PortUse): Promise<string | undefined> {
  return new Promise((resolve) => {
    if (u.udp) {
      const s = createSocket(u.host.includes(":") ? "udp6" : "udp4");
      s.once("error", (e) => (s.close(), resolve(errorMessage(e))));
      s.bind({ port: u.port, address: u.host, exclusive: true }, () => s.close(() => resolve(undefined)));
      return;
    }
    const srv = createServer();
    srv.once("error", (e) => resolve((e as NodeJS.ErrnoException).code ?? errorMessage(e)));
    srv.listen({ port: u.port, host: u.host, exclusive: true }, () => srv.close(() => resolve(undefined)));
  });
}

export async function checkPorts(uses: readonly PortUse[]): Promise<Finding[]> {
  const out: Finding[] = [];
  const free: string[] = [];
  for (const u of uses) {
    const err = await tryBind(u);
    const where = `${u.udp ? "udp" : "tcp"} ${u.host}:${u.port}`;
    if (err === undefined) free.push(`${u.port}${u.udp ? "/udp" : ""}`);
    else
      out.push(
        fail(
          "ports",
          `${where} for the ${u.what} is not free (${err})`,
          `find its owner with \`ss -lnp 'sport = :${u.port}'\`: another agent still running, or another service on that port`,
        ),
      );
  }
  if (free.length) out.unshift(ok("ports", `free: ${free.join(", ")}`));
  return out;
}
