// Checks of the files the agent reads at start: cluster.env (on a VM), the root certificate(s) of
// the istiod and CA connections, the CA token, the Envoy binary. Each finding names the file and
// the setting that chose it. File contents are injected (`DoctorFiles`), so tests drive every case.

import { resolve } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import { DEFAULT_TOKEN_AUDIENCE, parseJwt, parseRootBundle, rootProblem, tokenProblem } from "../ca/inspect.ts";
import { missingRootHint } from "../ca/options.ts";
import type { SecretManagerOptions } from "../sds/options.ts";
import { chooseXdsRoot, usesTls } from "../xds/upstream-config.ts";
import { errorMessage } from "../lib/errors.ts";
import { fail, ok, skip, warn, type Finding } from "./finding.ts";
import type { EnvFile } from "./envfile.ts";

export interface DoctorFiles {
  /** Text of a file (bounded), undefined when it does not exist; throws when it cannot be read. */
  read(path: string): Buffer | undefined;
  /** Whether `path` is a regular file the current user may execute. */
  executable(path: string): { exists: boolean; file: boolean; executable: boolean };
}

/** cluster.env keys the agent needs on a VM, and what each is for. */
export const CLUSTER_ENV_REQUIRED: Record<string, string> = {
  SERVICE_ACCOUNT: "the workload identity's service account",
  TRUST_DOMAIN: "the workload identity's trust domain (spiffe://<TRUST_DOMAIN>/ns/...)",
  ISTIO_META_CLUSTER_ID: "the cluster istiod serves this VM from",
};
/** Keys the capture step reads; without them istio-iptables uses defaults that rarely fit a VM. */
export const CLUSTER_ENV_RECOMMENDED = ["ISTIO_INBOUND_PORTS", "ISTIO_SERVICE_CIDR"];

const REGENERATE = "regenerate it with `istioctl x workload entry configure` and copy it to the VM";

export function checkClusterEnv(path: string, file: EnvFile | undefined, readError?: string): Finding[] {
  const name = "cluster-env";
  if (readError) return [fail(name, `${path}: cannot be read: ${readError}`, "make it readable by the user the agent runs as")];
  if (!file) return [fail(name, `${path} does not exist`, `${REGENERATE} (or set ISTIO_CLUSTER_CONFIG to where it is)`)];
  const out: Finding[] = [];
  for (const p of file.problems) out.push(fail(name, `${path}: ${p}`, "write one NAME='value' per line"));
  const v = file.values;
  const missing = Object.keys(CLUSTER_ENV_REQUIRED).filter((k) => !v[k]);
  if (!v.ISTIO_NAMESPACE && !v.POD_NAMESPACE) missing.push("ISTIO_NAMESPACE");
  for (const k of missing) {
    const why = CLUSTER_ENV_REQUIRED[k] ?? "the workload's namespace";
    out.push(fail(name, `${path}: ${k} is ${k in v ? "empty" : "missing"} (${why})`, `add ${k}='...' to ${path}, or ${REGENERATE}`));
  }
  const soft = CLUSTER_ENV_RECOMMENDED.filter((k) => !(k in v));
  if (soft.length) out.push(warn(name, `${path}: ${soft.join(", ")} not set: the capture rules use istio-iptables' defaults`, `add them to ${path}`));
  if (out.length === 0) out.push(ok(name, `${path}: ${Object.keys(v).length} settings, ${Object.keys(CLUSTER_ENV_REQUIRED).join(", ")} and the namespace set`));
  return out;
}

interface RootUse {
  path: string;
  /** Which connection and setting chose it. */
  why: string;
  hint: string;
}

