#!/usr/bin/env bun
// The Envoy stand-in of the Wasm fault tests: started by the agent through a launcher script, it
// serves the admin API the agent calls on the bootstrap's admin port and reports itself ready in
// /stats (CDS/LDS accepted, LIVE, workers started), so the agent's readiness hangs only on its
// own admin query. Every admin call is appended to the file named by WASM_ENVOY_RECORD as one JSON
// line {"method","path","t"}. SIGTERM: exit 0. It never dials the XDS socket: the test does.

import { appendFileSync, chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface AdminCall {
  method: string;
  path: string;
  t: number;
}

/** An executable `envoy` launcher in `dir` running this script with the current Bun. */
export function writeWasmEnvoyLauncher(dir: string): string {
  const path = join(dir, "envoy");
  writeFileSync(path, `#!/bin/sh\nexec "${process.execPath}" "${import.meta.path}" "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

export function adminCalls(file: string): AdminCall[] {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AdminCall);
  } catch {
    return [];
  }
}

const READY_STATS = [
  "cluster_manager.cds.update_success: 1",
  "cluster_manager.cds.update_rejected: 0",
  "listener_manager.lds.update_success: 1",
  "listener_manager.lds.update_rejected: 0",
  "server.state: 0",
  "listener_manager.workers_started: 1",
  "listener.0.0.0.0_15006.downstream_cx_active: 0",
];

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const bootstrap = JSON.parse(readFileSync(argv[argv.indexOf("-c") + 1]!, "utf8")) as {
    admin?: { address?: { socket_address?: { address?: string; port_value?: number } } };
  };
  const sa = bootstrap.admin?.address?.socket_address ?? {};
  const record = process.env.WASM_ENVOY_RECORD;
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => process.exit(0));
  Bun.serve({
    hostname: sa.address ?? "127.0.0.1",
    port: sa.port_value ?? 15000,
    fetch(req) {
      const u = new URL(req.url);
      if (record) appendFileSync(record, JSON.stringify({ method: req.method, path: u.pathname, t: Date.now() }) + "\n");
      if (u.pathname === "/ready") return new Response("LIVE\n");
      if (u.pathname === "/stats") {
        const re = new RegExp(u.searchParams.get("filter") ?? "");
        return new Response(READY_STATS.filter((l) => re.test(l.split(":")[0]!)).join("\n"));
      }
      if (u.pathname === "/drain_listeners" || u.pathname === "/quitquitquit") return new Response("OK\n");
      return new Response("not found\n", { status: 404 });
    },
  });
}
