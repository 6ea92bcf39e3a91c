// What the side-by-side idle-memory benches (idle-ca.ts, idle-local.ts) share: the builds to
// compare (IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent"), a proxyless pod's directory and
// environment, and the steady-state memory readings (the median of WINDOWS readings WINDOW_MS
// apart, from STEADY_MS after the first start). Not a bench itself (bench/run.ts skips names with "-").

import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { memKiB } from "./procstat.ts";

const ROOT = resolve(import.meta.dir, "..");
export const STEADY_MS = Number(process.env.IDLE_STEADY_MS ?? 45_000);
export const WINDOW_MS = Number(process.env.IDLE_WINDOW_MS ?? 10_000);
export const WINDOWS = 3;

export const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** The builds to compare, `label=path` pairs (default: this checkout's dist/agent). */
export function agents(): [string, string][] {
  const spec = process.env.IDLE_AGENTS ?? `current=${join(ROOT, "dist/agent")}`;
  return spec.split(",").map((p) => {
    const i = p.indexOf("=");
    return [p.slice(0, i), resolve(p.slice(i + 1))] as [string, string];
  });
}

/** A pod's root at `cwd` (the system roots as istiod's root certificate) and the environment every build runs with (no Envoy, no cloud). */
export function idlePod(cwd: string): Record<string, string> {
  mkdirSync(join(cwd, "var/run/secrets/istio"), { recursive: true });
  copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(cwd, "var/run/secrets/istio/root-cert.pem"));
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: cwd,
    POD_NAME: "idle-0",
    POD_NAMESPACE: "bench",
    INSTANCE_IP: "127.0.0.1",
    CLOUD_PLATFORM: "none",
    DISABLE_ENVOY: "true",
  };
}

/** USS: the pages only this process holds (Private_Clean + Private_Dirty of /proc/PID/smaps_rollup), in KiB. */
export function ussKiB(pid: number): number {
  const s = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? NaN);
  return kib("Private_Clean") + kib("Private_Dirty");
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Waits until STEADY_MS after `t0`, then reads each pid's memory WINDOWS times: the medians in MiB, and the load average at the start. */
export async function steadyMemory(pids: number[], t0: number): Promise<{ load: string; mib: { rss: number; anon: number; file: number; uss: number }[] }> {
  await Bun.sleep(Math.max(0, STEADY_MS - (performance.now() - t0)));
  const load = loadavg();
  const readings = pids.map(() => ({ rss: [] as number[], anon: [] as number[], file: [] as number[], uss: [] as number[] }));
  for (let w = 0; w < WINDOWS; w++) {
    await Bun.sleep(WINDOW_MS);
    pids.forEach((pid, i) => {
      const m = memKiB(pid);
      readings[i]!.rss.push(m.rss / 1024);
      readings[i]!.anon.push(m.anon / 1024);
      readings[i]!.file.push(m.file / 1024);
      readings[i]!.uss.push(ussKiB(pid) / 1024);
    });
  }
  return { load, mib: readings.map((r) => ({ rss: median(r.rss), anon: median(r.anon), file: median(r.file), uss: median(r.uss) })) };
}
