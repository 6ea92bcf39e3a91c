// `agent doctor`'s checks in order, over the configuration `agent proxy` would load with the same
// flags and environment (on a VM: the environment istio-start.sh would give it). Later checks that
// need the configuration are skipped, saying so, when it does not load.

import { resolve } from "node:path";
import type { AgentConfig, ProxyFlags } from "../config/agentconfig.ts";
import type { EnvMap } from "../config/envdecl.ts";
import { secretManagerOptionsFrom, type SecretManagerOptions } from "../sds/options.ts";
import { splitHostPort, usesTls, xdsServerName, ISTIO_TOKEN_PATH } from "../xds/upstream-config.ts";
import type { CaptureHost } from "../iptables/config.ts";
import type { Exec } from "../iptables/deps.ts";
import { errorMessage } from "../lib/errors.ts";
import type { Loaded } from "../config/load.ts";
import { checkCapture } from "./capture.ts";
import { parseEnvFile, type EnvFile } from "./envfile.ts";
import { checkClusterEnv, checkEnvoyBinary, checkRoot, checkToken, rootsInUse, type DoctorFiles } from "./files.ts";
import { fail, skip, warn, type Finding } from "./finding.ts";
import { checkEndpoint, checkHosts, SYSTEM_ROOTS, type Endpoint } from "./network.ts";
import { checkPorts, portsInUse } from "./ports.ts";
import { clusterEnvPath, sidecarEnvPath, vmEnvironment, type VmHost } from "./vmenv.ts";

export interface DoctorOptions {
  type: string;
  flags: ProxyFlags;
  /** Check as a VM even without a cluster.env (which then fails). */
  vm: boolean;
  /** cluster.env path (default ISTIO_CLUSTER_CONFIG or /var/lib/istio/envoy/cluster.env). */
  clusterEnv: string;
  /** Bound of each network step. */
  timeoutMs: number;
  hostsPath: string;
}

export interface DoctorDeps {
  env: EnvMap;
  cwd: string;
  files: DoctorFiles;
  exec: Exec;
  nowMs: number;
  vmHost: () => VmHost;
  captureHost: CaptureHost;
  /** loadAgentConfig under `cwd` (throws with the message on a bad configuration). */
  load(type: string, flags: ProxyFlags, env: EnvMap): Loaded;
}

function readEnvFile(files: DoctorFiles, path: string): { file?: EnvFile; error?: string } {
  try {
    const b = files.read(path);
    return b === undefined ? {} : { file: parseEnvFile(b.toString("utf8")) };
  } catch (e) {
    return { error: errorMessage(e) };
  }
}

