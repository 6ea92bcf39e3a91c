// Local mode's reload latency, build against build (issue 29: the file is now converted by a
// short-lived copy of the agent instead of in its own heap): compiled agents in bench/idle.ts's
// local shape, each with a grpc-js client holding an ADS stream (LDS, RDS, CDS, EDS) on its XDS
// socket; the file is replaced (write + rename, as an editor or Kubernetes does) RUNS times per
// build, the builds taking turns, and each sample is rename -> the CDS push arriving at the
// client: inotify, the 50 ms debounce, the read, the conversion, the diff, the relay. Median,
// p90 and max per build, with the load average. First, START_RUNS starts per build (taking turns):
// spawn -> "local xDS: serving" (the first load, now the first conversion, is on that path).
//   IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent" bun bench/local-reload.ts
// Not part of `bun run bench` (a comparison of builds, like idle-local.ts).

import type * as grpc from "@grpc/grpc-js";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/support/fake-envoy.ts";
import { holdAds, stopAll } from "./idle-local.ts";
import { agents, idlePod, loadavg } from "./idle-ab-support.ts";
import { fmt, percentile, spawnUntil, type Proc } from "./support.ts";

const ROOT = resolve(import.meta.dir, "..");
const RUNS = Number(process.env.RELOAD_RUNS ?? 21);
const START_RUNS = Number(process.env.START_RUNS ?? 11);
const EXAMPLE = readFileSync(join(ROOT, "examples/xds.yaml"), "utf8");
const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/** The example with the cluster's connect_timeout set to `n` seconds: one changed Cluster per edit. */
const edited = (n: number) => EXAMPLE.replace("connect_timeout: 1s", `connect_timeout: ${n}s`);

/** A local-mode pod's environment in `cwd`, its file a copy of the example. */
async function localPod(cwd: string): Promise<Record<string, string>> {
  mkdirSync(cwd, { recursive: true });
  writeFileSync(join(cwd, "xds.yaml"), EXAMPLE);
  return {
    ...idlePod(cwd),
    CA_PROVIDER: "local",
    LOCAL_XDS_PATH: "xds.yaml",
    PROXY_CONFIG: JSON.stringify({
      terminationDrainDuration: "1s",
      statusPort: await freePort(),
      proxyAdminPort: await freePort(),
      controlPlaneAuthPolicy: "NONE",
    }),
  };
}

const row = (label: string, ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  return `| ${label} | ${fmt(percentile(s, 50))} | ${fmt(percentile(s, 90))} | ${fmt(s.at(-1)!)} |`;
};

/** spawn -> "local xDS: serving", START_RUNS per build, taking turns. */
async function starts(dir: string): Promise<string[]> {
  const builds = agents().map(([label, bin]) => ({ label, bin, ms: [] as number[] }));
  const load = loadavg();
  for (let i = 0; i < START_RUNS; i++) {
    for (const b of builds) {
      const cwd = join(dir, `start-${b.label}-${i}`);
      const p = await spawnUntil([b.bin, "proxy", "sidecar"], await localPod(cwd), cwd, /local xDS: serving/, 60_000);
      b.ms.push(p.ms);
      p.kill("SIGKILL");
      await p.exited;
    }
  }
  return [
    "## Local mode: spawn -> serving the file (bench/local-reload.ts)",
    "",
    `${START_RUNS} starts per build, taking turns. Load average: ${load} at the start, ${loadavg()} at the end.`,
    "",
    "| build | median ms | p90 ms | max ms |",
    "|---|---|---|---|",
    ...builds.map((b) => row(b.label, b.ms)),
    "",
  ];
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agent-local-reload-"));
  const procs: Proc[] = [];
  const clients: grpc.Client[] = [];
  try {
    const started = await starts(dir);
    const pods: { label: string; file: string; next: () => Promise<void>; ms: number[] }[] = [];
    for (const [label, bin] of agents()) {
      const cwd = join(dir, label);
      const env = await localPod(cwd);
      const file = join(cwd, "xds.yaml");
      procs.push(await spawnUntil([bin, "proxy", "sidecar"], env, cwd, /local xDS: serving/, 60_000));
      const { client, call } = await holdAds(join(cwd, "etc/istio/proxy/XDS"));
      clients.push(client);
      // The next CDS push on the held stream (the first four answers were taken by holdAds).
      const waiting: (() => void)[] = [];
      call.on("data", (b: Buffer) => {
        if (b.includes(Buffer.from(CDS))) waiting.shift()?.();
      });
      pods.push({ label, file, next: () => new Promise((r) => waiting.push(r)), ms: [] });
    }
    const loadBefore = loadavg();
    for (let i = 0; i < RUNS; i++) {
      for (const pod of pods) {
        const tmp = `${pod.file}.tmp`;
        writeFileSync(tmp, edited(i + 2));
        const pushed = pod.next();
        const t0 = performance.now();
        renameSync(tmp, pod.file);
        await pushed;
        pod.ms.push(performance.now() - t0);
        await Bun.sleep(200); // past the debounce and any late event before the next edit
      }
    }
    return [
      ...started,
      "## Local mode: file replaced -> CDS push at an ADS client (bench/local-reload.ts)",
      "",
      `${RUNS} edits per build, the builds taking turns; rename -> push received (inotify, 50 ms debounce, read, conversion, relay). Load average: ${loadBefore} at the start, ${loadavg()} at the end.`,
      "",
      "| build | median ms | p90 ms | max ms |",
      "|---|---|---|---|",
      ...pods.map((p) => row(p.label, p.ms)),
      "",
    ].join("\n");
  } finally {
    await stopAll(clients, procs, dir);
  }
}

if (import.meta.main) console.log(await run());
