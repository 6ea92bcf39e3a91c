// What `agent proxy` calls: node metadata from the AgentConfig, the Envoy bootstrap file, the
// ISTIO_BOOTSTRAP_OVERRIDE JSON and the proxyless gRPC bootstrap. The conformance harness drives
// the same code through buildNode + createBootstrapFile with its injected inputs.

import { resolve } from "node:path";
import type { AgentConfig } from "../config/agentconfig.ts";
import { buildNode, pilotSanFor, type BootstrapNode, type NodeMetadataInputs, type PlatformInfo } from "../config/metadata.ts";
import type { ProxyConfig } from "../config/proxyconfig.ts";
import { writeGrpcBootstrapFile } from "./grpc.ts";
import { readBootstrapOverride } from "./override.ts";
import type { BootstrapFlags } from "./params.ts";
import { createBootstrapFile, prepareTemplate, type PreparedTemplate } from "./write.ts";
import { errorMessage } from "../lib/errors.ts";

export { BootstrapError } from "./errors.ts";
export { createBootstrapFile, type CreateBootstrapInput, type CreatedBootstrap } from "./write.ts";
export { grpcBootstrapJson, type GrpcBootstrapOptions } from "./grpc.ts";
export { bootstrapOverrideToJson, readBootstrapOverride } from "./override.ts";
export { toTemplateParams, DEFAULT_BOOTSTRAP_FLAGS, type BootstrapFlags } from "./params.ts";

/** Facts the agent learns at run time (not in AgentConfig). */
export interface NodeContext {
  /** ./var/run/secrets/credential-uds/socket is a live gRPC socket (adds `credential: "true"`). */
  credentialSocketExists?: boolean;
  /** The agent serves file-mounted credentials only (adds `file-credential` and the sds-files-grpc cluster). */
  customCredentialsFileExists?: boolean;
  /** Root certificate path used for the istiod connection (XDS_ROOT_CA resolved); not serialized. */
  xdsRootCert?: string;
  /** Platform facts from src/platform (PLATFORM_METADATA, locality, instance labels). */
  platform?: PlatformInfo;
}

export interface WriteBootstrapOptions extends NodeContext {
  /** `--log_as_json`: Envoy's application log in JSON too. */
  logAsJson?: boolean;
  /** From `prepareBootstrapTemplate(cfg)`, called earlier; otherwise the template is read and compiled here. */
  template?: Promise<PreparedTemplate>;
}

/**
 * Read and compile the Envoy bootstrap's template for `writeBootstrap` ahead of time (the agent
 * does it while its sockets come up); undefined when customConfigFile means no template is used.
 * A failure surfaces from `writeBootstrap`, in its usual place.
 */
export function prepareBootstrapTemplate(cfg: AgentConfig): Promise<PreparedTemplate> | undefined {
  if (cfg.proxyConfig.customConfigFile) return undefined;
  const p = prepareTemplate(cfg.proxyConfig, cfg.env.ISTIO_BOOTSTRAP, cfg.root, cfg.rawEnv);
  p.catch(() => {}); // reported by writeBootstrap, which awaits it
  return p;
}

export interface BootstrapResult {
  /** Path for Envoy's `-c`: the written envoy-rev.json, or customConfigFile as is. */
  path: string;
  /** True when customConfigFile was handed to Envoy untouched (nothing to clean up). */
  custom: boolean;
  /** ISTIO_BOOTSTRAP_OVERRIDE as JSON for `--config-yaml`, when set and readable. */
  configYaml?: string;
  /** The node (metadata, locality) the bootstrap was built from. */
  node: BootstrapNode;
  /** Warnings to log: ignored annotations, unusable metadata, an unreadable override file. */
  problems: string[];
}

