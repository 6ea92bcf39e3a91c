// Assemble the one AgentConfig from flags, environment and files (pilot-agent's initProxy +
// ConstructProxyConfig). Pure apart from the injected `files` and `host` readers, so tests drive
// every layer with tables.

import { compliancePolicyFromGodebug } from "./godebug.ts";
import { readAll, type EnvMap, type EnvProblem } from "./envdecl.ts";
import { MAX_STREAMS_PER_CONNECTION, PROXY_ENV } from "./env.ts";
import type { AgentConfig, ProxyFlags, ProxyType } from "./agentconfig.ts";
import { ConfigError, layerProxyConfig, type LayerInput } from "./layering.ts";
import { addressProblem, validateProxyConfig } from "./validate.ts";
import { FILE_LIMITS } from "../lib/boundedfile.ts";
import { buildNodeIdentity, type InterfaceTable } from "./node.ts";
import { compliancePolicyProblem } from "../lib/compliance.ts";
import { errorMessage } from "../lib/errors.ts";

export { ConfigError };

export const PROXY_TYPES: readonly ProxyType[] = ["sidecar", "router", "waypoint", "ztunnel", "agentgateway"];

export const ANNOTATION_PROXY_CONFIG = "proxy.istio.io/config";
export const ANNOTATION_DISCOVERY_ADDRESS = "sidecar.istio.io/discoveryAddress";
export const ANNOTATION_STATUS_PORT = "status.sidecar.istio.io/port";
export const ANNOTATION_EXCLUDE_INTERFACES = "traffic.sidecar.istio.io/excludeInterfaces";

export interface LoadInputs {
  type: string;
  flags: ProxyFlags;
  env: EnvMap;
  /** Reads a file of at most `maxBytes`: its text, undefined when it does not exist; throws when it exists but cannot be read. */
  readFile: (path: string, maxBytes: number) => string | undefined;
  /** Parses the downward-API `key="quoted"` format. */
  parseDownward: (text: string, origin: string) => Record<string, string>;
  interfaces: InterfaceTable;
  cpuCount: number;
  root: string;
  uid: number;
  version: string;
}

export interface Loaded {
  config: AgentConfig;
  /** Things worth a warning line at start (bad env values, unknown fields, legacy flags). */
  warnings: string[];
  /** Informational lines Istio also logs (where each layer came from). */
  notes: string[];
}

export const LABELS_PATH = "./etc/istio/pod/labels";
export const ANNOTATIONS_PATH = "./etc/istio/pod/annotations";