export async function runDoctor(o: DoctorOptions, d: DoctorDeps): Promise<Finding[]> {
  const findings: Finding[] = [];
  const clusterPath = o.clusterEnv || clusterEnvPath(d.env);
  const cluster = readEnvFile(d.files, clusterPath);
  const vm = o.vm || cluster.file !== undefined || cluster.error !== undefined || !!d.env.ISTIO_CLUSTER_CONFIG;
  let env = d.env;
  let flags = o.flags;
  if (vm) {
    findings.push(...checkClusterEnv(clusterPath, cluster.file, cluster.error));
    const sidecar = readEnvFile(d.files, sidecarEnvPath(d.env));
    const v = vmEnvironment(d.env, sidecar.file?.values ?? {}, cluster.file?.values ?? {}, d.vmHost());
    env = v.env;
    flags = { ...flags, serviceCluster: v.serviceCluster };
  } else {
    findings.push(skip("cluster-env", `no ${clusterPath}: checking as a pod (--vm checks as a VM)`));
  }

  let loaded: Loaded;
  try {
    loaded = d.load(o.type, flags, env);
  } catch (e) {
    findings.push(fail("config", errorMessage(e), "fix the file or variable named"));
    findings.push(skip("others", "the checks below need the configuration"));
    return findings;
  }
  for (const w of loaded.warnings) findings.push(warn("config", w));
  if (!loaded.warnings.length) findings.push({ check: "config", status: "ok", detail: `loaded (mesh config ${flags.meshConfig}, proxy type ${o.type})` });
  const cfg = loaded.config;

  let sds: SecretManagerOptions | undefined;
  try {
    sds = secretManagerOptionsFrom(cfg);
  } catch (e) {
    findings.push(fail("ca-config", errorMessage(e)));
  }
  const { roots, problems } = rootsInUse(cfg, sds, d.files);
  findings.push(...problems, ...roots.map((r) => checkRoot(r, d.files, d.nowMs)));
  if (!roots.length && !problems.length) findings.push(skip("root-cert", "no root file in use (plaintext, local mode or the system's roots)"));

  if (sds?.signer.kind === "istiod") findings.push(...checkToken(resolve(cfg.root, ISTIO_TOKEN_PATH), d.files, d.nowMs));
  else findings.push(skip("token", `no istiod CA (${sds?.signer.kind ?? "CA configuration invalid"}): no token needed`));

  const hostsText = readText(d.files, o.hostsPath);
  for (const ep of endpoints(cfg, sds, d.files)) {
    const r = await checkEndpoint(ep, o.timeoutMs);
    findings.push(...r.findings, checkHosts(o.hostsPath, hostsText, ep, r.resolved));
  }

  findings.push(await checkCapture(d.exec, env, d.captureHost, vm, cfg.proxyConfig.interceptionMode ?? "REDIRECT"));
  findings.push(checkEnvoyBinary(cfg, d.files));
  findings.push(...(await checkPorts(portsInUse(cfg))));
  return findings;
}

function readText(files: DoctorFiles, path: string): string | undefined {
  try {
    return files.read(path)?.toString("utf8");
  } catch {
    return undefined;
  }
}

/** istiod (unless local mode) and the CA (when it is istiod's and at another address). */
function endpoints(cfg: AgentConfig, sds: SecretManagerOptions | undefined, files: DoctorFiles): Endpoint[] {
  const out: Endpoint[] = [];
  const rootOf = (p: string | undefined) => (p && p !== "SYSTEM" ? readBuffer(files, resolve(cfg.root, p)) : undefined);
  const da = cfg.proxyConfig.discoveryAddress;
  if (!cfg.env.LOCAL_XDS_PATH && da) {
    const origin = `discoveryAddress (${cfg.proxyConfigSources.discoveryAddress ?? "default"})`;
    let tls: Endpoint["tls"];
    if (usesTls(cfg.proxyConfig.controlPlaneAuthPolicy)) {
      const roots = rootsInUse(cfg, undefined, files).roots;
      let host = da;
      try {
        host = splitHostPort(da).host;
      } catch {
        /* reported by the resolve step */
      }
      const rootPath = roots[0]?.path ?? SYSTEM_ROOTS;
      tls = { rootPath, servername: xdsServerName(host, cfg.env.ISTIOD_SAN), sanSetting: "ISTIOD_SAN", ...(roots[0] ? { root: rootOf(roots[0].path) } : {}) };
    }
    out.push({ label: "istiod", address: da, origin, ...(tls ? { tls } : {}) });
  }
  if (sds?.signer.kind === "istiod") {
    const ca = sds.signer.ca;
    if (!out.some((e) => e.address === ca.address)) {
      const rootPath = ca.rootCertPath && ca.rootCertPath !== "SYSTEM" ? ca.rootCertPath : SYSTEM_ROOTS;
      const tls: Endpoint["tls"] = ca.tls
        ? {
            rootPath,
            servername: ca.serverName ?? "",
            sanSetting: cfg.env.CA_ADDR ? "CA_ADDR's host" : "ISTIOD_SAN",
            ...(rootOf(ca.rootCertPath) ? { root: rootOf(ca.rootCertPath) } : {}),
          }
        : undefined;
      out.push({ label: "ca", address: ca.address, origin: cfg.env.CA_ADDR ? "CA_ADDR" : "discoveryAddress", ...(tls ? { tls } : {}) });
    }
  }
  return out;
}

function readBuffer(files: DoctorFiles, path: string): Buffer | undefined {
  try {
    return files.read(path);
  } catch {
    return undefined;
  }
}
