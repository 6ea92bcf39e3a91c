// A rendered pod's identity and its istio-proxy process for the injection differentials: what
// the API server, the node and the kubelet fill in, the same for both agents.

import { ROOT_MARK } from "./agent-run.ts";
import type { WorkloadCase } from "./injection-corpus.ts";
import { container, processOf, type Pod, type PodIdentity } from "./kubelet.ts";

/** The pod the ReplicaSet creates for case `i`, scheduled on node-1 (4 CPUs, 8 GiB allocatable). */
export function identityFor(w: WorkloadCase, i: number, rootCert: string): PodIdentity {
  const ns = (w.object.metadata as { namespace: string }).namespace;
  return {
    name: `${w.name}-7d9f8b6c5d-${(i * 7919).toString(36).padStart(5, "x").slice(-5)}`,
    namespace: ns,
    uid: `0000000${i}`.slice(-8) + "-1111-4222-8333-444455556666",
    podIP: `10.244.${1 + (i >> 8)}.${1 + (i & 0xff)}`,
    hostIP: "192.168.49.2",
    nodeName: "node-1",
    nodeCpu: "4",
    nodeMemory: "8Gi",
    token: "interop-token",
    rootCert,
  };
}

/**
 * The istio-proxy process of a rendered pod (paths under ROOT_MARK), sandboxed the same for both
 * agents: ProxyConfig's binaryPath is the Envoy stand-in (`envoy`, filled in by the runner),
 * the version stamp and the cloud platform fixed (docs/interop.md, Normalisation).
 */
export function proxyProcess(pod: Pod, envoy = "<ENVOY>"): { args: string[]; env: Record<string, string> } {
  const c = container(pod, "istio-proxy");
  if (!c) throw new Error("the rendered pod has no istio-proxy container");
  const p = processOf(pod, c, ROOT_MARK);
  const pc = JSON.parse(p.env.PROXY_CONFIG?.trim() || "{}") as Record<string, unknown>;
  pc.binaryPath = envoy;
  return { args: p.args, env: { ...p.env, PROXY_CONFIG: JSON.stringify(pc), CLOUD_PLATFORM: "none", ISTIO_META_ISTIO_VERSION: "1.32.0" } };
}