/** Node metadata inputs, from the agent's configuration (what Istio's generateNodeMetadata passes). */
export function nodeInputsFromConfig(cfg: AgentConfig, ctx: NodeContext = {}): NodeMetadataInputs {
  const pc = cfg.proxyConfig;
  const env = cfg.env;
  const envs = Object.entries(cfg.rawEnv).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
  const has = (m: Record<string, string>) => Object.keys(m).length > 0;
  return {
    id: cfg.node.nodeId,
    envs,
    dnsProxyAddr: cfg.rawEnv.DNS_PROXY_ADDR || undefined,
    proxyConfig: pc,
    instanceIps: cfg.node.ips,
    pilotSubjectAltName: pc.controlPlaneAuthPolicy === "MUTUAL_TLS" ? [pilotSanFor(pc.discoveryAddress ?? "")] : [],
    stsPort: cfg.flags.stsPort,
    credentialSocketExists: ctx.credentialSocketExists ?? false,
    customCredentialsFileExists: ctx.customCredentialsFileExists ?? false,
    xdsRootCert: ctx.xdsRootCert ?? env.XDS_ROOT_CA,
    outlierLogPath: cfg.flags.outlierLogPath,
    envoyStatusPort: env.ENVOY_STATUS_PORT,
    envoyPrometheusPort: env.ENVOY_PROMETHEUS_PORT,
    envoySecureMetricsPort: env.ENVOY_SECURE_METRICS_PORT,
    envoySecureMergedMetricsPort: env.ENVOY_SECURE_MERGED_METRICS_PORT,
    exitOnZeroActiveConnections: env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS,
    metadataDiscovery: env.PEER_METADATA_DISCOVERY,
    envoySkipDeprecatedLogs: env.ENVOY_SKIP_DEPRECATED_LOGS,
    workloadIdentitySocketFile: env.WORKLOAD_IDENTITY_SOCKET_FILE,
    istioVersion: cfg.version,
    podLabels: has(cfg.labels) ? cfg.labels : null,
    podAnnotations: has(cfg.annotations) ? cfg.annotations : null,
    platform: ctx.platform,
  };
}

export function bootstrapFlagsFromConfig(cfg: AgentConfig): BootstrapFlags {
  return {
    deltaXds: cfg.env.ISTIO_DELTA_XDS,
    dualStack: cfg.env.ISTIO_DUAL_STACK,
    envoyStatusPortEnableProxyProtocol: cfg.env.ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL,
    stripFragment: cfg.env.HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED,
    hostIp: cfg.env.HOST_IP,
  };
}

/**
 * Write the Envoy bootstrap for `agent proxy` (Istio's initializeEnvoyAgent): customConfigFile is
 * passed through untouched; otherwise the template is rendered to <ConfigPath>/envoy-rev.json.
 * Also reads ISTIO_BOOTSTRAP_OVERRIDE (an unreadable file is a problem, not a failure, as in Istio).
 */
export async function writeBootstrap(cfg: AgentConfig, opts: WriteBootstrapOptions = {}): Promise<BootstrapResult> {
  const node = buildNode(nodeInputsFromConfig(cfg, opts));
  const pc: ProxyConfig = cfg.proxyConfig;
  const problems: string[] = [];
  let result: { path: string; custom: boolean };
  if (pc.customConfigFile) {
    problems.push(...node.problems);
    result = { path: resolve(cfg.root, pc.customConfigFile), custom: true };
  } else {
    const created = await createBootstrapFile({
      node,
      compliancePolicy: cfg.env.COMPLIANCE_POLICY,
      logAsJson: opts.logAsJson ?? false,
      flags: bootstrapFlagsFromConfig(cfg),
      templateOverride: cfg.env.ISTIO_BOOTSTRAP,
      root: cfg.root,
      env: cfg.rawEnv,
      ...(opts.template ? { template: opts.template } : {}),
    });
    problems.push(...created.problems);
    result = { path: created.path, custom: false };
  }
  let configYaml: string | undefined;
  if (cfg.env.ISTIO_BOOTSTRAP_OVERRIDE) {
    try {
      configYaml = await readBootstrapOverride(resolve(cfg.root, cfg.env.ISTIO_BOOTSTRAP_OVERRIDE), cfg.env.HOST_IP);
    } catch (e) {
      problems.push(`Failed to read bootstrap override: ${errorMessage(e)}`);
    }
  }
  return { ...result, configYaml, node, problems };
}

/**
 * Write GRPC_XDS_BOOTSTRAP (Istio's generateGRPCBootstrap), always, even without Envoy. The server
 * is the agent's XDS socket; OUTPUT_CERTS adds the file_watcher certificate provider.
 * Returns the absolute path written.
 */
export async function writeGrpcBootstrap(cfg: AgentConfig, ctx: NodeContext = {}): Promise<string> {
  const node = buildNode(nodeInputsFromConfig(cfg, ctx));
  const path = resolve(cfg.root, cfg.env.GRPC_XDS_BOOTSTRAP);
  const configPath = cfg.proxyConfig.configPath ?? "./etc/istio/proxy";
  await writeGrpcBootstrapFile(path, {
    node,
    xdsUdsPath: resolve(cfg.root, configPath, "XDS").replace(/^\//, ""),
    discoveryAddress: cfg.proxyConfig.discoveryAddress ?? "",
    certDir: cfg.env.OUTPUT_CERTS,
  });
  return path;
}