/** The root files the istiod and CA connections will trust (Istio's lookup orders), deduplicated. */
export function rootsInUse(cfg: AgentConfig, sds: SecretManagerOptions | undefined, files: DoctorFiles): { roots: RootUse[]; problems: Finding[] } {
  const roots: RootUse[] = [];
  const problems: Finding[] = [];
  const onKubernetes = cfg.env.KUBERNETES_SERVICE_HOST !== "";
  const abs = (p: string) => resolve(cfg.root, p);
  if (usesTls(cfg.proxyConfig.controlPlaneAuthPolicy) && !cfg.env.LOCAL_XDS_PATH) {
    try {
      const choice = chooseXdsRoot({
        xdsRootCa: cfg.env.XDS_ROOT_CA,
        provCert: cfg.env.PROV_CERT,
        fileMountedCerts: cfg.env.FILE_MOUNTED_CERTS,
        mountedRootCert: cfg.proxyConfig.proxyMetadata?.["ISTIO_META_TLS_CLIENT_ROOT_CERT"] ?? "",
        pilotCertProvider: cfg.env.PILOT_CERT_PROVIDER,
        onKubernetes,
        exists: (p) => files.read(abs(p)) !== undefined,
      });
      if (choice.kind === "file") roots.push({ path: abs(choice.path), why: "istiod connection", hint: missingRootHint(onKubernetes, "XDS_ROOT_CA") });
    } catch (e) {
      problems.push(fail("root-cert", `istiod connection: ${errorMessage(e)}`));
    }
  }
  const signer = sds?.signer;
  if (signer?.kind === "istiod" && signer.ca.tls && signer.ca.rootCertPath && signer.ca.rootCertPath !== "SYSTEM") {
    const p = resolve(signer.ca.rootCertPath);
    const same = roots.find((r) => r.path === p);
    if (same) same.why += " and CA connection";
    else roots.push({ path: p, why: "CA connection", hint: missingRootHint(onKubernetes, "CA_ROOT_CA") });
  }
  return { roots, problems };
}

export function checkRoot(root: RootUse, files: DoctorFiles, nowMs: number): Finding {
  const name = "root-cert";
  let bytes: Buffer | undefined;
  try {
    bytes = files.read(root.path);
  } catch (e) {
    return fail(name, `${root.path} (${root.why}): cannot be read: ${errorMessage(e)}`);
  }
  if (bytes === undefined) return fail(name, `${root.path} (${root.why}) does not exist`, root.hint);
  const problem = rootProblem(root.path, bytes, nowMs);
  if (problem) return fail(name, `${problem} (${root.why})`, "copy the mesh's root-cert.pem (istioctl x workload entry configure writes it) in its place");
  const parsed = parseRootBundle(root.path, bytes);
  const first = "certs" in parsed ? parsed.certs[0]! : undefined;
  const days = first ? Math.floor((first.notAfter - nowMs) / 86_400_000) : 0;
  return ok(name, `${root.path} (${root.why}): CA ${first?.subject ?? ""}, valid until ${first ? new Date(first.notAfter).toISOString() : "?"} (${days} days)`);
}

export function checkToken(path: string, files: DoctorFiles, nowMs: number, audience = DEFAULT_TOKEN_AUDIENCE): Finding[] {
  const name = "token";
  let text: string | undefined;
  try {
    text = files.read(path)?.toString("utf8");
  } catch (e) {
    return [fail(name, `token file ${path} cannot be read: ${errorMessage(e)}`)];
  }
  const fix = "copy the istio-token made by `istioctl x workload entry configure` (a fresh one: it expires) to " + path;
  const problem = tokenProblem(path, text, nowMs);
  if (problem) return [fail(name, problem, fix)];
  const jwt = parseJwt(text!);
  if ("error" in jwt) return [fail(name, `token file ${path} ${jwt.error}`, fix)];
  const out: Finding[] = [];
  const exp = jwt.exp === undefined ? "no exp claim" : `expires ${new Date(jwt.exp).toISOString()}`;
  if (!jwt.audiences.includes(audience)) {
    out.push(
      warn(
        name,
        `token file ${path}: audience ${JSON.stringify(jwt.audiences)} does not include "${audience}"; istiod's CA rejects it unless its TOKEN_AUDIENCES allows that`,
        `request the token with audience ${audience} (kubectl create token <sa> --audience ${audience})`,
      ),
    );
  } else out.push(ok(name, `token file ${path}: a JWT, ${exp}, audience ${audience}`));
  return out;
}

export function checkEnvoyBinary(cfg: AgentConfig, files: DoctorFiles): Finding {
  const name = "envoy";
  if (cfg.env.DISABLE_ENVOY) return skip(name, "DISABLE_ENVOY=true: no Envoy is started");
  const path = resolve(cfg.root, cfg.proxyConfig.binaryPath ?? "/usr/local/bin/envoy");
  const st = files.executable(path);
  const fix = "install Envoy there (the istio-sidecar package does), or set ProxyConfig binaryPath";
  if (!st.exists) return fail(name, `Envoy binary ${path} (ProxyConfig binaryPath) does not exist`, fix);
  if (!st.file) return fail(name, `Envoy binary ${path} is not a regular file`, fix);
  if (!st.executable) return fail(name, `Envoy binary ${path} is not executable by this user`, `chmod +x ${path}`);
  return ok(name, `Envoy binary ${path} is executable`);
}