export function loadAgentConfig(inputs: LoadInputs): Loaded {
  if (!PROXY_TYPES.includes(inputs.type as ProxyType)) {
    throw new ConfigError(`proxy type: "${inputs.type}" is not one of ${PROXY_TYPES.join(", ")}`);
  }
  const type = inputs.type as ProxyType;
  const warnings: string[] = [];
  const notes: string[] = [];
  const { values: env, problems } = readAll(inputs.env, PROXY_ENV);
  for (const p of problems) warnings.push(describeEnvProblem(p));
  if (inputs.env.ISTIO_GPRC_MAXSTREAMS !== undefined && env.ISTIO_GPRC_MAXSTREAMS > MAX_STREAMS_PER_CONNECTION) {
    warnings.push(
      `ISTIO_GPRC_MAXSTREAMS=${env.ISTIO_GPRC_MAXSTREAMS}: the agent's gRPC servers allow at most ${MAX_STREAMS_PER_CONNECTION} streams per connection (an HTTP/2 flood limit, docs/xds.md); ${MAX_STREAMS_PER_CONNECTION} applies`,
    );
  }
  const implied = compliancePolicyFromGodebug(env.GODEBUG);
  if (implied && env.COMPLIANCE_POLICY === "") {
    (env as { COMPLIANCE_POLICY: string }).COMPLIANCE_POLICY = implied;
    notes.push(`GODEBUG=${env.GODEBUG}: COMPLIANCE_POLICY=${implied} applies`);
  }
  if (env.TRUST_DOMAIN.trim() === "") {
    warnings.push(
      `TRUST_DOMAIN is empty: the workload identity would be spiffe:///ns/${env.POD_NAMESPACE || "<namespace>"}/sa/${env.SERVICE_ACCOUNT || "<service account>"}; set TRUST_DOMAIN (cluster.env on a VM) to the mesh's trust domain, e.g. cluster.local`,
    );
  }
  const compliance = compliancePolicyProblem(env.COMPLIANCE_POLICY);
  if (compliance) warnings.push(compliance);

  const labels = readDownward(inputs, LABELS_PATH);
  const annotations = readDownward(inputs, ANNOTATIONS_PATH);

  // Layers: mesh config file < PROXY_CONFIG < annotation.
  const layers: LayerInput[] = [];
  const meshText = readOrFail(inputs, inputs.flags.meshConfig, "mesh config file", FILE_LIMITS.config);
  if (meshText !== undefined) {
    layers.push({ layer: "mesh config", origin: `mesh config ${inputs.flags.meshConfig}`, text: meshText, meshConfig: true });
    notes.push(`Apply mesh config from file ${inputs.flags.meshConfig}`);
  }
  if (env.PROXY_CONFIG) {
    layers.push({ layer: "PROXY_CONFIG", origin: "PROXY_CONFIG", text: env.PROXY_CONFIG });
    notes.push("Apply proxy config from env PROXY_CONFIG");
  }
  const annotated = annotations[ANNOTATION_PROXY_CONFIG];
  if (annotated) {
    layers.push({ layer: "annotation", origin: `annotation ${ANNOTATION_PROXY_CONFIG}`, text: annotated });
    notes.push(`Apply proxy config from annotation ${ANNOTATION_PROXY_CONFIG}`);
  }
  const layered = layerProxyConfig(layers);
  for (const u of layered.unknownFields) warnings.push(`${u}: unknown ProxyConfig field, ignored`);
  warnings.push(...layered.parseWarnings);
  const pc = layered.config;
  const sources = layered.sources;

  // Concurrency: ISTIO_CPU_LIMIT when unset; the legacy flag wins.
  if (pc.concurrency === undefined || pc.concurrency === null) {
    if (env.ISTIO_CPU_LIMIT !== 0) {
      pc.concurrency = env.ISTIO_CPU_LIMIT;
      sources.concurrency = "ISTIO_CPU_LIMIT";
    }
  }
  if (inputs.flags.concurrency !== 0) {
    warnings.push(`legacy --concurrency=${inputs.flags.concurrency} flag detected; prefer to use ProxyConfig`);
    pc.concurrency = inputs.flags.concurrency;
    sources.concurrency = "--concurrency";
  }
  if (!pc.concurrency && env.ISTIO_CPU_LIMIT < inputs.cpuCount) {
    warnings.push(
      `concurrency is set to 0, which will use a thread per CPU on the host. However, CPU limit is set lower. This is not recommended and may lead to performance issues. CPU count: ${inputs.cpuCount}, CPU Limit: ${env.ISTIO_CPU_LIMIT}.`,
    );
  }
  if (pc.serviceCluster === "" || (pc.serviceCluster === undefined && pc.tracingServiceName === undefined)) {
    pc.serviceCluster = inputs.flags.serviceCluster;
    sources.serviceCluster = "--serviceCluster";
  }

  const validated = validateProxyConfig(pc, sources);
  warnings.push(...validated.warnings);
  if (validated.errors.length) throw new ConfigError(validated.errors.join("; "));
  const proxyConfig = validated.config;

  if (inputs.flags.templateFile && !proxyConfig.customConfigFile) {
    proxyConfig.proxyBootstrapTemplatePath = inputs.flags.templateFile;
    sources.proxyBootstrapTemplatePath = "--templateFile";
  }
  // After validation, as Istio: annotations override discovery address and status port.
  const da = annotations[ANNOTATION_DISCOVERY_ADDRESS];
  if (da !== undefined) {
    addressProblem(da, (m) => {
      throw new ConfigError(`annotation ${ANNOTATION_DISCOVERY_ADDRESS}=${JSON.stringify(da)} (from ${ANNOTATIONS_PATH}): invalid discovery address: ${m}`);
    });
    proxyConfig.discoveryAddress = da;
    sources.discoveryAddress = `annotation ${ANNOTATION_DISCOVERY_ADDRESS}`;
  }
  const sp = annotations[ANNOTATION_STATUS_PORT];
  if (sp !== undefined) {
    const port = /^\d+$/.test(sp.trim()) ? Number(sp.trim()) : NaN;
    if (Number.isNaN(port) || port > 65535) {
      warnings.push(`Invalid annotation ${ANNOTATION_STATUS_PORT}=${sp}: not a port number; status server disabled`);
      proxyConfig.statusPort = 0;
    } else {
      proxyConfig.statusPort = port;
    }
    sources.statusPort = `annotation ${ANNOTATION_STATUS_PORT}`;
  }

  canonicalise(proxyConfig);

  const node = buildNodeIdentity({
    type,
    instanceIp: env.INSTANCE_IP,
    podName: env.POD_NAME,
    podNamespace: env.POD_NAMESPACE,
    serviceAccount: env.SERVICE_ACCOUNT,
    domain: inputs.flags.domain,
    interfaces: inputs.interfaces,
    excludeInterfaces: annotations[ANNOTATION_EXCLUDE_INTERFACES] ?? "",
  });

  return {
    config: {
      proxyType: type,
      proxyConfig,
      proxyConfigSources: sources,
      env,
      rawEnv: inputs.env,
      flags: inputs.flags,
      node,
      labels,
      annotations,
      root: inputs.root,
      uid: inputs.uid,
      version: inputs.version,
    },
    warnings,
    notes,
  };
}

/**
 * Protobuf JSON leaves out unset fields: drop nulls, empty strings, zero plain scalars and empty
 * maps, so node metadata PROXY_CONFIG reads as istiod expects. Wrapper-typed fields (concurrency,
 * holdApplicationUntilProxyStarts) keep an explicit zero/false.
 */
function canonicalise(pc: Record<string, unknown>): void {
  const wrappers = new Set(["concurrency", "holdApplicationUntilProxyStarts"]);
  for (const [k, v] of Object.entries(pc)) {
    const emptyMap =
      v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0 && (k === "proxyMetadata" || k === "runtimeValues");
    const zero = !wrappers.has(k) && (v === "" || v === 0 || v === false);
    if (v === null || v === undefined || emptyMap || zero || (Array.isArray(v) && v.length === 0)) delete pc[k];
  }
}

function readOrFail(inputs: LoadInputs, path: string, what: string, maxBytes: number): string | undefined {
  if (!path) return undefined;
  try {
    return inputs.readFile(path, maxBytes);
  } catch (e) {
    throw new ConfigError(`${what} ${path}: cannot be read: ${errorMessage(e)}`, { cause: e });
  }
}

function readDownward(inputs: LoadInputs, path: string): Record<string, string> {
  const text = readOrFail(inputs, path, "pod info file", FILE_LIMITS.podInfo);
  if (text === undefined) return {};
  try {
    return inputs.parseDownward(text, path);
  } catch (e) {
    throw e instanceof ConfigError ? e : new ConfigError(errorMessage(e));
  }
}

function describeEnvProblem(p: EnvProblem): string {
  return `Invalid environment variable value ${p.name}=${JSON.stringify(p.value)}: ${p.message}; using the default`;
}
