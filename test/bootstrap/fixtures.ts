import type { NodeMetadataInputs } from "../../src/config/metadata.ts";
// A typical sidecar's AgentConfig (as the injector sets it up), for bootstrap tests and the benchmark.

import type { AgentConfig } from "../../src/config/agentconfig.ts";
import { readAll } from "../../src/config/envdecl.ts";
import { PROXY_ENV } from "../../src/config/env.ts";
import { defaultProxyConfig } from "../../src/config/proxyconfig.ts";
import { DEFAULT_FLAGS } from "../config/support.ts";

export function typicalPodEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    POD_NAME: "reviews-v1-7f9b8c-abcde",
    POD_NAMESPACE: "bookinfo",
    INSTANCE_IP: "10.44.0.17",
    SERVICE_ACCOUNT: "bookinfo-reviews",
    HOST_IP: "10.128.0.4",
    ISTIO_CPU_LIMIT: "2",
    ISTIO_META_POD_PORTS: '[{"name":"http","containerPort":9080,"protocol":"TCP"}]',
    ISTIO_META_APP_CONTAINERS: "reviews",
    ISTIO_META_CLUSTER_ID: "Kubernetes",
    ISTIO_META_NODE_NAME: "gke-node-1",
    ISTIO_META_INTERCEPTION_MODE: "REDIRECT",
    ISTIO_META_WORKLOAD_NAME: "reviews-v1",
    ISTIO_META_OWNER: "kubernetes://apis/apps/v1/namespaces/bookinfo/deployments/reviews-v1",
    ISTIO_META_MESH_ID: "cluster.local",
    TRUST_DOMAIN: "cluster.local",
    ...extra,
  };
}

export function typicalAgentConfig(root: string, extraEnv: Record<string, string> = {}): AgentConfig {
  const rawEnv = typicalPodEnv(extraEnv);
  const env = readAll(rawEnv, PROXY_ENV).values;
  const proxyConfig = { ...defaultProxyConfig(), discoveryAddress: "istiod.istio-system.svc:15012" };
  return {
    proxyType: "sidecar",
    proxyConfig,
    proxyConfigSources: {},
    env,
    rawEnv,
    flags: { ...DEFAULT_FLAGS, domain: "bookinfo.svc.cluster.local", proxyComponentLogLevel: "misc:error" },
    node: {
      type: "sidecar",
      ips: ["10.44.0.17"],
      ipMode: "ipv4",
      id: "reviews-v1-7f9b8c-abcde.bookinfo",
      domain: "bookinfo.svc.cluster.local",
      nodeId: "sidecar~10.44.0.17~reviews-v1-7f9b8c-abcde.bookinfo~bookinfo.svc.cluster.local",
      podName: "reviews-v1-7f9b8c-abcde",
      podNamespace: "bookinfo",
      serviceAccount: "bookinfo-reviews",
    },
    labels: {
      app: "reviews",
      version: "v1",
      "pod-template-hash": "7f9b8c",
      "security.istio.io/tlsMode": "istio",
      "topology.istio.io/locality": "us-east1.us-east1-b",
    },
    annotations: { "sidecar.istio.io/status": '{"containers":["istio-proxy"]}', "kubectl.kubernetes.io/default-container": "reviews" },
    root,
    uid: 1337,
    version: "1.28.0-agent",
  };
}

/** Node-metadata inputs for a plain sidecar with nothing optional set; tests override fields. */
export function baseNodeInputs(over: Partial<NodeMetadataInputs> = {}): NodeMetadataInputs {
  return {
    id: "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local",
    envs: [],
    proxyConfig: {},
    instanceIps: ["10.0.0.1"],
    pilotSubjectAltName: [],
    stsPort: 0,
    credentialSocketExists: false,
    customCredentialsFileExists: false,
    xdsRootCert: "",
    outlierLogPath: "",
    envoyStatusPort: 15021,
    envoyPrometheusPort: 15090,
    envoySecureMetricsPort: 0,
    envoySecureMergedMetricsPort: 0,
    exitOnZeroActiveConnections: false,
    metadataDiscovery: undefined,
    envoySkipDeprecatedLogs: false,
    workloadIdentitySocketFile: "socket",
    istioVersion: "1.0",
    podLabels: null,
    podAnnotations: null,
    ...over,
  };
}
