// The one way a command turns flags, environment and files under its working directory into the
// agent's configuration: `agent proxy` starts from it and `agent doctor` checks what it gives.

import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { resolve } from "node:path";
import { loadAgentConfig, ConfigError, type Loaded } from "../config/load.ts";
import type { ProxyFlags } from "../config/agentconfig.ts";
import type { EnvMap } from "../config/envdecl.ts";
import { parseDownwardApi } from "../config/downward.ts";
import { readHostAddresses, upInterfaceTable, type HostAddresses } from "../config/hostaddrs.ts";
import { readBoundedTextSync } from "../lib/boundedfile.ts";
import { CliError } from "./io.ts";

export interface ConfigHost {
  /** The interface addresses (getifaddrs; os.networkInterfaces() with a warning when it cannot be called). */
  addresses(): HostAddresses;
  cpuCount(): number;
  uid(): number;
}

export const realHost: ConfigHost = {
  addresses: () => readHostAddresses(),
  cpuCount: () => cpus().length,
  uid: () => (typeof process.getuid === "function" ? process.getuid() : 0),
};

/** loadAgentConfig with the files read under `root`; a ConfigError becomes a CliError (exit 255). */
export function loadConfigUnder(root: string, type: string, flags: ProxyFlags, env: EnvMap, host: ConfigHost, version: string): Loaded {
  try {
    const addresses = host.addresses();
    const loaded = loadAgentConfig({
      type,
      flags,
      env: flags.localXdsPath ? { ...env, LOCAL_XDS_PATH: flags.localXdsPath } : env,
      readFile: (p, maxBytes) => {
        const abs = resolve(root, p);
        if (!existsSync(abs)) return undefined;
        return readBoundedTextSync(abs, maxBytes);
      },
      parseDownward: parseDownwardApi,
      interfaces: upInterfaceTable(addresses),
      cpuCount: host.cpuCount(),
      root,
      uid: host.uid(),
      version,
    });
    if (addresses.warning) loaded.warnings.push(addresses.warning);
    return loaded;
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(e.message);
    throw e;
  }
}
