// Runs one case of Istio's bootstrap golden test (test/conformance/vectors/bootstrap, README §3)
// through the agent's own code: node metadata from the injected inputs (common.json + case),
// createBootstrapFile with Istio's template, then the README's normalisations and comparison.

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { buildNode, type NodeMetadataInputs } from "../../src/config/metadata.ts";
import { parseDownwardApi } from "../../src/config/downward.ts";
import type { ProxyConfig } from "../../src/config/proxyconfig.ts";
import { createBootstrapFile, DEFAULT_BOOTSTRAP_FLAGS } from "../../src/bootstrap/index.ts";
import { VECTORS } from "../conformance/vectors.ts";

export interface BootstrapCase {
  name: string;
  proxycfg_json: string;
  golden: string;
  env: Record<string, string>;
  annotations: Record<string, string>;
  other_inputs: {
    proxycfg_base: string;
    compliance_policy: string;
    envoy_secure_metrics_port: number;
    envoy_secure_merged_metrics_port: number;
    sts_port: number;
    platform_metadata: Record<string, string> | null;
    check_locality: boolean;
    expect_lightstep_access_token_file: boolean;
    proxy_metadata_additions: Record<string, string>;
    node_envs: string[];
    annotations_file: string;
    effective_proxy_config: Record<string, unknown>;
    expected_stats_matcher: { prefixes_joined: string; suffixes_joined: string; regexps_joined: string };
  };
}

export interface Common {
  istio_version: string;
  node_id: string;
  instance_ips: string[];
  pilot_subject_alt_name: string[];
  outlier_log_path: string;
  envoy_prometheus_port: number;
  envoy_status_port: number;
  workload_identity_socket_file: string;
  xds_root_cert: string;
  credential_socket_exists: boolean;
  custom_credentials_file_exists: boolean;
  exit_on_zero_active_connections: boolean;
  metadata_discovery_option: boolean | null;
  envoy_skip_deprecated_logs: boolean;
  log_as_json: boolean;
  normalisations_applied_to_generated_output: { regex?: string; literal?: string; replacement: string; only_if?: string }[];
}

export interface Suite {
  dir: string;
  cases: BootstrapCase[];
  common: Common;
  templatePath: string;
}

export const BOOTSTRAP_VECTORS = join(VECTORS, "bootstrap");

/** A suite directory (same layout as the kept vectors); common.json and the template fall back to the kept ones. */
export function loadSuite(dir: string): Suite {
  const pick = (rel: string) => (existsSync(join(dir, rel)) ? join(dir, rel) : join(BOOTSTRAP_VECTORS, rel));
  return {
    dir,
    cases: JSON.parse(readFileSync(join(dir, "cases.json"), "utf8")),
    common: JSON.parse(readFileSync(pick("common.json"), "utf8")),
    templatePath: pick("template/envoy_bootstrap.json"),
  };
}

/** The case's effective ProxyConfig (README §3 step 1), with configPath under `tmp`. */
export function effectiveProxyConfig(suite: Suite, c: BootstrapCase, tmp: string): ProxyConfig {
  const pc = JSON.parse(readFileSync(join(suite.dir, c.proxycfg_json), "utf8")) as ProxyConfig;
  pc.configPath = `${tmp}/bootstrap/${c.other_inputs.proxycfg_base}`;
  pc.customConfigFile = suite.templatePath;
  if (!pc.statusPort) pc.statusPort = 15020;
  const additions = c.other_inputs.proxy_metadata_additions ?? {};
  if (Object.keys(additions).length > 0) pc.proxyMetadata = { ...additions };
  else delete pc.proxyMetadata;
  return pc;
}

export function metadataInputs(suite: Suite, c: BootstrapCase, pc: ProxyConfig): NodeMetadataInputs {
  const cm = suite.common;
  const o = c.other_inputs;
  return {
    id: cm.node_id,
    envs: o.node_envs,
    proxyConfig: pc,
    instanceIps: cm.instance_ips,
    pilotSubjectAltName: cm.pilot_subject_alt_name,
    stsPort: o.sts_port,
    credentialSocketExists: cm.credential_socket_exists,
    customCredentialsFileExists: cm.custom_credentials_file_exists,
    xdsRootCert: cm.xds_root_cert,
    outlierLogPath: cm.outlier_log_path,
    envoyStatusPort: cm.envoy_status_port,
    envoyPrometheusPort: cm.envoy_prometheus_port,
    envoySecureMetricsPort: o.envoy_secure_metrics_port,
    envoySecureMergedMetricsPort: o.envoy_secure_merged_metrics_port,
    exitOnZeroActiveConnections: cm.exit_on_zero_active_connections,
    metadataDiscovery: cm.metadata_discovery_option ?? undefined,
    envoySkipDeprecatedLogs: cm.envoy_skip_deprecated_logs,
    workloadIdentitySocketFile: cm.workload_identity_socket_file,
    istioVersion: cm.istio_version,
    podLabels: null,
    podAnnotations: o.annotations_file ? parseDownwardApi(o.annotations_file, `${c.name} annotations file`) : null,
    platform: { metadata: o.platform_metadata ?? undefined, locality: { region: "", zone: "", subZone: "" }, isKubernetes: true },
  };
}

export async function renderCase(suite: Suite, c: BootstrapCase, tmp: string): Promise<{ text: string; path: string; problems: string[] }> {
  const pc = effectiveProxyConfig(suite, c, tmp);
  const node = buildNode(metadataInputs(suite, c, pc));
  const created = await createBootstrapFile({
    node,
    compliancePolicy: c.other_inputs.compliance_policy,
    logAsJson: suite.common.log_as_json,
    flags: DEFAULT_BOOTSTRAP_FLAGS,
    templateOverride: "",
    root: tmp,
  });
  return { text: created.text, path: created.path, problems: created.problems };
}

/** README §3 step 4: text normalisations of the generated file. */
export function normalise(suite: Suite, c: BootstrapCase, text: string, tmp: string): string {
  let out = text;
  for (const n of suite.common.normalisations_applied_to_generated_output) {
    if (n.only_if === "check_locality is false" && c.other_inputs.check_locality) continue;
    if (n.literal !== undefined) out = out.split(tmp).join(n.replacement);
    else out = out.replace(new RegExp(n.regex!, "g"), n.replacement);
  }
  return out;
}

type Json = Record<string, any>;

/** The stats-matcher lists of a bootstrap, joined as the Go test does. */
export function statsMatcherLists(b: Json): { prefixes_joined: string; suffixes_joined: string; regexps_joined: string } {
  const patterns: Json[] = b.stats_config?.stats_matcher?.inclusion_list?.patterns ?? [];
  const pick = (f: (p: Json) => string | undefined) =>
    patterns
      .map(f)
      .filter((x): x is string => !!x)
      .join(",");
  return { prefixes_joined: pick((p) => p.prefix), suffixes_joined: pick((p) => p.suffix), regexps_joined: pick((p) => p.safe_regex?.regex) };
}

/** Step 3: drop the stats matcher and the three stats-inclusion metadata keys. */
export function stripStatsMatcher(b: Json): Json {
  const copy = structuredClone(b);
  if (copy.stats_config) delete copy.stats_config.stats_matcher;
  const md = copy.node?.metadata;
  if (md) for (const k of ["Prefixes", "Suffixes", "Regexps"]) delete md[`sidecar.istio.io/statsInclusion${k}`];
  return copy;
}
