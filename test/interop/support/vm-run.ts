// One VM start for the VM start suite: a fresh sandbox (vm-sandbox.ts) with `agent` installed as
// /usr/local/bin/pilot-agent, istiod-lite in the sandbox's cluster namespace at the address the
// VM's hosts file gives istiod (the CA on the same port, as istiod), then Istio's istio-start.sh as istio.service runs
// it: until Envoy (the interop stand-in, an xDS client) has started and readiness answers 200.
// Then what a VM operator would see is read (iptables-save, /etc/certs, what istiod received),
// SIGTERM goes to the service's main process (systemd's KillMode=mixed), and ExecStopPost's
// `istio-start.sh clean` runs.

import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ISTIOD_LITE } from "./go-build.ts";
import { LITE_TOKEN, type LiteRecord } from "./istiod-lite.ts";
import { readStandinRecords, type StandinRecord } from "./envoy-standin.ts";
import { createSandbox, installVm, ISTIOD_IP, SYSTEMD_PATH, type Sandbox } from "./vm-sandbox.ts";

const STANDIN = resolve(import.meta.dir, "envoy-standin.ts");
/** GET /healthz/ready with Bun's fetch (curl is not among the packages CI installs): prints the status, 0 on no answer. */
const PROBE =
  "const r = await fetch('http://127.0.0.1:15020/healthz/ready', { signal: AbortSignal.timeout(2000) }).catch(() => undefined); console.log(r ? r.status : 0);";

export interface VmRun {
  label: string;
  /** istio-start.sh's own output (the two istio-iptables runs), and the agent's log files. */
  startOutput: string;
  agentLog: string;
  /** The user the agent ran as, and the executable of the service's main process. */
  agentUser?: string;
  envoyStart?: StandinRecord;
  envoySignals: string[];
  /** Readiness codes seen while starting (each change once), the last one last. */
  readiness: number[];
  /** iptables-save (nft and legacy backends) once ready, comment and counter lines dropped. */
  rules: { nft: string; legacy: string };
  /** After ExecStopPost's `istio-start.sh clean`. */
  rulesAfterClean: { nft: string; legacy: string };
  records: LiteRecord[];
  /** /etc/certs after start: name -> "owner mode", and the PEM texts. */
  certFiles: Record<string, string>;
  certChain?: string;
  rootCert?: string;
  /** openssl verify of cert-chain.pem against /etc/certs/root-cert.pem. */
  verify: string;
  exitCode: number | null;
  /** Whether Envoy's process was gone when the agent had exited. */
  envoyGoneAfterExit: boolean;
}

export interface VmRunOptions {
  label: string;
  agent: string;
  vmFiles: string;
  packaging: string;
  /** A folder holding istiod-lite's root-cert.pem and root-key.pem (the root both runs share). */
  rootState: string;
  /** Istio and Kubernetes YAML istiod-lite serves. */
  config: string;
  timeoutMs?: number;
}

function saveRules(sb: Sandbox, cmd: string): string {
  const r = sb.exec([cmd]);
  if (r.code !== 0) return `${cmd} failed (${r.code}): ${r.err.trim()}`;
  return r.out
    .split("\n")
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => l.replace(/ \[\d+:\d+\]$/, ""))
    .join("\n");
}

/** Drains a child's output into `sink` (so it never blocks on a full pipe). */
function drain(stream: ReadableStream<Uint8Array>, sink: { text: string }): Promise<void> {
  return (async () => {
    const d = new TextDecoder();
    for await (const c of stream) sink.text += d.decode(c, { stream: true });
  })();
}

/** Waits for istiod-lite's ready line (the JSON one among its log lines). */
async function liteReady(out: { text: string }, proc: ReturnType<typeof Bun.spawn>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && proc.exitCode === null) {
    if (out.text.split("\n").some((l) => l.startsWith("{") && l.includes("xdsPort"))) return true;
    await Bun.sleep(50);
  }
  return false;
}

/** Whether `pid` is gone (or a zombie) within `ms`. */
async function gone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      return true;
    }
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return true;
    if (Date.now() > deadline) return false;
    await Bun.sleep(50);
  }
}

