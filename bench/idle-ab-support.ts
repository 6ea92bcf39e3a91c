// What the side-by-side benches of builds (idle-ca.ts, idle-local.ts, idle-status.ts,
// cert-start-ab.ts) share: the builds to compare (IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent"),
// a proxyless pod's directory and environment, the synthetic istiod and fake CA a pod with istiod's
// certificates runs against, and the steady-state memory readings (the median of WINDOWS readings
// WINDOW_MS apart, from STEADY_MS after the first start). Not a bench itself (bench/run.ts skips
// names with "-").

import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { FakeCa } from "../test/support/fake-ca.ts";
import { freePort } from "../test/support/fake-envoy.ts";
import { memKiB } from "./procstat.ts";
import { firstLine, type Proc } from "./support.ts";

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

/** A run against istiod: bench/idle.ts's synthetic istiod (a child) and a grpc-js fake CA over TLS in this process. */
export interface IstiodCa {
  /** A scratch directory, removed after the run. */
  dir: string;
  ca: FakeCa;
  istiodPort: number;
  /** Processes killed (SIGKILL) after the run; the istiod is one. */
  procs: Proc[];
  /** A proxyless pod at `cwd` (idlePod) with istiod as its discovery server and CA; `proxyConfig` is merged into its ProxyConfig. */
  pod(cwd: string, proxyConfig?: Record<string, unknown>): Promise<Record<string, string>>;
}

/** Runs `fn` with a synthetic istiod and a fake CA, in a scratch directory named `prefix`…; everything is stopped and removed after. */
export async function withIstiodCa<T>(prefix: string, fn: (b: IstiodCa) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const procs: Proc[] = [];
  const ca = await FakeCa.start();
  try {
    const root = join(dir, "ca-root.pem");
    writeFileSync(root, ca.tls!.rootPem);
    const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
    procs.push(istiod);
    const istiodPort = Number((await firstLine(istiod.stdout as ReadableStream<Uint8Array>)).trim());
    const pod = async (cwd: string, proxyConfig: Record<string, unknown> = {}) => ({
      ...idlePod(cwd),
      PROXY_CONFIG: JSON.stringify({
        terminationDrainDuration: "1s",
        statusPort: await freePort(),
        proxyAdminPort: await freePort(),
        discoveryAddress: `127.0.0.1:${istiodPort}`,
        controlPlaneAuthPolicy: "NONE",
        ...proxyConfig,
      }),
      CA_ADDR: ca.address,
      CA_ROOT_CA: root,
    });
    return await fn({ dir, ca, istiodPort, procs, pod });
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    await ca.close();
    rmSync(dir, { recursive: true, force: true });
  }
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
