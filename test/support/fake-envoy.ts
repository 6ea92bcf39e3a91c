#!/usr/bin/env bun
// A fake Envoy for tests: a real process, started through a small launcher script exactly as the
// agent starts Envoy. It parses `-c <bootstrap>`, reads the admin port from the bootstrap JSON
// (admin.address.socket_address.{address,port_value}), serves the admin API the agent uses, and
// appends one JSON line per event to the file named by FAKE_ENVOY_RECORD:
//   {"event":"start","pid":..,"epoch":..,"argv":[..]}   {"event":"call","method":"POST","path":"/drain_listeners","query":"inboundonly&graceful"}
//   {"event":"signal","signal":"SIGTERM"}   {"event":"exit","code":0}
//
// Admin API: GET /ready (200 LIVE), GET /stats?usedonly&filter=<re> (`name: value` lines),
// POST /drain_listeners, POST /quitquitquit (exits 0), and test controls:
//   POST /fake/connections?n=K   set the client-facing downstream_cx_active
//   POST /fake/exit?code=N       exit with code N
//   POST /fake/crash?signal=S    kill itself with signal S (default SIGKILL)
//   POST /fake/hang              ignore SIGTERM/SIGINT from now on
// Environment controls:
//   FAKE_ENVOY_RECORD=<file>         where events go
//   FAKE_ENVOY_CONNECTIONS=K         initial active connections (default 0)
//   FAKE_ENVOY_HANG=1                ignore SIGTERM/SIGINT (must be SIGKILLed)
//   FAKE_ENVOY_EXIT_CODE=N           exit with N after FAKE_ENVOY_EXIT_AFTER_MS (default 0 ms)
//   FAKE_ENVOY_CRASH_SIGNAL=S        kill itself with S after FAKE_ENVOY_EXIT_AFTER_MS
//   FAKE_ENVOY_FAIL_FIRST=K          apply EXIT_CODE / CRASH_SIGNAL only to the first K starts
//                                    (counted in the record file); later starts run normally
//   FAKE_ENVOY_ORPHAN_MS=T           fork a grandchild that outlives this process by ~T ms
//   FAKE_ENVOY_NO_ADMIN=1            do not serve the admin API

import { appendFileSync, existsSync, readFileSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";

export interface FakeEnvoyRecord {
  event: "start" | "call" | "signal" | "exit" | "error";
  pid: number;
  epoch: number;
  t: number;
  argv?: string[];
  method?: string;
  path?: string;
  query?: string;
  signal?: string;
  code?: number;
  message?: string;
}

/** Write an executable `envoy` launcher in `dir` that runs this script with the current Bun. */
export function writeFakeEnvoyLauncher(dir: string): string {
  const path = join(dir, "envoy");
  const script = `#!/bin/sh\nexec "${process.execPath}" "${import.meta.path}" "$@"\n`;
  writeFileSync(path, script);
  chmodSync(path, 0o755);
  return path;
}

/** Write a minimal bootstrap with the admin port the fake (and the agent) will use. */
export function writeFakeBootstrap(path: string, adminPort: number, address = "127.0.0.1"): string {
  writeFileSync(path, JSON.stringify({ admin: { address: { socket_address: { address, port_value: adminPort } } } }));
  return path;
}

export function readRecords(file: string): FakeEnvoyRecord[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as FakeEnvoyRecord);
}

/** An ephemeral TCP port that was free a moment ago. */
export { freePort } from "./ports.ts";

// ---- the fake itself ---------------------------------------------------------------------------

