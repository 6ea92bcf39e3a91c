// Run as PID 1 of a fresh PID namespace by reaper.test.ts:
//   unshare --pid --fork --mount-proc bun test/envoy/pid1-main.ts <reap|noreap>
// Starts the supervisor with a fake Envoy that orphans a short-lived grandchild, waits, and
// prints one JSON line: {pid, zombies, reaped, ownChildExit, envoyRunning}.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { HttpEnvoyAdmin } from "../../src/envoy/admin.ts";
import { knownIstioListeners, resolveDrainPlan } from "../../src/envoy/drainplan.ts";
import { listProcesses } from "../../src/envoy/reaper.ts";
import { EnvoySupervisor } from "../../src/envoy/supervisor.ts";
import { freePort, writeFakeBootstrap, writeFakeEnvoyLauncher } from "../support/fake-envoy.ts";

const reap = process.argv[2] === "reap";
const dir = mkdtempSync(join(tmpdir(), "envoy-pid1-"));
const port = await freePort();
const bootstrap = writeFakeBootstrap(join(dir, "envoy-rev.json"), port);
const sup = new EnvoySupervisor({
  log: silentLogger(),
  readiness: new Readiness(),
  binaryPath: writeFakeEnvoyLauncher(dir),
  args: {
    bootstrapPath: bootstrap,
    drainDurationMs: 1000,
    nodeIps: ["127.0.0.1"],
    proxyLogLevel: "warning",
    proxyComponentLogLevel: "",
    skipDeprecatedLogs: false,
    enableCoreDump: false,
    concurrency: 0,
  },
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin", FAKE_ENVOY_ORPHAN_MS: "200" },
  admin: new HttpEnvoyAdmin("127.0.0.1", port),
  drainPlan: resolveDrainPlan({ sidecar: true, exitOnZeroActiveConnections: false, terminationDrainMs: 0, minimumDrainMs: 0, stopGraceMs: 1000 }),
  knownListeners: knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090 }),
  restart: { mode: "never", baseMs: 100, maxMs: 100, budget: 0, windowMs: 1000 },
  cleanupFiles: [bootstrap],
  ...(reap ? { reaper: { selfPid: process.pid, intervalMs: 100 } } : {}),
});
await sup.start(new AbortController().signal);
// A child spawned through Bun by "another component" while the reaper runs: Bun must still get
// its exit status (a stolen status would make Bun fail with ECHILD).
const own = Bun.spawn(["sh", "-c", "sleep 0.4; exit 7"], { stdio: ["ignore", "ignore", "ignore"] });
const ownChildExit = await own.exited;
await Bun.sleep(1200);
const zombies = listProcesses()
  .filter((p) => p.state === "Z")
  .map((p) => p.pid);
const envoyRunning = sup.state === "running" && sup.pids.length === 1;
await sup.shutdown({ immediate: true });
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ pid: process.pid, zombies, ownChildExit, envoyRunning }));
process.exit(0);
