// Local mode's entry points: the file-backed xDS server, built directly (tests, tools) or from
// the agent's configuration (LOCAL_XDS_PATH) by the composition root.

import { resolve } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/metrics.ts";
import type { Readiness } from "../lib/readiness.ts";
import { childConverter } from "./converter.ts";
import { LocalXdsServer, type LocalXdsServerOptions } from "./server.ts";

export { LocalXdsServer, ADS_SERVICE, type LocalXdsServerOptions } from "./server.ts";
export { LocalXdsError } from "./errors.ts";
export type { ReloadResult } from "./source.ts";
export type { Snapshot, Resource } from "./snapshot.ts";

/** The socket the agent's local xDS server listens on, inside the proxy config directory. */
export const LOCAL_XDS_SOCKET = "local-xds.sock";

export function createLocalXdsServer(opts: LocalXdsServerOptions): LocalXdsServer {
  return new LocalXdsServer(opts);
}

/**
 * The agent's local xDS server when LOCAL_XDS_PATH is set (else undefined): serves the file on
 * `unix://<root>/<configPath>/local-xds.sock` (or `deps.listen`, e.g. `127.0.0.1:0`); the relay
 * dials `address()` in plaintext (controlPlaneAuthPolicy NONE) instead of discoveryAddress. With
 * `selfCommand` (how to run the agent again) the file is converted by a short-lived copy of the
 * agent (converter.ts), else in this process.
 */
export function createLocalXds(
  cfg: AgentConfig,
  deps: { log: Logger; registry?: Registry; readiness?: Readiness; listen?: string; initAfter?: Promise<unknown>; selfCommand?: readonly string[] },
): LocalXdsServer | undefined {
  const path = cfg.env.LOCAL_XDS_PATH;
  if (!path) return undefined;
  const socket = resolve(cfg.root, cfg.proxyConfig.configPath ?? "./etc/istio/proxy", LOCAL_XDS_SOCKET);
  return new LocalXdsServer({
    path,
    listen: deps.listen ?? `unix://${socket}`,
    log: deps.log,
    registry: deps.registry,
    readiness: deps.readiness,
    cwd: cfg.root,
    ...(deps.initAfter ? { initAfter: deps.initAfter } : {}),
    ...(deps.selfCommand?.length ? { convert: childConverter({ command: deps.selfCommand, log: deps.log }) } : {}),
  });
}