function argValue(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const env = process.env;
  const recordFile = env.FAKE_ENVOY_RECORD;
  const epoch = Number(argValue(argv, "--restart-epoch") ?? 0);
  const record = (r: Omit<FakeEnvoyRecord, "pid" | "epoch" | "t">): void => {
    if (!recordFile) return;
    appendFileSync(recordFile, JSON.stringify({ ...r, pid: process.pid, epoch, t: Date.now() }) + "\n");
  };
  const previousStarts = recordFile ? readRecords(recordFile).filter((r) => r.event === "start").length : 0;

  const exit = (code: number): never => {
    record({ event: "exit", code });
    process.exit(code);
  };

  // SIGTERM/SIGINT are handled (recorded, then exit 0) before "start" is recorded: a test that
  // signals an Envoy it has seen start must find the signal recorded, as from a real Envoy. Not
  // the other way round: a process preempted between its "start" and its handlers (a loaded
  // machine) died of the signal's default action and left no record.
  let hang = env.FAKE_ENVOY_HANG === "1";
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    process.on(sig, () => {
      record({ event: "signal", signal: sig });
      if (!hang) exit(0);
    });
  }
  record({ event: "start", argv });

  const failFirst = env.FAKE_ENVOY_FAIL_FIRST === undefined ? Infinity : Number(env.FAKE_ENVOY_FAIL_FIRST);
  const failing = previousStarts < failFirst;

  if (env.FAKE_ENVOY_ORPHAN_MS) {
    const secs = (Number(env.FAKE_ENVOY_ORPHAN_MS) / 1000).toFixed(3);
    // `sh` exits at once; its background `sleep` is orphaned and re-parented to the reaper.
    const sh = Bun.spawn(["sh", "-c", `sleep ${secs} </dev/null >/dev/null 2>&1 &`], { stdio: ["ignore", "ignore", "ignore"] });
    await sh.exited;
  }

  let connections = Number(env.FAKE_ENVOY_CONNECTIONS ?? 0);
  const after = Number(env.FAKE_ENVOY_EXIT_AFTER_MS ?? 0);
  if (failing && env.FAKE_ENVOY_CRASH_SIGNAL) {
    const sig = env.FAKE_ENVOY_CRASH_SIGNAL;
    setTimeout(() => {
      record({ event: "exit", signal: sig });
      process.kill(process.pid, sig as NodeJS.Signals);
    }, after);
  } else if (failing && env.FAKE_ENVOY_EXIT_CODE !== undefined) {
    setTimeout(() => exit(Number(env.FAKE_ENVOY_EXIT_CODE)), after);
  }

  const bootstrapPath = argValue(argv, "-c");
  if (!bootstrapPath) {
    record({ event: "error", message: "missing -c" });
    exit(1);
  }
  if (env.FAKE_ENVOY_NO_ADMIN === "1") {
    setInterval(() => {}, 1 << 30);
    return;
  }
  let bootstrap: { admin?: { address?: { socket_address?: { address?: string; port_value?: number } } } };
  try {
    bootstrap = JSON.parse(readFileSync(bootstrapPath!, "utf8"));
  } catch (err) {
    record({ event: "error", message: `cannot read bootstrap ${bootstrapPath}: ${(err as Error).message}` });
    return exit(1);
  }
  const sa = bootstrap.admin?.address?.socket_address ?? {};
  const port = sa.port_value ?? 15000;
  const hostname = sa.address ?? "127.0.0.1";

  const statsText = (): string =>
    [
      "http.admin.downstream_cx_active: 1",
      "http.inbound_0.0.0.0_8080.downstream_cx_active: 7",
      `listener.0.0.0.0_15021.downstream_cx_active: 1`,
      `listener.0.0.0.0_15090.downstream_cx_active: 1`,
      "listener.admin.downstream_cx_active: 1",
      "listener.admin.main_thread.downstream_cx_active: 1",
      "listener.envoy_internal_main_internal.downstream_cx_active: 2",
      `listener.10.0.0.1_8080.downstream_cx_active: ${connections}`,
      `listener.10.0.0.1_8080.worker_0.downstream_cx_active: ${connections}`,
      "server.total_connections: 3",
    ].join("\n");

  Bun.serve({
    port,
    hostname,
    reusePort: true,
    fetch(req) {
      const url = new URL(req.url);
      const query = url.search.replace(/^\?/, "");
      record({ event: "call", method: req.method, path: url.pathname, query });
      switch (url.pathname) {
        case "/ready":
          return new Response("LIVE\n");
        case "/stats": {
          const filter = url.searchParams.get("filter");
          const re = filter ? new RegExp(filter) : undefined;
          const lines = statsText()
            .split("\n")
            .filter((l) => !re || re.test(l.split(":")[0]!));
          return new Response(lines.join("\n"));
        }
        case "/drain_listeners":
          return req.method === "POST" ? new Response("OK\n") : new Response("method not allowed\n", { status: 405 });
        case "/quitquitquit":
          setTimeout(() => exit(0), 10);
          return new Response("OK\n");
        case "/fake/connections":
          connections = Number(url.searchParams.get("n") ?? 0);
          return new Response("OK\n");
        case "/fake/exit":
          setTimeout(() => exit(Number(url.searchParams.get("code") ?? 0)), 10);
          return new Response("OK\n");
        case "/fake/crash": {
          const sig = url.searchParams.get("signal") ?? "SIGKILL";
          setTimeout(() => {
            record({ event: "exit", signal: sig });
            process.kill(process.pid, sig as NodeJS.Signals);
          }, 10);
          return new Response("OK\n");
        }
        case "/fake/hang":
          hang = true;
          return new Response("OK\n");
        default:
          return new Response("not found\n", { status: 404 });
      }
    },
  });
}

if (import.meta.main) await main();
