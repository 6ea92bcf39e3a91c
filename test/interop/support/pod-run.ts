// One agent (ours or Istio's pilot-agent) run as a sidecar pod would run it, for scenarios that
// drive the agent past start: a fresh directory with the token and root certificate istiod-lite
// accepts, Istio's bootstrap template, the interop Envoy stand-in as Envoy, the same env and
// ports for either agent. The caller signals it, reads its log and the stand-in's records, and
// always calls stop(), which kills whatever is left.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../e2e/pod.ts";
import { istioBootstrapTemplate } from "./agent-run.ts";
import { readStandinRecords, writeStandinLauncher, type StandinRecord } from "./envoy-standin.ts";
import { LITE_TOKEN, type IstiodLite } from "./istiod-lite.ts";

export interface PodPorts {
  status: number;
  admin: number;
}

export async function podPorts(): Promise<PodPorts> {
  return { status: await freePort(), admin: await freePort() };
}

export interface PodOptions {
  bin: string;
  lite: IstiodLite;
  ports: PodPorts;
  /** More environment (after the defaults). */
  env?: Record<string, string>;
  /** More ProxyConfig fields (after the defaults: 1s drain and termination drain). */
  proxyConfig?: Record<string, unknown>;
  /** A command the agent is started through, e.g. `unshare -m sh -c '…; exec "$@"' sh`. */
  prefix?: string[];
}

export interface PodRun {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  dir: string;
  /** Everything the agent wrote on stdout and stderr so far. */
  log(): string;
  records(): StandinRecord[];
  /** The stand-in Envoy's pid once it has started. */
  envoyPid(): number | undefined;
  get(path: string, method?: string): Promise<Response>;
  stop(): Promise<void>;
}

export async function startPodAgent(o: PodOptions): Promise<PodRun> {
  const dir = mkdtempSync(join(tmpdir(), "agent-pod-"));
  const files: Record<string, string> = { "var/run/secrets/tokens/istio-token": LITE_TOKEN, "var/run/secrets/istio/root-cert.pem": o.lite.rootPem };
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(dir, rel, ".."), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  mkdirSync(join(dir, "var/lib/istio/envoy"), { recursive: true });
  writeFileSync(join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), await Bun.file(istioBootstrapTemplate()).text());
  const recordFile = join(dir, "standin.jsonl");
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    POD_NAME: "pod-0",
    POD_NAMESPACE: "fake-namespace",
    SERVICE_ACCOUNT: "fake-sa",
    INSTANCE_IP: "127.0.0.1",
    CLOUD_PLATFORM: "none",
    CA_ADDR: o.lite.caAddress,
    INTEROP_ENVOY_READY: "1",
    INTEROP_ENVOY_RECORD: recordFile,
    PROXY_CONFIG: JSON.stringify({
      discoveryAddress: o.lite.xdsAddress,
      binaryPath: writeStandinLauncher(dir),
      statusPort: o.ports.status,
      proxyAdminPort: o.ports.admin,
      drainDuration: "1s",
      terminationDrainDuration: "1s",
      ...o.proxyConfig,
    }),
    ...o.env,
  };
  const proc = Bun.spawn([...(o.prefix ?? []), o.bin, "proxy", "sidecar"], { cwd: dir, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let text = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const c of s) text += dec.decode(c, { stream: true });
  };
  const pumped = Promise.all([pump(proc.stdout), pump(proc.stderr)]);
  const records = () => readStandinRecords(recordFile);
  const envoyPid = () => records().find((r) => r.event === "start")?.pid;
  return {
    proc,
    dir,
    log: () => text,
    records,
    envoyPid,
    get: (path, method = "GET") => fetch(`http://127.0.0.1:${o.ports.status}${path}`, { method, signal: AbortSignal.timeout(3000) }),
    async stop() {
      proc.kill("SIGKILL");
      await proc.exited;
      for (const r of records())
        if (r.event === "start")
          try {
            process.kill(r.pid, "SIGKILL");
          } catch {}
      await Promise.race([pumped, Bun.sleep(1000)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Poll `check` every 100 ms until it is true or `ms` pass; returns whether it became true. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await check()) return true;
    } catch {}
    if (Date.now() > deadline) return false;
    await Bun.sleep(100);
  }
}

/** True while a process with this pid exists (a zombie counts as gone). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}
