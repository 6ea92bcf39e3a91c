// How the agent reaches istiod's CA, resolved from configuration (Istio's FindRootCAForCA,
// plugins.go and caclient options): address, TLS or not, root certificate, server name, client
// certificate, outgoing metadata and CSR metadata. Pure: paths are resolved, not read.

import { join, isAbsolute } from "node:path";
import { CaError } from "./errors.ts";

export interface CaEnv {
  CA_ADDR: string;
  CA_ROOT_CA: string;
  ISTIOD_SAN: string;
  PILOT_CERT_PROVIDER: string;
  PROV_CERT: string;
  ISTIO_META_CLUSTER_ID: string;
  ISTIO_META_CERT_SIGNER: string;
  COMPLIANCE_POLICY?: string;
  /** Set in every Kubernetes pod; unset on a VM (the missing-root hint differs). */
  KUBERNETES_SERVICE_HOST?: string;
}

export interface CaClientOptions {
  /** host:port of the CA. */
  address: string;
  /** false when the port is 15010 (plaintext, Istio's convention). */
  tls: boolean;
  /** Root PEM file to trust; `SYSTEM` = the OS trust store; undefined with plaintext. */
  rootCertPath?: string | "SYSTEM";
  /** The root must exist at start (Istio's FindRootCAForCA; a PROV_CERT root is taken on trust). */
  rootMustExist?: boolean;
  /** TLS server name (SNI and certificate check). */
  serverName?: string;
  /** Client certificate (PROV_CERT). */
  clientCertPath?: string;
  clientKeyPath?: string;
  /** gRPC metadata on every CSR: ClusterID and CA_HEADER_*. */
  headers: Record<string, string>;
  /** CSR request metadata (CertSigner). */
  csrMetadata?: Record<string, string>;
  /** COMPLIANCE_POLICY, applied to the TLS connection. */
  compliancePolicy?: string;
  /** What to do when the root file is missing, for this host (a pod or a VM). */
  missingRootHint?: string;
}

export const MESH_ROOT_CERT_PATH = "./var/run/secrets/istio/root-cert.pem";
export const ETC_CERTS_ROOT_PATH = "./etc/certs/root-cert.pem";

/**
 * What to do about a missing root certificate, where the agent runs: a pod mounts it from the
 * istio-ca-root-cert configmap; a VM has it in PROV_CERT (istio-start.sh: /etc/certs). `variable`
 * is the setting that names another root file (CA_ROOT_CA or XDS_ROOT_CA).
 */
export function missingRootHint(onKubernetes: boolean, variable: string): string {
  return onKubernetes
    ? `set ${variable}, or mount the istio-ca-root-cert configmap`
    : `on a VM: put the mesh's root-cert.pem in the PROV_CERT directory (istio-start.sh sets PROV_CERT=/etc/certs), or set ${variable}`;
}

/** Host part of host:port (brackets removed for IPv6). */
export function hostOf(address: string): string {
  const a = address.replace(/^[a-z]+:\/\//, "");
  if (a.startsWith("[")) return a.slice(1, a.indexOf("]"));
  const i = a.lastIndexOf(":");
  return i < 0 ? a : a.slice(0, i);
}

/** Istio's root order for the CA connection. */
export function rootCertForCa(env: CaEnv): string | "SYSTEM" {
  if (env.CA_ROOT_CA === "SYSTEM") return "SYSTEM";
  if (env.CA_ROOT_CA !== "") return env.CA_ROOT_CA;
  if (env.PILOT_CERT_PROVIDER === "custom") return ETC_CERTS_ROOT_PATH;
  if (env.PROV_CERT !== "") return join(env.PROV_CERT, "root-cert.pem");
  if (env.PILOT_CERT_PROVIDER === "none") {
    throw new CaError(
      "config",
      "PILOT_CERT_PROVIDER=none: no root certificate for the TLS connection to the CA (set CA_ROOT_CA, or use a :15010 plaintext CA_ADDR)",
    );
  }
  return MESH_ROOT_CERT_PATH;
}

export function caClientOptions(env: CaEnv, rawEnv: Readonly<Record<string, string | undefined>>, discoveryAddress: string, root = "."): CaClientOptions {
  const address = env.CA_ADDR !== "" ? env.CA_ADDR : discoveryAddress;
  if (address === "") throw new CaError("config", "CA_ADDR: no CA address (and no discoveryAddress in ProxyConfig)");
  const tls = !address.endsWith(":15010");
  const headers: Record<string, string> = {};
  // Istio sends ClusterID on every CSR, empty when ISTIO_META_CLUSTER_ID is unset.
  headers["ClusterID"] = env.ISTIO_META_CLUSTER_ID;
  for (const [k, v] of Object.entries(rawEnv)) {
    if (k.startsWith("CA_HEADER_") && k.length > "CA_HEADER_".length && v !== undefined) headers[k.slice("CA_HEADER_".length)] = v;
  }
  const abs = (p: string) => (isAbsolute(p) ? p : join(root, p));
  const opts: CaClientOptions = { address, tls, headers, ...(env.COMPLIANCE_POLICY ? { compliancePolicy: env.COMPLIANCE_POLICY } : {}) };
  if (env.ISTIO_META_CERT_SIGNER !== "") opts.csrMetadata = { CertSigner: env.ISTIO_META_CERT_SIGNER };
  if (tls) {
    const r = rootCertForCa(env);
    opts.rootCertPath = r === "SYSTEM" ? r : abs(r);
    opts.missingRootHint = missingRootHint(Boolean(env.KUBERNETES_SERVICE_HOST), "CA_ROOT_CA");
    opts.rootMustExist = r !== "SYSTEM" && (env.CA_ROOT_CA !== "" || env.PILOT_CERT_PROVIDER === "custom" || env.PROV_CERT === "");
    opts.serverName = env.CA_ADDR === "" && env.ISTIOD_SAN !== "" ? env.ISTIOD_SAN : hostOf(address);
    if (env.PROV_CERT !== "") {
      opts.clientCertPath = abs(join(env.PROV_CERT, "cert-chain.pem"));
      opts.clientKeyPath = abs(join(env.PROV_CERT, "key.pem"));
    }
  }
  return opts;
}
