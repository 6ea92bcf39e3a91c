// AgentConfig -> the secret manager's narrow options (one place mapping Istio's env vars).

import { join, resolve } from "node:path";
import { existsSync } from "node:fs";
import type { AgentConfig } from "../config/agentconfig.ts";
import { caClientOptions, type CaClientOptions } from "../ca/options.ts";
import { CaError } from "../ca/errors.ts";
import { keyOptionsFromEnv, spiffeId, type KeyOptions } from "../ca/keygen.ts";
import { ISTIO_TOKEN_PATH } from "../ca/token.ts";
import type { WorkloadFiles } from "./cache.ts";
import type { RotationPolicy } from "./rotation.ts";

export const ETC_CERTS_DIR = "./etc/certs";
export const WORKLOAD_CREDENTIALS_DIR = "./var/run/secrets/workload-spiffe-credentials";
export const CA_CRL_PATH = "./var/run/secrets/istio/crl/ca-crl.pem";

export type SignerChoice =
  { kind: "istiod"; ca: CaClientOptions; tokenPath: string; credentialFetcher: string } | { kind: "local"; dir?: string } | { kind: "none"; why: string };

export interface SecretManagerOptions {
  /** Directory relative paths resolve against (the agent's cwd). */
  root: string;
  /** No SDS server (DISABLE_ENVOY): certificates only kept fresh in OUTPUT_CERTS. */
  serveSds: boolean;
  socketFile: string;
  signer: SignerChoice;
  keyOptions: KeyOptions;
  spiffeId: string;
  trustDomain: string;
  ttlSeconds: number;
  rotation: RotationPolicy;
  debounceMs: number;
  workloadFiles: WorkloadFiles;
  outputDir?: string;
  outputMode: number;
  crlPath?: string;
  authorizedUids: string;
  ownUid: number;
  maxStreams: number;
  maxRecvMsgSize: number;
}

function files(dir: string, names: [string, string, string]): WorkloadFiles {
  return { certChainPath: join(dir, names[0]), keyPath: join(dir, names[1]), rootCertPath: join(dir, names[2]) };
}

export function secretManagerOptionsFrom(cfg: AgentConfig): SecretManagerOptions {
  const e = cfg.env;
  const r = (p: string) => resolve(cfg.root, p);
  const creds = r(WORKLOAD_CREDENTIALS_DIR);
  const standard = files(creds, ["cert-chain.pem", "key.pem", "root-cert.pem"]);
  let workloadFiles = files(r(ETC_CERTS_DIR), ["cert-chain.pem", "key.pem", "root-cert.pem"]);
  let signer: SignerChoice;
  if (e.CA_PROVIDER === "GkeWorkloadCertificate") {
    workloadFiles = files(creds, ["certificates.pem", "private_key.pem", "ca_certificates.pem"]);
    signer = { kind: "none", why: "CA_PROVIDER=GkeWorkloadCertificate: certificates from " + creds };
  } else if ([standard.certChainPath, standard.keyPath, standard.rootCertPath].every((p) => existsSync(p))) {
    workloadFiles = standard;
    signer = { kind: "none", why: "workload certificate files mounted in " + creds };
  } else if (e.FILE_MOUNTED_CERTS) {
    signer = { kind: "none", why: "FILE_MOUNTED_CERTS=true: certificates from " + r(ETC_CERTS_DIR) };
  } else if (e.CA_PROVIDER.toLowerCase() === "local") {
    signer = { kind: "local", ...(e.LOCAL_CA_DIR ? { dir: r(e.LOCAL_CA_DIR) } : {}) };
  } else {
    const ca = caClientOptions(e, cfg.rawEnv, cfg.proxyConfig.discoveryAddress ?? "", cfg.root);
    if (ca.address.includes("googleapis.com")) throw new CaError("config", `CA_ADDR ${ca.address}: the Google CA provider is not supported by this agent`);
    if (e.CA_PROVIDER !== "Citadel" && e.CA_PROVIDER !== "")
      throw new CaError("config", `CA_PROVIDER: "${e.CA_PROVIDER}" is not supported (want Citadel, GkeWorkloadCertificate or local)`);
    signer = { kind: "istiod", ca, tokenPath: r(ISTIO_TOKEN_PATH), credentialFetcher: e.CREDENTIAL_FETCHER_TYPE };
  }
  return {
    root: cfg.root,
    serveSds: !e.DISABLE_ENVOY,
    socketFile: e.WORKLOAD_IDENTITY_SOCKET_FILE,
    signer,
    keyOptions: keyOptionsFromEnv(e),
    spiffeId: spiffeId(e.TRUST_DOMAIN, cfg.node.podNamespace, cfg.node.serviceAccount),
    trustDomain: e.TRUST_DOMAIN,
    ttlSeconds: Math.round(e.SECRET_TTL / 1000),
    rotation: { ratio: e.SECRET_GRACE_PERIOD_RATIO, jitter: e.SECRET_GRACE_PERIOD_RATIO_JITTER },
    debounceMs: e.FILE_DEBOUNCE_DURATION,
    workloadFiles,
    ...(e.OUTPUT_CERTS ? { outputDir: r(e.OUTPUT_CERTS) } : {}),
    outputMode: e.KUBERNETES_SERVICE_HOST ? 0o644 : 0o600,
    ...(e.PILOT_ENABLE_CA_CRL ? { crlPath: r(CA_CRL_PATH) } : {}),
    authorizedUids: e.XDS_AUTHORIZED_UIDS,
    ownUid: cfg.uid,
    maxStreams: e.ISTIO_GPRC_MAXSTREAMS,
    maxRecvMsgSize: e.ISTIO_GPRC_MAXRECVMSGSIZE,
  };
}
