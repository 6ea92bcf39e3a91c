// `agent doctor [sidecar|router|...]`: checks what an operator gets wrong before `agent proxy`
// starts (VM onboarding or a pod), one line per finding with the file or variable and the fix.
// Takes `agent proxy`'s flags, so it reads the same configuration. Exit code: 0 nothing failed,
// 1 a check failed, 255 a bad command line.

import { accessSync, constants, statSync } from "node:fs";
import { hostname } from "node:os";
import { parseFlags, FlagError, type FlagSpec } from "../lib/flags.ts";
import { CliError, type CliIO } from "./io.ts";
import { PROXY_FLAGS } from "./proxyflags.ts";
import { loadConfigUnder, realHost } from "./loadconfig.ts";
import { upInterfaceTable } from "../config/hostaddrs.ts";
import type { ProxyFlags } from "../config/agentconfig.ts";
import { buildInfo } from "../version.ts";
import { FILE_LIMITS, readBoundedFileSync } from "../lib/boundedfile.ts";
import { spawnExec } from "../iptables/deps.ts";
import { systemHost } from "../iptables/host.ts";
import { runDoctor } from "../doctor/run.ts";
import { exitCodeOf, formatReport } from "../doctor/finding.ts";
import type { DoctorFiles } from "../doctor/files.ts";

export const DOCTOR_FLAGS: FlagSpec[] = [
  { name: "vm", type: "bool", default: false, usage: "check as a VM (cluster.env, istio-start.sh's environment) even when no cluster.env is found" },
  { name: "clusterEnv", type: "string", default: "", usage: "cluster.env to read (default: $ISTIO_CLUSTER_CONFIG or /var/lib/istio/envoy/cluster.env)" },
  { name: "timeoutMillis", type: "int", default: 3000, usage: "bound of each network step (resolve, connect, TLS handshake), 1..60000" },
  { name: "hostsFile", type: "string", default: "/etc/hosts", usage: "hosts file to look for the istiod and CA names in" },
];

const files: DoctorFiles = {
  read(path) {
    try {
      if (!statSync(path).isFile()) return undefined;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
      throw e;
    }
    return readBoundedFileSync(path, FILE_LIMITS.config);
  },
  executable(path) {
    let st;
    try {
      st = statSync(path);
    } catch {
      return { exists: false, file: false, executable: false };
    }
    let x = true;
    try {
      accessSync(path, constants.X_OK);
    } catch {
      x = false;
    }
    return { exists: true, file: st.isFile(), executable: st.isFile() && x };
  },
};

export async function runDoctorCommand(argv: string[], io: CliIO): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(argv, [...PROXY_FLAGS, ...DOCTOR_FLAGS], { allowUnknown: false });
  } catch (e) {
    if (e instanceof FlagError) throw new CliError(e.message);
    throw e;
  }
  const v = parsed.values;
  const timeoutMs = v.timeoutMillis as number;
  if (!(timeoutMs >= 1 && timeoutMs <= 60_000)) throw new CliError(`--timeoutMillis must be in 1..60000, got ${timeoutMs}`);
  if (parsed.positionals.length > 1) throw new CliError(`doctor: expected at most one proxy type, got ${parsed.positionals.join(" ")}`);
  const version = buildInfo().istioVersion;
  const findings = await runDoctor(
    {
      type: parsed.positionals[0] ?? "sidecar",
      flags: v as unknown as ProxyFlags,
      vm: Boolean(v.vm),
      clusterEnv: v.clusterEnv as string,
      timeoutMs,
      hostsPath: v.hostsFile as string,
    },
    {
      env: io.env,
      cwd: io.cwd,
      files,
      exec: spawnExec,
      nowMs: Date.now(),
      vmHost: () => ({ shortHostname: hostname().split(".")[0]!, firstIp: firstAddress() }),
      captureHost: systemHost(),
      load: (type, flags, env) => loadConfigUnder(io.cwd, type, flags, env, realHost, version),
    },
  );
  io.out(formatReport(findings));
  return exitCodeOf(findings);
}

/** `hostname --all-ip-addresses | cut -d ' ' -f 1`: the first non-loopback address. */
function firstAddress(): string {
  for (const list of Object.values(upInterfaceTable(realHost.addresses()))) {
    for (const a of list ?? []) if (!a.internal) return a.address;
  }
  return "";
}