export async function runVm(o: VmRunOptions): Promise<VmRun> {
  const sb = await createSandbox(o.label);
  const procs: ReturnType<typeof Bun.spawn>[] = [];
  try {
    const record = join(sb.dir, "record", "envoy.jsonl");
    const envoy = `#!/bin/sh\n# Envoy stand-in (test/interop/support/envoy-standin.ts)\nINTEROP_ENVOY_RECORD=${record} INTEROP_ENVOY_XDS=sotw exec ${process.execPath} ${STANDIN} "$@"\n`;
    installVm(sb, { agent: o.agent, vmFiles: o.vmFiles, packaging: o.packaging, envoy });

    // istiod-lite in the cluster's network namespace, at istiod's address from the hosts file.
    const state = join(sb.dir, "istiod-state");
    const config = join(sb.dir, "istiod-config");
    mkdirSync(state);
    mkdirSync(config);
    for (const f of ["root-cert.pem", "root-key.pem"]) copyFileSync(join(o.rootState, f), join(state, f));
    writeFileSync(join(config, "config.yaml"), o.config);
    const lite = sb.spawnInCluster(
      [ISTIOD_LITE, "--state", state, "--config", config, "--token", LITE_TOKEN, "--listen-host", ISTIOD_IP, "--xds-port", "15012", "--ca-on-xds"],
      { PATH: SYSTEMD_PATH },
    );
    procs.push(lite);
    const liteOut = { text: "" };
    void drain(lite.stdout as ReadableStream<Uint8Array>, liteOut);
    void drain(lite.stderr as ReadableStream<Uint8Array>, liteOut);
    if (!(await liteReady(liteOut, lite, 90_000))) throw new Error(`istiod-lite did not start in the VM sandbox:\n${liteOut.text.slice(-3000)}`);

    // istio.service: ExecStart=/usr/local/bin/istio-start.sh, working directory /, systemd's environment.
    const start = sb.spawn(["/usr/local/bin/istio-start.sh"], { PATH: SYSTEMD_PATH, LANG: "C.UTF-8" });
    procs.push(start);
    const startOut = { text: "" };
    const pumped = Promise.all([drain(start.stdout as ReadableStream<Uint8Array>, startOut), drain(start.stderr as ReadableStream<Uint8Array>, startOut)]);

    const deadline = Date.now() + (o.timeoutMs ?? 60_000);
    const readiness: number[] = [];
    const probe = (): number => {
      // 127.0.0.1: the status port as the VM's health checker reaches it (a local address other
      // than loopback's would be captured to Envoy's outbound port by ISTIO_SERVICE_CIDR='*').
      const r = sb.exec([process.execPath, "-e", PROBE]);
      return Number(r.out.trim()) || 0;
    };
    let envoyStart: StandinRecord | undefined;
    while (Date.now() < deadline && start.exitCode === null) {
      envoyStart ??= readStandinRecords(record).find((r) => r.event === "start");
      const code = probe();
      if (code && readiness[readiness.length - 1] !== code) readiness.push(code);
      if (code === 200 && envoyStart) break;
      await Bun.sleep(200);
    }
    const agentUser = sb.exec(["ps", "-o", "user=", "-p", String(start.pid)]).out.trim() || undefined;
    const rules = { nft: saveRules(sb, "iptables-nft-save"), legacy: saveRules(sb, "iptables-legacy-save") };
    const certFiles: Record<string, string> = {};
    for (const line of sb.exec(["bash", "-c", "cd /etc/certs && stat -c '%n %U %a' *"]).out.split("\n").filter(Boolean)) {
      const [name, ...rest] = line.split(" ");
      certFiles[name!] = rest.join(" ");
    }
    const certChain = sb.read("/etc/certs/cert-chain.pem");
    const rootCert = sb.read("/etc/certs/root-cert.pem");
    const v = sb.exec(["openssl", "verify", "-CAfile", "/etc/certs/root-cert.pem", "/etc/certs/cert-chain.pem"]);
    const verify = (v.out + v.err).trim();

    // systemctl stop: SIGTERM to the main process (the agent: istio-start.sh exec'd into it).
    start.kill("SIGTERM");
    const exited = await Promise.race([start.exited.then(() => true), Bun.sleep(30_000).then(() => false)]);
    const exitCode = exited ? start.exitCode : null;
    await Promise.race([pumped, Bun.sleep(1000)]);
    const envoyRecords = readStandinRecords(record);
    const envoyPid = envoyRecords.find((r) => r.event === "start")?.pid;
    const envoyGoneAfterExit = envoyPid === undefined || (await gone(envoyPid, 3000));
    if (!envoyGoneAfterExit) process.kill(envoyPid!, "SIGKILL");
    // ExecStopPost=/usr/local/bin/istio-start.sh clean
    const clean = sb.exec(["/usr/local/bin/istio-start.sh", "clean"], { PATH: SYSTEMD_PATH, LANG: "C.UTF-8" });
    const startOutput = startOut.text + clean.out + clean.err;
    const rulesAfterClean = { nft: saveRules(sb, "iptables-nft-save"), legacy: saveRules(sb, "iptables-legacy-save") };
    const records = readFileSync(join(state, "requests.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as LiteRecord);
    const agentLog = (sb.read("/var/log/istio/istio.log") ?? "") + (sb.read("/var/log/istio/istio.err.log") ?? "");
    return {
      label: o.label,
      startOutput,
      agentLog,
      agentUser,
      envoyStart,
      envoySignals: envoyRecords.filter((r) => r.event === "signal").map((r) => r.message ?? ""),
      readiness,
      rules,
      rulesAfterClean,
      records,
      certFiles,
      certChain,
      rootCert,
      verify,
      exitCode,
      envoyGoneAfterExit,
    };
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
    await Promise.all(procs.map((p) => Promise.race([p.exited, Bun.sleep(2000)])));
    await sb.destroy();
  }
}
