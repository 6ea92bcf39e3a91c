// A/B of idle memory with istiod's CA (issue #16): compiled agents in bench/idle.ts's proxyless
// shape (DISABLE_ENVOY, the bench's synthetic istiod), each once with the local CA (idle.ts's
// proxyless mode) and once signing through istiod's CA (a grpc-js fake CA over TLS in this
// process), all alive at once so the machine's load falls on every column alike. Memory is the
// median of WINDOWS readings from STEADY_MS after start.
//   IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent" bun bench/idle-ca.ts
// Not part of `bun run bench` (a comparison of builds, like xds-ab.ts).

import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/support/fake-envoy.ts";
import { FakeCa } from "../test/support/fake-ca.ts";
import { memKiB } from "./idle.ts";
import { firstLine, fmt, spawnUntil, type Proc } from "./support.ts";

const ROOT = resolve(import.meta.dir, "..");
const STEADY_MS = Number(process.env.IDLE_STEADY_MS ?? 45_000);
const WINDOW_MS = Number(process.env.IDLE_WINDOW_MS ?? 10_000);
const WINDOWS = 3;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

function agents(): [string, string][] {
  const spec = process.env.IDLE_AGENTS ?? `current=${join(ROOT, "dist/agent")}`;
  return spec.split(",").map((p) => {
    const i = p.indexOf("=");
    return [p.slice(0, i), resolve(p.slice(i + 1))] as [string, string];
  });
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agent-idle-ca-"));
  const procs: Proc[] = [];
  const ca = await FakeCa.start();
  try {
    writeFileSync(join(dir, "ca-root.pem"), ca.tls!.rootPem);
    const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
    procs.push(istiod);
    const istiodPort = Number((await firstLine(istiod.stdout as ReadableStream<Uint8Array>)).trim());
    const runs: { label: string; mode: string; pid: number }[] = [];
    const t0 = performance.now();
    for (const [label, bin] of agents()) {
      for (const mode of ["local CA", "istiod's CA"]) {
        const cwd = join(dir, `${label}-${mode === "local CA" ? "local" : "istiod"}`);
        mkdirSync(join(cwd, "var/run/secrets/istio"), { recursive: true });
        copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(cwd, "var/run/secrets/istio/root-cert.pem"));
        const env: Record<string, string> = {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          HOME: cwd,
          POD_NAME: "idle-0",
          POD_NAMESPACE: "bench",
          INSTANCE_IP: "127.0.0.1",
          CLOUD_PLATFORM: "none",
          DISABLE_ENVOY: "true",
          PROXY_CONFIG: JSON.stringify({
            terminationDrainDuration: "1s",
            statusPort: await freePort(),
            proxyAdminPort: await freePort(),
            discoveryAddress: `127.0.0.1:${istiodPort}`,
            controlPlaneAuthPolicy: "NONE",
          }),
          ...(mode === "local CA" ? { CA_PROVIDER: "local" } : { CA_ADDR: ca.address, CA_ROOT_CA: join(dir, "ca-root.pem") }),
        };
        const p = await spawnUntil([bin, "proxy", "sidecar"], env, cwd, /certificates warmed/, 60_000);
        procs.push(p);
        runs.push({ label, mode, pid: p.pid });
      }
    }
    const signed = ca.requests.length;
    await Bun.sleep(Math.max(0, STEADY_MS - (performance.now() - t0)));
    const load = loadavg();
    const readings = runs.map(() => ({ rss: [] as number[], anon: [] as number[], file: [] as number[] }));
    for (let w = 0; w < WINDOWS; w++) {
      await Bun.sleep(WINDOW_MS);
      runs.forEach((r, i) => {
        const m = memKiB(r.pid);
        readings[i]!.rss.push(m.rss / 1024);
        readings[i]!.anon.push(m.anon / 1024);
        readings[i]!.file.push(m.file / 1024);
      });
    }
    return [
      "## Idle memory with istiod's CA (bench/idle-ca.ts)",
      "",
      `Proxyless agents (bench/idle.ts's shape), each build with the local CA and with istiod's CA (a grpc-js fake CA over TLS; ${signed} CSRs signed), all alive at once; ` +
        `memory the median of ${WINDOWS} readings ${WINDOW_MS / 1000} s apart from ${STEADY_MS / 1000} s after the first start. Load average: ${load} at the start, ${loadavg()} at the end.`,
      "",
      "| build | certificates | RSS MiB | anon RSS MiB (target ≤ 12) | file RSS MiB |",
      "|---|---|---|---|---|",
      ...runs.map(
        (r, i) => `| ${r.label} | ${r.mode} | ${fmt(median(readings[i]!.rss))} | ${fmt(median(readings[i]!.anon))} | ${fmt(median(readings[i]!.file))} |`,
      ),
      "",
    ].join("\n");
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    await ca.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
