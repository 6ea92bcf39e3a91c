// The environment Istio's VM start script (tools/packaging/common/istio-start.sh) gives
// pilot-agent, so `agent doctor` on a VM checks what `agent proxy` will see when the service starts
// it: the inherited environment, then sidecar.env and cluster.env (sourced, so they win), then the
// script's defaults for what is still unset.

import type { EnvMap } from "../config/envdecl.ts";

/** Where istio-start.sh reads its two files (ISTIO_SIDECAR_CONFIG / ISTIO_CLUSTER_CONFIG override them). */
export const CLUSTER_ENV_PATH = "/var/lib/istio/envoy/cluster.env";
export const SIDECAR_ENV_PATH = "/var/lib/istio/envoy/sidecar.env";

export const clusterEnvPath = (env: EnvMap): string => env.ISTIO_CLUSTER_CONFIG || CLUSTER_ENV_PATH;
export const sidecarEnvPath = (env: EnvMap): string => env.ISTIO_SIDECAR_CONFIG || SIDECAR_ENV_PATH;

export interface VmHost {
  /** `hostname -s`. */
  shortHostname: string;
  /** `hostname --all-ip-addresses | cut -d ' ' -f 1`. */
  firstIp: string;
}

export interface VmEnvironment {
  env: EnvMap;
  /** `--serviceCluster` the script passes (ISTIO_SERVICE, default rawvm). */
  serviceCluster: string;
}

/** istio-start.sh's environment for `pilot-agent proxy`. */
export function vmEnvironment(inherited: EnvMap, sidecarEnv: Record<string, string>, clusterEnv: Record<string, string>, host: VmHost): VmEnvironment {
  const e: Record<string, string | undefined> = { ...inherited, ...sidecarEnv, ...clusterEnv };
  const orDefault = (v: string | undefined, d: string) => (v === undefined || v === "" ? d : v);
  const ns = orDefault(e.ISTIO_NAMESPACE, "default");
  const svc = orDefault(e.ISTIO_SERVICE, "rawvm");
  const systemNs = orDefault(e.ISTIO_SYSTEM_NAMESPACE, "istio-system");
  const pilotPort = orDefault(e.ISTIO_PILOT_PORT, "15012");
  const authPolicy = orDefault(e.ISTIO_CP_AUTH, "MUTUAL_TLS");
  const pilot = orDefault(e.PILOT_ADDRESS, `istiod.${systemNs}.svc:${pilotPort}`);
  const out: Record<string, string | undefined> = {
    ...e,
    CA_ADDR: orDefault(e.CA_ADDR, pilot),
    // `${PROV_CERT-/etc/certs}`: only an unset variable takes the default; an empty one stays empty.
    PROV_CERT: e.PROV_CERT ?? "/etc/certs",
    OUTPUT_CERTS: e.OUTPUT_CERTS ?? "/etc/certs",
    PROXY_CONFIG: orDefault(e.PROXY_CONFIG, `\nserviceCluster: ${svc}\ncontrolPlaneAuthPolicy: ${authPolicy}\ndiscoveryAddress: ${pilot}\n`),
    INSTANCE_IP: orDefault(e.ISTIO_SVC_IP, host.firstIp),
    POD_NAME: orDefault(e.POD_NAME, host.shortHostname),
    POD_NAMESPACE: ns,
  };
  return { env: out, serviceCluster: svc };
}
