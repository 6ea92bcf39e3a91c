// How the agent dials istiod (reference §6): plaintext or TLS, which root CA (Istio's order), the
// TLS server name, the client certificate, and the gRPC metadata on every upstream stream. Pure
// functions of their inputs; file reads happen at dial time (so root CA and token changes apply
// to the next connection) through the small `FileReader` seam.

import { resolve } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import { withPrefix } from "../config/envdecl.ts";
import { XdsError } from "./errors.ts";
import { clientCertProblem } from "../ca/inspect.ts";
import { RootBundleCheck } from "../ca/rootcheck.ts";
import { missingRootHint } from "../ca/options.ts";

export const DEFAULT_ROOT_CERT = "./var/run/secrets/istio/root-cert.pem";
export const LEGACY_ROOT_CERT = "./etc/certs/root-cert.pem";
export const ISTIO_TOKEN_PATH = "./var/run/secrets/tokens/istio-token";

export type RootChoice = { kind: "system" } | { kind: "file"; path: string };

export interface RootInputs {
  xdsRootCa: string;
  provCert: string;
  fileMountedCerts: boolean;
  /** proxyMetadata ISTIO_META_TLS_CLIENT_ROOT_CERT (with FILE_MOUNTED_CERTS). */
  mountedRootCert: string;
  pilotCertProvider: string;
  /** KUBERNETES_SERVICE_HOST is set (a pod, not a VM): which hint a missing root gets. */
  onKubernetes?: boolean;
  exists(path: string): boolean;
}

/**
 * Istio's FindRootCAForXDS order. Throws XdsError when no usable root exists: as Istio, a root
 * file it names (XDS_ROOT_CA, the mounted-certs root, the default) must exist at start, or the
 * agent does not start; a PROV_CERT root is taken on trust (it may be written later on VMs).
 */
export function chooseXdsRoot(i: RootInputs): RootChoice {
  if (i.xdsRootCa === "SYSTEM") return { kind: "system" };
  const mustExist = (path: string, what: string): RootChoice => {
    if (!i.exists(path)) throw new XdsError("tls", `root CA file for XDS does not exist ${path} (${what})`);
    return { kind: "file", path };
  };
  if (i.xdsRootCa !== "") return mustExist(i.xdsRootCa, "XDS_ROOT_CA");
  if (i.exists(LEGACY_ROOT_CERT)) return { kind: "file", path: LEGACY_ROOT_CERT };
  if (i.provCert !== "") return { kind: "file", path: `${i.provCert.replace(/\/+$/, "")}/root-cert.pem` };
  if (i.fileMountedCerts) {
    if (i.mountedRootCert === "") throw new XdsError("tls", "FILE_MOUNTED_CERTS is set but proxyMetadata ISTIO_META_TLS_CLIENT_ROOT_CERT is empty");
    return mustExist(i.mountedRootCert, "proxyMetadata ISTIO_META_TLS_CLIENT_ROOT_CERT");
  }
  if (i.pilotCertProvider === "none") throw new XdsError("tls", "PILOT_CERT_PROVIDER=none but the istiod connection needs a root CA (set XDS_ROOT_CA)");
  return mustExist(DEFAULT_ROOT_CERT, `${missingRootHint(i.onKubernetes ?? true, "XDS_ROOT_CA")}, or set controlPlaneAuthPolicy NONE`);
}

export function splitHostPort(addr: string): { host: string; port: number } {
  const m = addr.match(/^\[([^\]]+)\]:(\d+)$/) ?? addr.match(/^([^:]+):(\d+)$/);
  if (!m) throw new XdsError("config", `discoveryAddress "${addr}" is not host:port`);
  const port = Number(m[2]);
  if (port < 1 || port > 65535) throw new XdsError("config", `discoveryAddress "${addr}": port out of range`);
  return { host: m[1]!, port };
}

/** The TLS server name: the discovery host (`*localhost*` means istiod's service name), or ISTIOD_SAN. */
export function xdsServerName(host: string, istiodSan: string): string {
  if (istiodSan !== "") return istiodSan;
  return host.includes("localhost") ? "istiod.istio-system.svc" : host;
}

/** Plaintext only when controlPlaneAuthPolicy is NONE (Istio's getTLSOptions; the port does not matter). */
export function usesTls(policy: string | undefined): boolean {
  return policy !== "NONE";
}

/** gRPC metadata on every upstream stream: bearer token, ClusterID, XDS_HEADER_<K> as <K>. */
export function upstreamMetadata(token: string | undefined, clusterId: string, xdsHeaders: Record<string, string>): Record<string, string> {
  const md: Record<string, string> = {};
  for (const [k, v] of Object.entries(xdsHeaders)) md[k.toLowerCase()] = v;
  if (clusterId !== "") md["clusterid"] = clusterId;
  if (token) md["authorization"] = `Bearer ${token}`;
  return md;
}

