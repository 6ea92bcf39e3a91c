// Shared set-up for the supervisor tests: a temp dir, the fake Envoy launcher, a bootstrap with an
// ephemeral admin port, and an EnvoySupervisor with short durations.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { HttpEnvoyAdmin } from "../../src/envoy/admin.ts";
import { knownIstioListeners, resolveDrainPlan, type DrainPlanInput } from "../../src/envoy/drainplan.ts";
import { EnvoySupervisor, type EnvoySupervisorOptions } from "../../src/envoy/supervisor.ts";
import { freePort, readRecords, writeFakeBootstrap, writeFakeEnvoyLauncher, type FakeEnvoyRecord } from "../support/fake-envoy.ts";

export interface Harness {
  dir: string;
  port: number;
  bootstrap: string;
  recordFile: string;
  sup: EnvoySupervisor;
  lines: string[];
  readiness: Readiness;
  records(): FakeEnvoyRecord[];
  admin(path: string, method?: string): Promise<Response>;
  waitReady(epochPid?: number): Promise<void>;
  cleanup(): void;
}

export interface HarnessOptions {
  fakeEnv?: Record<string, string>;
  drain?: Partial<DrainPlanInput>;
  options?: Partial<EnvoySupervisorOptions>;
}

export async function harness(h: HarnessOptions = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "envoy-sup-"));
  const port = await freePort();
  const bootstrap = writeFakeBootstrap(join(dir, "envoy-rev.json"), port);
  const recordFile = join(dir, "records.jsonl");
  const { log, lines } = memoryLogger("all:debug");
  const readiness = new Readiness();
  const sup = new EnvoySupervisor({
    log: log.child("envoy"),
    readiness,
    binaryPath: writeFakeEnvoyLauncher(dir),
    args: {
      bootstrapPath: bootstrap,
      drainDurationMs: 45_000,
      nodeIps: ["10.0.0.1"],
      proxyLogLevel: "warning",
      proxyComponentLogLevel: "misc:error",
      skipDeprecatedLogs: true,
      enableCoreDump: false,
      concurrency: 2,
    },
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", FAKE_ENVOY_RECORD: recordFile, ...h.fakeEnv },
    admin: new HttpEnvoyAdmin("127.0.0.1", port, 2000),
    drainPlan: resolveDrainPlan({
      sidecar: true,
      exitOnZeroActiveConnections: false,
      terminationDrainMs: 300,
      minimumDrainMs: 100,
      pollIntervalMs: 100,
      pollTimeoutMs: 1000,
      stopGraceMs: 1500,
      ...h.drain,
    }),
    knownListeners: knownIstioListeners({ envoyStatusPort: 15021, envoyPrometheusPort: 15090 }),
    restart: { mode: "on-failure", baseMs: 50, maxMs: 400, budget: 3, windowMs: 60_000 },
    cleanupFiles: [bootstrap],
    ...h.options,
  });
  const self: Harness = {
    dir,
    port,
    bootstrap,
    recordFile,
    sup,
    lines,
    readiness,
    records: () => readRecords(recordFile),
    admin: (path, method = "POST") => fetch(`http://127.0.0.1:${port}${path}`, { method }),
    async waitReady(pid) {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        if (self.records().some((r) => r.event === "call" && r.path === "/ready" && (pid === undefined || r.pid === pid))) return;
        try {
          await fetch(`http://127.0.0.1:${port}/ready`, { signal: AbortSignal.timeout(500) });
        } catch {
          // not listening yet
        }
        await Bun.sleep(30);
      }
      throw new Error(`fake Envoy on port ${port} never became ready`);
    },
    cleanup() {
      for (const pid of sup.pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return self;
}

/** Resolve with the value, or reject after `ms` naming what was awaited. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, Bun.sleep(ms).then(() => Promise.reject(new Error(`timed out after ${ms}ms waiting for ${what}`)))]);
}

export function index(records: FakeEnvoyRecord[], pred: (r: FakeEnvoyRecord) => boolean): number {
  return records.findIndex(pred);
}
