#!/usr/bin/env bun
// The e2e suites' Envoy stand-in: like test/support/fake-envoy.ts (started by the agent through a
// launcher script, admin API on the bootstrap's admin port, JSON-line records in
// FAKE_ENVOY_RECORD readable with readRecords), plus what readiness needs from a real Envoy: with
// E2E_ENVOY_XDS=1 it dials the bootstrap's `xds-grpc` pipe (the agent's XDS socket), subscribes to
// CDS and LDS, checks and ACKs every response (one {"event":"xds",...} record each) and reports
// `cluster_manager.cds.update_success`, `listener_manager.lds.update_success`, `server.state` and
// `listener_manager.workers_started` in /stats as Envoy does, so the agent's /healthz/ready can
// answer 200. Without it, it never becomes ready (and leaves the XDS socket to another client:
// the agent relays one stream at a time).
//
// Admin API: GET /ready, GET /stats?usedonly&filter=<re>, POST /drain_listeners, POST
// /quitquitquit (exits 0), POST /fake/crash?signal=S (kills itself, default SIGKILL).
// SIGTERM/SIGINT: recorded, exit 0.

import { appendFileSync, chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { FakeEnvoyRecord } from "../support/fake-envoy.ts";
import { AdsClient, type ReceivedResponse, type StreamEnd } from "./ads-client.ts";
import { CLUSTER, LISTENER } from "./envoy-resources.ts";

export type E2eEnvoyRecord = Omit<FakeEnvoyRecord, "event"> & { event: FakeEnvoyRecord["event"] | "xds" | "xds-end"; xds?: ReceivedResponse; end?: StreamEnd };

/** Write an executable `envoy` launcher in `dir` running this script with the current Bun. */
export function writeE2eEnvoyLauncher(dir: string): string {
  const path = join(dir, "envoy");
  writeFileSync(path, `#!/bin/sh\nexec "${process.execPath}" "${import.meta.path}" "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

type Bootstrap = {
  admin?: { address?: { socket_address?: { address?: string; port_value?: number } } };
  static_resources?: {
    clusters?: { name: string; load_assignment?: { endpoints?: { lb_endpoints?: { endpoint?: { address?: { pipe?: { path?: string } } } }[] }[] } }[];
  };
};

function xdsPipe(b: Bootstrap): string | undefined {
  const c = b.static_resources?.clusters?.find((x) => x.name === "xds-grpc");
  return c?.load_assignment?.endpoints?.[0]?.lb_endpoints?.[0]?.endpoint?.address?.pipe?.path;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const recordFile = process.env.FAKE_ENVOY_RECORD;
  const record = (r: Omit<E2eEnvoyRecord, "pid" | "epoch" | "t">): void => {
    if (recordFile) appendFileSync(recordFile, JSON.stringify({ ...r, pid: process.pid, epoch: 0, t: Date.now() }) + "\n");
  };
  record({ event: "start", argv });
  const exit = (code: number): never => {
    record({ event: "exit", code });
    process.exit(code);
  };
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    process.on(sig, () => {
      record({ event: "signal", signal: sig });
      exit(0);
    });
  }
  const bootstrapPath = argv[argv.indexOf("-c") + 1];
  let bootstrap: Bootstrap;
  try {
    bootstrap = JSON.parse(readFileSync(bootstrapPath!, "utf8"));
  } catch (e) {
    record({ event: "error", message: `cannot read bootstrap ${bootstrapPath}: ${(e as Error).message}` });
    return exit(1);
  }

  const updates = { cds: 0, lds: 0 };
  if (process.env.E2E_ENVOY_XDS === "1") {
    const pipe = xdsPipe(bootstrap);
    if (!pipe) {
      record({ event: "error", message: "no xds-grpc pipe in the bootstrap" });
      return exit(1);
    }
    void subscribeForever(resolve(pipe), updates, record);
  }

  const stats = [
    () => `cluster_manager.cds.update_success: ${updates.cds}`,
    () => `listener_manager.lds.update_success: ${updates.lds}`,
    () => "server.state: 0",
    () => "listener_manager.workers_started: 1",
    () => "listener.admin.downstream_cx_active: 1",
  ];
  const admin: Record<string, (url: URL, method: string) => Response> = {
    "/ready": () => new Response("LIVE\n"),
    "/stats": (url) => {
      const re = new RegExp(url.searchParams.get("filter") ?? "");
      return new Response(
        stats
          .map((f) => f())
          .filter((l) => re.test(l.split(":")[0]!))
          .join("\n"),
      );
    },
    "/drain_listeners": (_url, method) => new Response("OK\n", { status: method === "POST" ? 200 : 405 }),
    "/quitquitquit": () => (setTimeout(() => exit(0), 10), new Response("OK\n")),
    "/fake/crash": (url) => {
      const sig = url.searchParams.get("signal") ?? "SIGKILL";
      setTimeout(() => (record({ event: "exit", signal: sig }), process.kill(process.pid, sig as NodeJS.Signals)), 10);
      return new Response("OK\n");
    },
  };
  const sa = bootstrap.admin?.address?.socket_address ?? {};
  Bun.serve({
    port: sa.port_value ?? 15000,
    hostname: sa.address ?? "127.0.0.1",
    reusePort: true,
    fetch(req) {
      const url = new URL(req.url);
      record({ event: "call", method: req.method, path: url.pathname, query: url.search.replace(/^\?/, "") });
      return admin[url.pathname]?.(url, req.method) ?? new Response("not found\n", { status: 404 });
    },
  });
}

/** CDS + LDS over ADS, as Envoy: reconnect after 200 ms whenever the stream ends. */
async function subscribeForever(
  socket: string,
  updates: { cds: number; lds: number },
  record: (r: Omit<E2eEnvoyRecord, "pid" | "epoch" | "t">) => void,
): Promise<void> {
  for (;;) {
    const client = new AdsClient(socket, (r) => {
      record({ event: "xds", xds: r });
      if (r.problem) return;
      if (r.typeUrl === CLUSTER) updates.cds++;
      if (r.typeUrl === LISTENER) updates.lds++;
    });
    client.request(CLUSTER);
    client.request(LISTENER);
    record({ event: "xds-end", end: await client.ended });
    await Bun.sleep(200);
  }
}

if (import.meta.main) await main();