export interface FileReader {
  exists(path: string): boolean;
  /** Contents, or undefined when the file does not exist. */
  read(path: string): Buffer | undefined;
}

export interface TlsDialConfig {
  root: RootChoice;
  servername: string;
  clientCert?: { certPath: string; keyPath: string };
}

/** Everything needed to dial istiod, resolved from the agent's config (paths relative to its root). */
export interface UpstreamDialConfig {
  address: string;
  host: string;
  port: number;
  tls?: TlsDialConfig;
  tokenPath: string;
  clusterId: string;
  xdsHeaders: Record<string, string>;
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
  connectTimeoutMs: number;
  /** COMPLIANCE_POLICY, applied to the TLS connection. */
  compliancePolicy: string;
}

export function dialConfigFrom(cfg: AgentConfig, files: FileReader): UpstreamDialConfig {
  const abs = (p: string) => resolve(cfg.root, p);
  const address = cfg.proxyConfig.discoveryAddress ?? "istiod.istio-system.svc:15012";
  const { host, port } = splitHostPort(address);
  const meta = cfg.proxyConfig.proxyMetadata ?? {};
  let tls: TlsDialConfig | undefined;
  if (usesTls(cfg.proxyConfig.controlPlaneAuthPolicy)) {
    const root = chooseXdsRoot({
      xdsRootCa: cfg.env.XDS_ROOT_CA,
      provCert: cfg.env.PROV_CERT,
      fileMountedCerts: cfg.env.FILE_MOUNTED_CERTS,
      mountedRootCert: meta["ISTIO_META_TLS_CLIENT_ROOT_CERT"] ?? "",
      pilotCertProvider: cfg.env.PILOT_CERT_PROVIDER,
      onKubernetes: cfg.env.KUBERNETES_SERVICE_HOST !== "",
      exists: (p) => files.exists(abs(p)),
    });
    let clientCert: TlsDialConfig["clientCert"];
    if (cfg.env.PROV_CERT !== "") clientCert = { certPath: abs(`${cfg.env.PROV_CERT}/cert-chain.pem`), keyPath: abs(`${cfg.env.PROV_CERT}/key.pem`) };
    else if (cfg.env.FILE_MOUNTED_CERTS && meta["ISTIO_META_TLS_CLIENT_CERT_CHAIN"] && meta["ISTIO_META_TLS_CLIENT_KEY"]) {
      clientCert = { certPath: abs(meta["ISTIO_META_TLS_CLIENT_CERT_CHAIN"]), keyPath: abs(meta["ISTIO_META_TLS_CLIENT_KEY"]) };
    }
    tls = { root: root.kind === "file" ? { kind: "file", path: abs(root.path) } : root, servername: xdsServerName(host, cfg.env.ISTIOD_SAN), clientCert };
  }
  return {
    address,
    host,
    port,
    tls,
    tokenPath: abs(ISTIO_TOKEN_PATH),
    clusterId: cfg.env.ISTIO_META_CLUSTER_ID,
    xdsHeaders: withPrefix(cfg.rawEnv, "XDS_HEADER_"),
    keepaliveMs: cfg.env.GRPC_KEEPALIVE_INTERVAL,
    keepaliveTimeoutMs: cfg.env.GRPC_KEEPALIVE_TIMEOUT,
    connectTimeoutMs: 5000,
    compliancePolicy: cfg.env.COMPLIANCE_POLICY,
  };
}

export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  servername: string;
}

/**
 * Read the TLS files for one dial. A missing root is an error; an expired or unreadable client cert
 * is skipped. `rootCheck` remembers a root already found good (the upstream's, across redials).
 */
export function loadTlsMaterial(t: TlsDialConfig, files: FileReader, now: Date, rootCheck = new RootBundleCheck()): TlsMaterial {
  const out: TlsMaterial = { servername: t.servername };
  if (t.root.kind === "file") {
    const ca = files.read(t.root.path);
    if (!ca || ca.length === 0) throw new XdsError("tls", `root CA ${t.root.path} for the istiod connection does not exist or is empty`);
    // TLS would only say "Invalid CA", naming no file.
    const problem = rootCheck.problem(t.root.path, ca);
    if (problem) throw new XdsError("tls", `${problem} (the istiod connection's root)`);
    out.ca = ca;
  }
  if (t.clientCert) {
    const cert = files.read(t.clientCert.certPath);
    const key = files.read(t.clientCert.keyPath);
    if (cert && key && !clientCertProblem(cert, now.getTime())) {
      out.cert = cert;
      out.key = key;
    }
  }
  return out;
}
